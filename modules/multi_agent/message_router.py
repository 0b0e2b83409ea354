"""Receiver-decided message routing over durable per-agent queues (docs/ARCHITECTURE.md).

Every message to an agent (a user's message, a task, a question, an answer, a
completion notice) is first committed to the receiver's queue. Then the
receiver's state decides what happens:

- `waiting`, and the message answers its blocked ask -> the ask's tool call
  returns it (`resolved`);
- `running` (or waiting for something else) -> it stays queued and is drained
  before the agent's next model call (`injected_inline`); if the turn ends
  without another model call, the end-of-turn check starts a new turn;
- `idle` / `completed` -> one new turn starts that drains the whole queue
  (`triggered_new_turn`).

"Turn ends" and "message arrives" both write first and read second (state
then queue; queue then state), so at least one of them sees the other and
the message is never stranded; starting a turn is a compare-and-set on the
agent's state, so two of them never start two turns.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from enum import Enum
from typing import Any, Literal, NamedTuple

from sqlalchemy.exc import InterfaceError, OperationalError
from sqlalchemy.orm import Session

from modules.multi_agent import agent_state
from modules.multi_agent.pending import (
    INJECTED_INLINE,
    MESSAGE_TYPES,
    QUEUED,
    RESOLVED,
    TRIGGERED_NEW_TURN,
    AskWaiter,
    PendingMessage,
    RouteError,
    RouteResult,
    history_draft,
    history_text,
)
from modules.multi_agent.router_hooks import RouterHooks
from modules.storage import agents as agent_store
from modules.storage import messages as message_store
from modules.storage import pending_messages as queue
from modules.storage import send_batch, tasks, unrouted
from modules.storage.agents import ReceiverRow
from modules.storage.db import Database, DatabaseUnavailable
from modules.storage.group_commit import GroupCommit
from modules.storage.message_meta import MessageMeta
from modules.storage.models import Message
from modules.storage.records import ask_consumer, new_id

log = logging.getLogger(__name__)

__all__ = ["INJECTED_INLINE", "MESSAGE_TYPES", "QUEUED", "RESOLVED", "TRIGGERED_NEW_TURN", "AskWaiter",
           "MessageRouter", "PendingMessage", "RouteError", "RouteResult", "history_draft", "history_text"]


class _Release(NamedTuple):
    """A held message released to its receiver; `task_id`: the task its idle receiver's turn takes (None: no claim
    in the release's transaction); `claimed_meta`: the message's meta when it claims (see `release`)."""

    message: PendingMessage
    task_id: str | None
    claimed_meta: Callable[[str], MessageMeta] | None = None


class _Claim(NamedTuple):
    """The release claimed its receiver's turn: `start` runs it once the release commits."""

    start: Callable[[], str]


class _Seen(Enum):
    CLAIMED_BEFORE = "a release before it in its batch claimed its receiver: read again after the commit"


# What a release comes to: its receiver (released; delivered after the commit), a claimed turn, its receiver
# claimed by a release before it, None (released before, by another process) or the error its caller gets.
Released = ReceiverRow | _Claim | Literal[_Seen.CLAIMED_BEFORE] | RouteError | None


class MessageRouter:
    """`settle_s`: a completion notice to an idle agent that still has background work running waits
    until no other notice arrived for this long (at most `max_settle_s`), so a wave of completions
    costs one turn, not one each; the last completion of all wakes the agent at once."""

    def __init__(self, db: Database, *, spawn: Callable[..., Any] | None = None, settle_s: float = 0.0,
                 max_settle_s: float = 0.5, rescan_s: float = 1.0, hooks: RouterHooks | None = None,
                 writer: GroupCommit | None = None):
        """`hooks`: what the server does for the router (`RouterHooks`; the defaults serve a router alone);
        `writer`: the process's group commit (concurrent sends share its transactions)."""
        self._db = db
        self._writer = writer or GroupCommit(db)  # concurrent sends share transactions
        # A blocked ask also looks in its queue this often, for an answer that another server process
        # queued and whose signal (`hooks.notify_peers`) it missed.
        self._rescan_s = rescan_s
        self._spawn = spawn
        self._settle_s = settle_s
        self._max_settle_s = max_settle_s
        self._last_notice: dict[str, float] = {}
        self._waiters: dict[str, AskWaiter] = {}
        self._answers_taken: set[str] = set()  # agents whose ask took an answer here since their turn's end looked
        self._lock = threading.Lock()
        self._hooks = hooks or RouterHooks()

    # -- sending ---------------------------------------------------------
    def route_message(self, target_agent_id: str, message: PendingMessage) -> RouteResult:
        """Commit the message to the receiver's queue, then deliver it by the receiver's state."""
        if message.target_agent_id != target_agent_id:
            raise ValueError("message target does not match")
        receiver = self._writer.call_batched(self._enqueue_sends, message,
                                             one_statement=send_batch.one_statement(self._db.dialect))
        # Delivered again when it was queued before (a retried send whose first try died after queueing):
        # delivery only starts or joins the turn that drains the queue, so it never duplicates the message.
        return self._deliver_stored(message, receiver)

    def _enqueue_sends(self, s: Session, messages: list[PendingMessage]) -> list[ReceiverRow | RouteError]:
        """The sends of one group-commit batch: their receivers share-locked and the messages of live receivers
        queued (an INSERT that skips an id queued before), in one statement on PostgreSQL and two elsewhere
        (`storage.send_batch`); per message, its receiver's row or the RouteError its sender gets."""
        receivers = send_batch.queue_sends_in(s, {m.target_agent_id for m in messages},
                                              [m.row_values() for m in messages])
        outcomes: list[ReceiverRow | RouteError] = []
        for message in messages:
            agent = receivers.get(message.target_agent_id)
            if agent is None:
                outcomes.append(RouteError(f"no agent {message.target_agent_id}"))
            elif agent.terminated:
                outcomes.append(RouteError(f"{agent.display_name} was terminated and takes no more messages"))
            else:
                outcomes.append(agent)
        return outcomes

    def _deliver_stored(self, message: PendingMessage, receiver: ReceiverRow | None = None) -> RouteResult:
        try:
            return self.deliver(message, receiver=receiver)
        except (OperationalError, InterfaceError):
            # Stored all the same: the membership sweep starts the turn that reads it once the database is back.
            log.warning("message %s is stored, but the database went away before its delivery", message.id)
            return RouteResult(QUEUED)

    def release(self, message: PendingMessage, *,
                claimed_meta: Callable[[str], MessageMeta] | None = None) -> RouteResult | None:
        """Queue a user message held for routing (`storage.unrouted`) for the receiver it now names, then
        deliver it as `route_message` does; None when another process released it first. Releases of many
        conversations at once share the group commit's transactions, as sends do. With `RouterHooks.claims`, an
        idle receiver's turn is claimed in the same transaction: one commit (and one wait for it) fewer; then
        the message keeps `claimed_meta(task_id)` instead of its own meta (the routing inbox's record of where it
        went, written with it rather than by a write of its own after it), and the result says `claimed`."""
        claims = self._hooks.claims
        if claims is None:
            return self._delivered(message, self._writer.call_batched(self._release_batch, _Release(message, None)))
        task_id = new_id()
        with claims.claiming(task_id):
            try:
                released: Released = self._writer.call_batched(self._release_batch,
                                                               _Release(message, task_id, claimed_meta))
            except (RouteError, DatabaseUnavailable):
                raise
            except Exception:  # the claim's own failure must not keep the message from its queue (nor its turn)
                log.exception("message %s: its receiver's claim failed; the message is released alone", message.id)
                released = self._writer.call_batched(self._release_batch, _Release(message, None))
            if isinstance(released, _Claim):
                return RouteResult(TRIGGERED_NEW_TURN, released.start(), claimed=True)
        return self._delivered(message, released)

    def _delivered(self, message: PendingMessage, released: Released) -> RouteResult | None:
        if released is None:
            return None
        assert not isinstance(released, _Claim | RouteError)  # started above; raised by the group commit
        return self._deliver_stored(message, None if released is _Seen.CLAIMED_BEFORE else released)

    def _release_batch(self, s: Session, releases: list[_Release]) -> list[Released]:
        """The releases of one batch: their receivers share-locked in one statement (as sends lock them, so a
        release of a message for a busy agent blocks no writer of its turn); per message, what `release` makes
        of it (`Released`). An idle receiver's claim locks it for its turn, as every claim does."""
        receivers = agent_store.lock_many_for_queueing_in(s, {r.message.target_agent_id for r in releases})
        claims = self._hooks.claims
        claimed: set[str] = set()
        outcomes: list[Released] = []
        for release in releases:
            message = release.message
            agent = receivers.get(message.target_agent_id)
            if agent is None or agent.terminated:
                name = agent.display_name if agent else message.target_agent_id
                outcomes.append(RouteError(f"{name} takes no more messages"))
                continue
            task_id = release.task_id if agent.id not in claimed \
                and agent.state in (agent_state.IDLE, agent_state.COMPLETED) else None  # a turn to claim
            # Its meta for the claim, written by the release itself (the claim that follows almost never fails).
            meta = release.claimed_meta(task_id) if task_id is not None and release.claimed_meta else message.meta
            if not unrouted.release_in(s, message.id, dict(
                    target_agent_id=message.target_agent_id, type=message.type, question_id=message.question_id,
                    meta=meta.dump())):
                outcomes.append(None)
            elif agent.id in claimed:
                outcomes.append(_Seen.CLAIMED_BEFORE)
            elif claims is not None and task_id is not None \
                    and (start := claims.claim_in(s, agent.id, task_id)) is not None:
                claimed.add(agent.id)
                outcomes.append(_Claim(start))
            else:
                if meta is not message.meta:  # no turn after all: the message's own meta, as its caller expects
                    unrouted.set_meta_in(s, message.id, message.meta)
                outcomes.append(agent)
        return outcomes

    def stored(self, message_id: str) -> PendingMessage | None:
        """A message already in a queue (queued or consumed), by id."""
        row = queue.get_message(self._db, message_id)
        return PendingMessage.from_row(row) if row is not None else None

    def enqueue_in(self, session: Session, message: PendingMessage) -> bool:
        """Enqueue inside the caller's transaction (a completion is queued with its finish mark).
        Call `deliver` after the commit."""
        return queue.enqueue_in(session, message.row_values())

    def enqueue_many_in(self, session: Session, messages: list[PendingMessage]) -> list[PendingMessage]:
        """`enqueue_in` for a batch (a wave of completions): one lookup and one insert; returns the new ones."""
        fresh = set(queue.enqueue_many_in(session, [m.row_values() for m in messages]))
        return [m for m in messages if m.id in fresh]

    def deliver(self, message: PendingMessage, *, receiver: ReceiverRow | None = None) -> RouteResult:
        """The receiver-decided step for a message already committed to its queue. `receiver`: its row as
        read under the lock of the transaction that queued the message (no second read): a state it had at
        that commit is as good as one read after it, since a change of state waits for the commit and a turn
        that ends later looks at its queue after its end (docs/ARCHITECTURE.md)."""
        target = message.target_agent_id
        with self._lock:
            waiter = self._waiters.get(target)
        if waiter is not None and waiter.matches(message) and self._resolve(waiter, message):
            return RouteResult(RESOLVED, self._hooks.active_task_of(target))
        agent = receiver if receiver is not None else agent_store.get_agent(self._db, target)
        if agent is not None and agent.terminated:
            # Queued past the termination (a command of the agent that ended after it): nobody will read it.
            with self._db.write() as s:
                queue.discard_in(s, target, "terminated")
            return RouteResult(INJECTED_INLINE)
        if waiter is None and agent is not None and agent.state == agent_state.WAITING:
            self._hooks.notify_peers(target)
        if agent is not None and agent.state in (agent_state.IDLE, agent_state.COMPLETED):
            if (message.type == "notice" and self._settle_s > 0 and self._spawn is not None
                    and self._hooks.more_completions_expected(target)):
                self._wake_when_settled(target)
                return RouteResult(TRIGGERED_NEW_TURN)
            task_id = self._hooks.wake(target)
            if task_id is not None:
                return RouteResult(TRIGGERED_NEW_TURN, task_id)
        return RouteResult(INJECTED_INLINE, self._hooks.active_task_of(target))

    def _wake_when_settled(self, agent_id: str) -> None:
        with self._lock:
            first = agent_id not in self._last_notice
            self._last_notice[agent_id] = time.monotonic()
        spawn = self._spawn  # set: a notice settles only where the router can spawn (see route_message)
        if first and spawn is not None:
            spawn(self._settle_then_wake, agent_id)

    def _settle_then_wake(self, agent_id: str) -> None:
        deadline = time.monotonic() + self._max_settle_s
        while True:
            with self._lock:
                quiet_at = self._last_notice[agent_id] + self._settle_s
            current = time.monotonic()
            if current >= quiet_at or current >= deadline:
                break
            time.sleep(min(quiet_at, deadline) - current)
        with self._lock:
            del self._last_notice[agent_id]
        self._hooks.wake(agent_id)

    # -- draining --------------------------------------------------------
    def drain_to_history_in(self, session: Session, agent_id: str, conversation_id: str, consumed_by: str,
                            *, last_starts_work: bool) -> list[Message]:
        """Move the whole queue into the agent's history inside the caller's transaction.

        With `last_starts_work`, the last message is the one that starts a turn and the
        ones before it are marked `starts_work: false` (the notification pool's N-1 + 1).
        """
        rows = queue.drain_in(session, agent_id, consumed_by)
        drafts = [
            history_draft(PendingMessage.from_row(row), starts_work=last_starts_work and i == len(rows) - 1)
            for i, row in enumerate(rows)
        ]
        return message_store.append_in(session, conversation_id, agent_id, drafts) if drafts else []

    def consume_pending_messages(self, agent_id: str, conversation_id: str, consumed_by: str,
                                 owner: str | None = None) -> list[Message]:
        """Drain the queue into the history in one transaction: each message is consumed exactly once. The
        transaction is the group commit's (the drains before every model call of hundreds of turns, and the
        sends, share commits). `owner`: nothing is drained unless the task `consumed_by` is still its (a turn
        taken over leaves the queue to the new owner's turn)."""
        return self._writer.call(lambda s: [] if owner and not tasks.still_owned_in(s, consumed_by, owner) else
                                 self.drain_to_history_in(s, agent_id, conversation_id, consumed_by,
                                                          last_starts_work=False))

    def has_queued(self, agent_id: str) -> bool:
        return queue.has_queued(self._db, agent_id)

    # -- blocking asks ---------------------------------------------------
    def begin_ask(self, agent_id: str, question_id: str, asked_agent_id: str | None,
                  *, from_user: bool = False) -> AskWaiter:
        """Register the waiter before the question is sent, so no answer can slip past it."""
        waiter = AskWaiter(agent_id, question_id, asked_agent_id, from_user)
        with self._lock:
            self._waiters[agent_id] = waiter
        return waiter

    def wait_for_answer(self, waiter: AskWaiter, timeout_s: float, should_stop: Callable[[], bool],
                        poll_s: float = 0.1) -> PendingMessage | None:
        """Block until the answer arrives (one that came early is taken from the queue), the
        timeout passes, or the turn is stopped. None on timeout or stop."""
        deadline = time.monotonic() + timeout_s
        try:
            self._take_queued_answer(waiter)
            next_scan = time.monotonic() + self._rescan_s
            while not waiter.event.is_set():
                remaining = deadline - time.monotonic()
                if remaining <= 0 or should_stop():
                    break
                waiter.event.wait(min(poll_s, remaining))
                if time.monotonic() >= next_scan:  # an answer queued by another server process
                    self._take_queued_answer(waiter)
                    next_scan = time.monotonic() + self._rescan_s
        finally:
            self.end_ask(waiter)
        return waiter.answer  # settled: once closed, no answer is handed to this waiter any more

    def on_peer_queued(self, agent_id: str) -> None:
        """Another process queued a message for this agent: if its ask is blocked here, look now."""
        with self._lock:
            waiter = self._waiters.get(agent_id)
        if waiter is not None and not waiter.event.is_set():
            self._take_queued_answer(waiter)

    def _take_queued_answer(self, waiter: AskWaiter) -> None:
        for row in queue.list_queued(self._db, waiter.agent_id):
            queued = PendingMessage.from_row(row)
            if waiter.matches(queued) and self._resolve(waiter, queued):
                return

    def end_ask(self, waiter: AskWaiter) -> None:
        with self._lock:
            waiter.closed = True
            if self._waiters.get(waiter.agent_id) is waiter:
                del self._waiters[waiter.agent_id]

    def forget_answers_taken(self, agent_id: str) -> bool:
        """Whether an ask of the agent took an answer in this process since the last call (and forget it). Only
        then can its turn's end find an answer taken but never written into the history
        (`requeue_unwritten_answers_in`): a turn without one skips that statement. Asks run in their turn's
        process, so no other process takes an answer for it; recovery, which ends another process's turn,
        always looks."""
        with self._lock:
            if agent_id not in self._answers_taken:
                return False
            self._answers_taken.discard(agent_id)
            return True

    def waiting_for_user(self, agent_ids: list[str]) -> list[AskWaiter]:
        """The blocked ask_user calls of these agents in this process, oldest first."""
        with self._lock:
            waiters = [w for a in agent_ids if (w := self._waiters.get(a)) and w.from_user]
        return sorted(waiters, key=lambda w: w.since)

    def take(self, message_id: str, consumed_by: str) -> PendingMessage | None:
        """Consume one queued message by compare-and-set (None when someone else took it)."""
        with self._db.write() as s:
            row = queue.take_in(s, message_id, consumed_by=consumed_by)
            return PendingMessage.from_row(row) if row is not None else None

    def _resolve(self, waiter: AskWaiter, message: PendingMessage) -> bool:
        """Hand the message to the blocked call: taken from the queue by compare-and-set, so once.

        The ask may end (timeout, stop) while its answer is being taken; then the message goes back to
        the queue, where the agent's next drain (or turn) finds it, and the caller delivers it as usual."""
        consumed_by = ask_consumer(waiter.question_id)
        with self._db.write() as s:
            taken = queue.take_in(s, message.id, consumed_by=consumed_by)
        if taken is None:
            return False
        with self._lock:
            self._answers_taken.add(waiter.agent_id)  # before the ask can see it, so before its turn can end
            if not waiter.closed:
                waiter.answer = message
                waiter.event.set()
                return True
        with self._db.write() as s:
            queue.requeue_in(s, message.id, consumed_by=consumed_by)
        # Delivered afresh by the receiver's state now: its turn may have ended meanwhile, with nothing
        # queued at its end-of-turn check, or a new ask may be waiting for exactly this.
        return self.deliver(message).delivery == RESOLVED
