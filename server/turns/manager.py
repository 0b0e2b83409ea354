"""The TurnManager starts, runs and ends the turns of this process (docs/ARCHITECTURE.md, "The turn package").

A turn is one task of one agent. Turns start in one place: `create_chat_task` hands the
manager's claim to the loop's poller (`poll_completion_notifications`,
server/chat_flow_task_main.py), which collects the agent's whole queue inside the claim's
transaction (the idle agent claimed by compare-and-set, the task created): the first N-1
messages become preceding notices (`starts_work: false`), the last the trigger; the
task's event log begins with all N, in order. The loop comes in as a `TurnLoop`, so this
package does not import it; a turn ends in server/turns/end.py, then `_finish` starts
the follow-up turn the same way; one whose thread died is ended by server/turns/recovery.py.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial
from typing import Any, NamedTuple

from sqlalchemy.exc import InterfaceError, OperationalError
from sqlalchemy.orm import Session

from modules.agents.profiles import MASTER_KIND
from modules.multi_agent import agent_state
from modules.multi_agent.agent_state import StateChange
from modules.multi_agent.message_router import TRIGGERED_NEW_TURN
from modules.peer_signals import STOP
from modules.statuses import MessageSource
from modules.storage import agents as agent_store
from modules.storage import pending_messages as queue
from modules.storage import tasks as task_store
from modules.storage.models import Agent, Message, Task
from modules.storage.records import new_id
from modules.storage.task_meta import TaskMeta
from server.sender import TaskEventSender, to_room
from server.turns.context import TurnLoop, TurnRuntime
from server.turns.end import BackgroundFlags, after_commit, background_flags, finish_turn
from server.turns.events import emit_pending_count, state_event, user_message_events
from server.turns.recovery import Recovery
from server.turns.types import FAILED, STOPPED, Collect, StartCheck, Turn, TurnOutcome
from server.turns.waiters import TurnWaiter, TurnWaiters

log = logging.getLogger(__name__)

CRASHED = {"code": "internal_error", "message": "the task ended unexpectedly"}
DATABASE_LOST = {"code": "database_unavailable", "message": "the database stopped answering during the turn"}


class _NoTurn(Exception):
    """The agent was claimed by another caller, or its queue emptied, between the checks and the claim."""


class _Live(NamedTuple):
    turn: Turn
    sender: TaskEventSender


Payloads = list[tuple[str, dict[str, Any]]]


class _Claimed(NamedTuple):
    """What a claim's transaction wrote: the task (`running`), and the first events of its log."""

    task: Task
    agent: Agent
    drained: list[Message]
    sender: TaskEventSender
    start: Payloads  # the messages it starts on (with their route) and the claim's `agent_state`, from index 0


class TurnManager:
    """Built by `Runtime` before the router, which it only uses once turns run: it takes nothing from `rt`
    here but the agent states it listens to. `loop`: how a turn runs and where it starts (`TurnLoop`)."""

    def __init__(self, rt: TurnRuntime, loop: TurnLoop):
        self._rt = rt
        self._loop = loop
        self._lock = threading.RLock()
        self._running: dict[str, _Live] = {}
        self._by_agent: dict[str, str] = {}
        self._starting: set[str] = set()  # claimed in the database, not yet registered here
        self._waiters = TurnWaiters()
        self._recovery = Recovery(rt, self.runs_here, self.create_chat_task)
        rt.agent_states.subscribe(self._emit_state_change)

    # -- queries ---------------------------------------------------------
    def active_task_of_agent(self, agent_id: str) -> str | None:
        """The agent's task in progress, run by this process or, failing that, by another one."""
        with self._lock:
            task_id = self._by_agent.get(agent_id)
        return task_id or task_store.active_task_of_agent(self._rt.db, agent_id)

    def runs_here(self, task_id: str) -> bool:
        """Whether a thread of this process runs (or is about to run) the task."""
        with self._lock:
            return task_id in self._running or task_id in self._starting

    def recorded_active(self, task_id: str) -> bool:
        """Whether the task runs here and its start recorded its agent as the active one (a turn on the user's
        messages, in the claim's transaction): the routing inbox's record of the delivery that started it need not
        write it again."""
        with self._lock:
            live = self._running.get(task_id)
        return live is not None and live.turn.from_user

    def more_completions_expected(self, agent_id: str) -> bool:
        """Whether completions may still come for the agent: its commands or sub-agents still run."""
        return self._rt.commands.has_running(agent_id=agent_id) or self._rt.sub_agents.has_running_children(agent_id)

    def background_flags(self, conversation_id: str) -> BackgroundFlags:
        return background_flags(self._rt, conversation_id)

    def expect_turn(self, agent_id: str) -> TurnWaiter:
        return self._waiters.expect(agent_id)

    # -- starting a turn ---------------------------------------------------
    def create_chat_task(self, agent_id: str, queued: bool = False) -> str | None:
        """Start a turn for an idle/completed agent on what is queued for it; its task id, or None when the
        agent is busy, has nothing queued, or another caller won the claim. What the turn takes from the queue
        is decided by the loop's poller (`poll_completion_notifications`), the one place that does it.
        `queued`: the caller has just queued a message for the agent (no look at the queue before the claim)."""
        return self._loop.poll(self._rt, agent_id, self._claim, queued)

    def wake(self, agent_id: str) -> str | None:
        """The router's wake (`RouterHooks.wake`): it calls it right after a message for the agent was
        committed to its queue."""
        return self.create_chat_task(agent_id, queued=True)

    def _claim(self, agent_id: str, collect: Collect) -> str | None:
        """Claim the agent, `collect` the messages the turn starts on and create its task, in one transaction;
        the task is then run on a thread of its own. None when there is no turn to start."""
        task_id = new_id()
        with self.claiming(task_id):
            try:
                # One transaction, the group commit's (a wave of sends starts its turns in shared commits), with no
                # reads ahead of it: every check is made once, under the agent's lock.
                claimed = self._rt.event_log.writer.call(lambda s: self._start_in(s, agent_id, task_id, collect))
            except _NoTurn:
                return None
            return self._start(claimed) if claimed is not None else None

    # The router's claim inside the transaction that releases a user's message (`RouterHooks.claims`).
    @contextmanager
    def claiming(self, task_id: str) -> Iterator[None]:
        with self._lock:
            self._starting.add(task_id)  # so the watchdog never mistakes the fresh task for an orphan
        try:
            yield
        finally:
            with self._lock:
                self._starting.discard(task_id)

    def claim_in(self, session: Session, agent_id: str, task_id: str) -> Callable[[], str] | None:
        """`TurnClaims.claim_in`: the claim, with what the loop collects from the queue, in the caller's
        transaction, which has just queued a message for the agent (so the claim does not look at the queue)."""
        claimed = self._start_in(session, agent_id, task_id, self._loop.collect(self._rt, agent_id), queued=True)
        return partial(self._start, claimed) if claimed is not None else None

    def _start(self, claimed: _Claimed) -> str:
        """Run a committed claim's turn on a thread of its own; its task id."""
        self._register(claimed)
        self._rt.spawn(self._supervise, claimed.task.id, claimed.start)
        return claimed.task.id

    def _start_in(self, s: Session, agent_id: str, task_id: str, collect: Collect, *,
                  queued: bool = False) -> _Claimed | None:
        """The claim, the collected messages and the task, together: an agent is never `running` without its
        task, so nothing (recovery included) can mistake a fresh claim for an orphan. The task is written
        `running`, with the first events of its log, so its thread starts without a write of its own (under
        load each write is a wait for a group-commit batch, a turn of the whole event loop). None, with nothing
        written, when there is no turn to start; `_NoTurn` (the batch rolled back, its other writers retried
        alone) only when the queue emptied between the look and the collection under the claim, which cannot
        happen when the caller's transaction has `queued` a message for the agent (no look at the queue then)."""
        # Locked first, so a termination cannot slip in between this check and the claim.
        agent = agent_store.lock_for_turn_in(s, agent_id)
        if agent is None or agent.terminated or agent.state not in (agent_state.IDLE, agent_state.COMPLETED):
            return None
        if not queued and not queue.has_queued_in(s, agent_id):
            return None
        claim = self._rt.agent_states.transition_in(s, agent_id, agent_state.RUNNING, read=agent)
        if claim is None:
            return None
        drained = collect(s, agent, task_id)
        if not drained:
            raise _NoTurn
        from_user = all(m.typed_meta.source == MessageSource.USER for m in drained)
        if from_user:  # the pre-reasoning hook of its first request, in this transaction (server/turns/types.py)
            self._rt.active_agents.set_active_agent_in(s, agent.conversation_id, agent_id)
        # Written after the collection, whole: its trigger and messages in its one INSERT.
        task = task_store.create_task_in(s, conversation_id=agent.conversation_id, agent_id=agent_id,
                                         task_type="chat" if agent.kind == MASTER_KIND else "sub_agent",
                                         owner=self._rt.membership.process_id, task_id=task_id,
                                         trigger_message_id=drained[-1].message_id,
                                         meta=TaskMeta(message_ids=[m.message_id for m in drained],
                                                       from_user=from_user), running=True)
        sender = TaskEventSender(self._rt.event_log, self._rt.transport, task_id=task_id,
                                 conversation_id=agent.conversation_id, agent_id=agent_id)
        start = sender.payloads([e for msg in drained
                                 for e in user_message_events(msg, TRIGGERED_NEW_TURN, agent.display_name)]
                                + [state_event(claim)])
        task_store.insert_events_in(s, task_id, 0, start)
        return _Claimed(task, agent, drained, sender, start)

    def _register(self, claimed: _Claimed) -> None:
        rt = self._rt
        task, agent = claimed.task, claimed.agent
        from_user = task.typed_meta.from_user
        turn = Turn(task_id=task.id, conversation_id=agent.conversation_id, agent_id=agent.id,
                    display_name=agent.display_name, profile=rt.profile(agent.role), kind=agent.kind,
                    parent_id=agent.parent_id, from_user=from_user, drained=claimed.drained,
                    active_recorded=from_user)
        rt.event_log.begin(task.id, len(claimed.start))  # created by this claim, with its first events
        with self._lock:
            self._running[task.id] = _Live(turn, claimed.sender)
            self._by_agent[agent.id] = task.id

    # -- running ---------------------------------------------------------
    def _supervise(self, task_id: str, start: Payloads) -> None:
        """However the turn's thread ends, the task leaves this process's books: if it did not reach a final
        state, it is an orphan that the watchdog (or a stop) ends."""
        ended = False
        try:
            self._run_chat_task(task_id, start)
            ended = True
        finally:
            self._forget(task_id)
            if not ended:
                log.error("the thread of task %s died before ending it; the watchdog ends it", task_id)

    def _run_chat_task(self, task_id: str, start: Payloads) -> None:
        with self._lock:
            turn, sender = self._running[task_id]
        rt = self._rt
        outcome = TurnOutcome(FAILED, CRASHED)
        try:
            # The first events were written with the claim: they go to the room now. The room's queue count is
            # read once, and the first model call takes it (`StartCheck`) instead of reading it again.
            stopped = turn.stopped()
            sender.deliver(0, start)
            turn.start_check = StartCheck(emit_pending_count(rt, turn.conversation_id, turn.agent_id))
            if stopped:
                outcome = TurnOutcome(STOPPED)
            else:
                rt.metrics.turns_started.inc()
                with rt.tracing.span(f"invoke_agent {turn.display_name}", {
                        "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": turn.display_name,
                        "gen_ai.agent.id": turn.agent_id, "gen_ai.conversation.id": turn.conversation_id,
                        "chat.task_id": task_id}) as span:
                    outcome = self._loop.run(rt, turn, sender)
                    if span is not None:
                        span.set_attribute("chat.task_status", outcome.status)
        except (OperationalError, InterfaceError):
            log.exception("task %s lost its database", task_id)
            outcome = TurnOutcome(FAILED, DATABASE_LOST)
        except Exception:
            log.exception("task %s crashed", task_id)
        finally:
            self._finish(turn, sender, outcome)

    def _finish(self, turn: Turn, sender: TaskEventSender, outcome: TurnOutcome) -> None:
        """The end's transaction, then the one end-of-turn poller: what queued up meanwhile starts the
        agent's single follow-up turn."""
        self._rt.metrics.turns_ended.labels(outcome.status).inc()
        if finish_turn(self._rt, turn, sender, outcome, self._waiters):
            after_commit(self._loop.poll, self._rt, turn.agent_id, self._claim, False)

    def _forget(self, task_id: str) -> None:
        with self._lock:
            live = self._running.pop(task_id, None)
            if live is not None and self._by_agent.get(live.turn.agent_id) == task_id:
                del self._by_agent[live.turn.agent_id]
        self._rt.event_log.forget(task_id)

    def _stop_switch(self, task_id: str) -> bool:
        """Flip the stop switch of a turn this process runs; False when it runs none."""
        with self._lock:
            live = self._running.get(task_id)
        if live is None:
            return False
        live.turn.stop_event.set()
        return True

    def running_task_ids(self) -> list[str]:
        with self._lock:
            return list(self._running)

    def _emit_state_change(self, change: StateChange) -> None:
        """Agent state changes go into the event log of the agent's running task, if any."""
        with self._lock:
            task_id = self._by_agent.get(change.agent_id)
            live = self._running.get(task_id) if task_id else None
        if live is not None:
            live.sender.emit(state_event(change))
        else:
            to_room(self._rt.transport, state_event(change, in_room=True), change.conversation_id)

    # -- stopping and recovery -------------------------------------------------
    def stop(self, task_id: str) -> bool:
        """Stop a task. False when it is not in progress.

        A task run by another live process is flagged in the database; that process's
        membership loop sees the flag within a second and stops it. A task of this process that no
        thread runs any more ends here and now.
        """
        if self._stop_switch(task_id):
            return True
        rt = self._rt
        task = task_store.get_task(rt.db, task_id)
        if task is None or task.status not in task_store.ACTIVE_STATUSES:
            return False
        if task.owner == rt.membership.process_id and not self.runs_here(task_id):
            self._recovery.end_task(task, STOPPED, None)
            self.create_chat_task(task.agent_id)  # messages that queued up behind the dead turn
            return True
        if task.owner and task.owner in rt.membership.alive():
            if not task_store.request_stop(rt.db, task_id):
                return False
            rt.peers.publish(STOP, task_id)
            return True
        # Active in the database but run by no live process: take over the dead one's work now (the task
        # ends `failed`/`interrupted`, its open calls closed, its parent told).
        rt.membership.take_over(self)
        return True

    def stop_agent(self, agent_id: str) -> bool:
        task_id = self.active_task_of_agent(agent_id)
        return self.stop(task_id) if task_id else False

    def terminate_agent(self, agent_id: str) -> None:
        """The work of an agent just marked terminated ends: its turn, and its background commands."""
        self.stop_agent(agent_id)
        self._rt.commands.cancel_agent_commands(agent_id)

    def apply_stop_requests(self) -> None:
        """Stop the tasks of this process that another process was asked to stop."""
        for task_id in task_store.stop_requested(self._rt.db, self.running_task_ids()):
            self._stop_switch(task_id)

    def recover_interrupted(self, gone: dict[str, str], *, orphan_grace_s: float = 5.0) -> int:
        """End the tasks of gone processes and this process's orphans (server/turns/recovery.py)."""
        return self._recovery.recover(gone, orphan_grace_s=orphan_grace_s)
