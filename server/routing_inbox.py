"""Acknowledge first, route after: a user's message is stored, answered, and only then routed.

Routing may take a model request (one to three seconds with a real model), so the
sender hears back as soon as the message is durable (`storage.unrouted`). One
worker per conversation then routes its held messages strictly in the order they
were sent, so a fast-path message never overtakes an earlier one still waiting for
its model answer; each outcome goes to the conversation's room as a `route` event
and is kept on the message for `GET /api/messages/<id>`. Each held message names the
process that routes it; those of a process gone and forgotten are claimed by a live
one (`take_over`, at each membership sweep and at start-up), and a process routes its
own again when the database is back after an outage (`resume`, which retries its own
reads); a worker that fails tries again, never giving up while the process lives and
messages of its conversation are held (`_retry_later`).
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time

from sqlalchemy.orm import Session

from modules.agents.profiles import MASTER_KIND
from modules.event_catalogue import RouteEvent
from modules.multi_agent.message_router import TRIGGERED_NEW_TURN, PendingMessage, RouteError, RouteResult
from modules.multi_agent.user_questions import StaleQuestion
from modules.statuses import Delivery, MessageSource, Visibility
from modules.storage import conversations as conversation_store
from modules.storage import pending_messages, unrouted
from modules.storage.message_meta import MessageMeta, RoutedTo
from modules.storage.models import Agent, Conversation
from server.runtime import Runtime
from server.sender import to_room
from server.turns.events import emit_pending_count
from server.user_routing import PIPELINE, RouteDecision, UserMessageRouting

log = logging.getLogger(__name__)

ROUTING = unrouted.ROUTING
RETRY_S = 1.0  # a worker that failed tries again after 1, 2, 4, ... s,
RETRY_MAX_S = 60.0  # and then every minute, until its conversation has no held message left


def retry_delay(failures: int) -> float:
    """The wait before the next try after `failures` failures in a row: doubling, capped at RETRY_MAX_S (read at
    each call, so a test's launcher may shorten both)."""
    return min(RETRY_S * 2.0 ** min(failures - 1, 32), RETRY_MAX_S)


def _log_failure(exc: Exception, failures: int, message: str) -> None:
    """The stack trace with a worker's first failure in a row, one line with each next: the worker never gives up,
    and an hour's outage would otherwise log a stack trace a minute for each conversation with held messages."""
    if failures == 1:
        log.error(message, exc_info=exc)
    else:
        log.warning("%s: %s", message, str(exc).splitlines()[0] if str(exc) else type(exc).__name__)


class RoutingInbox:
    def __init__(self, rt: Runtime, routing: UserMessageRouting):
        self._rt = rt
        self._routing = routing
        self._lock = threading.Lock()
        self._working: set[str] = set()
        self._again: set[str] = set()
        self._failures: dict[str, int] = {}  # conversation -> the worker's failures in a row
        self._retrying: set[str] = set()  # conversations with a retry waiting: never more than one each

    def hold(self, conv: Conversation, master_id: str, content: str, question_id: str | None,
             message_id: str | None, client_message_id: str | None, *, title: str | None = None) -> PendingMessage:
        """Store the message for routing (addressed to the conversation's master, `master_id`, until routed) and
        start routing it. The conversation is touched (and given `title`) in the same transaction, which
        concurrent sends share (the group commit)."""
        rt = self._rt
        meta = MessageMeta(source=MessageSource.USER, visibility=Visibility.CHAT,
                           client_message_id=client_message_id or None)
        message = PendingMessage.new(conversation_id=conv.id, target_agent_id=master_id, type="message",
                                     content=content, source_display_name="user", question_id=question_id,
                                     meta=meta, id=message_id)
        values = message.row_values()

        def store(s: Session) -> None:
            conversation_store.touch_conversation_in(s, conv.id, title)
            unrouted.store_in(s, values, routing_process=rt.membership.process_id)

        rt.writer.call(store)
        self.kick(conv.id)
        return message

    def is_held(self, message_id: str) -> bool:
        row = pending_messages.get_message(self._rt.db, message_id)
        return row is not None and row.status == ROUTING

    def kick(self, conversation_id: str) -> None:
        """Make sure a worker routes the conversation's held messages (one worker per conversation)."""
        with self._lock:
            if conversation_id in self._working:
                self._again.add(conversation_id)
                return
            self._working.add(conversation_id)
        self._rt.spawn(self._work, conversation_id)

    def take_over(self) -> None:
        """Route the held messages that no registered process routes (their process died and was forgotten):
        a compare-and-set claims each conversation's for this process, so one survivor routes them
        (`unrouted.claim_orphans`). The membership sweep calls it after forgetting gone processes.

        Each claimed conversation is kicked at once: a claim is this process's from its commit, and no later
        sweep sees it as an orphan again, so one lost to a later claim's failure would wait for the next send.
        A claim that fails is kicked too (its commit may have landed unreported); where another process claimed
        the messages, the release's compare-and-set still queues each once."""
        me = self._rt.membership.process_id
        for conversation_id in unrouted.orphaned_conversations(self._rt.db, me):
            try:
                claimed = unrouted.claim(self._rt.db, conversation_id, me)
            except Exception:
                self.kick(conversation_id)
                raise
            if claimed:
                self.kick(conversation_id)

    def resume(self) -> None:
        """At start-up and when the database is back after an outage: route this process's held messages and
        take over those of forgotten processes, in a task of its own that tries again (after 1, 2, 4, ... s,
        then every RETRY_MAX_S) until its reads succeed once: nothing else would call it again."""
        self._rt.spawn(self._resume)

    def _resume(self) -> None:
        failures = 0
        while True:
            try:
                mine = unrouted.conversations_routed_by(self._rt.db, self._rt.membership.process_id)
                self.take_over()
            except Exception:
                failures += 1
                delay = retry_delay(failures)
                log.exception("resuming the routing of held messages failed (%d in a row); again in %g s",
                              failures, delay)
                time.sleep(delay)
                continue
            for conversation_id in mine:
                self.kick(conversation_id)
            return

    def _work(self, conversation_id: str) -> None:
        try:
            while True:
                for row in unrouted.unrouted(self._rt.db, conversation_id):
                    self._route(PendingMessage.from_row(row))
                with self._lock:
                    # A message held after the read above kicked (`_again`): without a kick none was, so no
                    # second read to find the conversation empty.
                    if conversation_id not in self._again:
                        self._working.discard(conversation_id)
                        self._failures.pop(conversation_id, None)
                        return
                    self._again.discard(conversation_id)
        except Exception as exc:
            with self._lock:
                self._working.discard(conversation_id)
                self._again.discard(conversation_id)
                failures = self._failures[conversation_id] = self._failures.get(conversation_id, 0) + 1
                scheduled = conversation_id in self._retrying
                self._retrying.add(conversation_id)
            # A database that did not answer in time under load is no outage (nothing resumes the inbox), and the
            # message was acknowledged already: without a retry it waited for the conversation's next send, and
            # its sender for a reply. The retry reads the held messages again; finding none, it ends.
            if scheduled:
                _log_failure(exc, failures, f"routing the held messages of {conversation_id} failed ({failures} in "
                                            "a row); a retry is waiting already")
                return
            delay = retry_delay(failures)
            _log_failure(exc, failures, f"routing the held messages of {conversation_id} failed ({failures} in a "
                                        f"row); again in {delay:g} s")
            self._rt.spawn(self._retry_later, conversation_id, delay)

    def _retry_later(self, conversation_id: str, delay: float) -> None:
        time.sleep(delay)
        with self._lock:
            self._retrying.discard(conversation_id)
        self.kick(conversation_id)

    def _decide(self, conv: Conversation, agents: list[Agent], message: PendingMessage) -> RouteDecision:
        try:
            return self._routing.decide(conv, agents, message.content, message.question_id)
        except StaleQuestion:  # the question it answered closed while the message waited: route it as a message
            return self._routing.decide(conv, agents, message.content, None)

    def _route(self, held: PendingMessage) -> None:
        rt = self._rt
        found = conversation_store.get_conversation_and_agents(rt.db, held.conversation_id)
        if found is None:  # deleted while the message waited: its rows go with it
            log.info("message %s: its conversation is gone", held.id)
            return
        conv, agents = found
        master = next(a for a in agents if a.kind == MASTER_KIND)
        try:
            with rt.tracing.span("route message", {"gen_ai.conversation.id": conv.id,
                                                    "chat.message_id": held.id}) as span:
                decision = self._decide(conv, agents, held)
                if span is not None:
                    span.set_attribute("chat.route", decision.route)
                    span.set_attribute("chat.target_agent", decision.target.display_name)
        except Exception:
            log.exception("routing message %s failed; the master gets it", held.id)
            decision = RouteDecision(PIPELINE, master, reason="routing failed")
        rt.metrics.routes.labels(decision.route).inc()
        meta = held.meta.merged(route=decision.route, rewritten_query=decision.rewritten or None,
                                route_reason=decision.reason or None)
        target = decision.target

        def routed_to(agent: Agent, delivery: Delivery | None, task_id: str | None) -> RoutedTo:
            return RoutedTo(route=decision.route, delivery=delivery, task_id=task_id, agent_id=agent.id,
                            target_agent=agent.display_name)

        def release(agent: Agent, message_type: str, question_id: str | None) -> RouteResult | None:
            """Where the release starts the agent's turn, it writes the record of the delivery itself. The message
            keeps the time it was sent (`created_at`, as stored): a blocked ask that began after it is not
            answered by it (`AskWaiter.matches`)."""
            message = dataclasses.replace(held, target_agent_id=agent.id, type=message_type, question_id=question_id,
                                          meta=meta)
            return rt.router.release(message, claimed_meta=lambda task_id: meta.merged(
                routed=routed_to(agent, TRIGGERED_NEW_TURN, task_id)))

        try:
            routed = release(target, "answer" if decision.question_id else "message", decision.question_id)
        except RouteError as exc:  # its agent was terminated in between: the master takes it
            log.warning("message %s: %s; the master gets it", held.id, exc)
            target = master  # (a conversation's master is never replaced)
            routed = release(target, "message", None)
        if routed is None:
            return  # another process routed it first
        outcome = routed_to(target, routed.delivery, routed.task_id)

        # The receiver reasons next: a message queued behind this one is judged against it, not against a routing
        # stage that recorded itself while deciding this one. A turn this delivery started on the user's messages
        # recorded it in its claim's transaction already, and a release that claimed the turn, where it went.
        recorded = routed.delivery == TRIGGERED_NEW_TURN and routed.task_id is not None \
            and rt.tasks.recorded_active(routed.task_id)

        def record(s: Session) -> None:
            # One transaction with the delivery's record, the group commit's.
            if not recorded:
                rt.active_agents.set_active_agent_in(s, conv.id, target.id)
            if not routed.claimed:
                unrouted.record_delivery_in(s, held.id, meta, outcome)

        if not (recorded and routed.claimed):
            rt.writer.call(record)
        if routed.delivery != TRIGGERED_NEW_TURN or routed.task_id is None:
            emit_pending_count(rt, conv.id, target.id)  # (a turn this delivery started sends it as it starts)
        # Not a task's logged event: no `task_id`/`idx` (clients read those as a place in a task's log); the
        # task's own events follow, and GET /api/messages/<id> has the task id.
        to_room(rt.transport, RouteEvent(route=decision.route, delivery=routed.delivery, agent_id=target.id,
                                         target_agent=target.display_name, message_id=held.id,
                                         conversation_id=conv.id), conv.id)
