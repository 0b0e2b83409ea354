"""Task records in motion: starting an agent's turn from its queue, running it, ending it, recovery.

A task is one turn of one agent. Turns start in one place, `create_chat_task`: one
transaction claims the idle agent by compare-and-set, creates the task and drains
the agent's whole queue into its history. The first N-1
drained messages are preceding notices (`starts_work: false`), the last is
the trigger; the task's event log begins with all N, in order.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import select

from modules.agents.profiles import MASTER_KIND
from modules.multi_agent import agent_state
from modules.multi_agent.agent_state import StateChange
from modules.multi_agent.message_router import TRIGGERED_NEW_TURN, PendingMessage
from modules.peer_signals import STOP
from modules.storage import agents as agent_store
from modules.storage import messages as message_store
from modules.storage import pending_messages as queue
from modules.storage import tasks as task_store
from modules.storage.models import Agent, Message, Task
from modules.storage.records import now
from modules.sub_agent.manager import TurnResult
from server.chat_flow_task_main import handle_task_with_sender, run_completion_poll
from server.chat_flow_task_support import close_open_tool_calls, close_open_tool_calls_in, emit_user_messages
from server.chat_flow_types import FAILED, STOPPED, SUCCEEDED, ChatTurn, TurnOutcome
from server.runtime import Runtime
from server.sender import TaskEventSender

log = logging.getLogger(__name__)

STOP_REASON = "cancelled: the user stopped the task"
RESTART_REASON = "interrupted: the server restarted while this call was open"


class _NoTurn(Exception):
    """The agent was claimed by another caller, or its queue emptied, between the checks and the claim."""


@dataclass
class RunningTask:
    task: Task
    turn: ChatTurn
    sender: TaskEventSender
    kind: str
    parent_id: str | None
    drained: list[Message]  # what the turn's start took from the queue, in order
    claim: StateChange
    started: float = field(default_factory=time.monotonic)


class _TurnWaiter:
    """The next turn of one agent, awaited by a blocking create_sub_agent."""

    def __init__(self, manager: TaskManager, agent_id: str):
        self._manager = manager
        self.agent_id = agent_id
        self.event = threading.Event()
        self.result: TurnResult | None = None

    def wait(self, timeout_s: float, should_stop) -> TurnResult | None:
        deadline = time.monotonic() + timeout_s
        try:
            while not self.event.is_set() and not should_stop():
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                self.event.wait(min(0.1, remaining))
            return self.result
        finally:
            self.cancel()

    def cancel(self) -> None:
        self._manager._drop_turn_waiter(self)


class TaskManager:
    def __init__(self, rt: Runtime):
        self._rt = rt
        self._lock = threading.RLock()
        self._running: dict[str, RunningTask] = {}
        self._by_agent: dict[str, str] = {}
        self._turn_waiters: dict[str, _TurnWaiter] = {}
        rt.agent_states.subscribe(self._emit_state_change)
        rt.router.wake = self.create_chat_task
        rt.router.active_task_of = self.active_task_of_agent
        rt.router.more_completions_expected = lambda agent_id: (
            rt.commands.has_running(agent_id=agent_id) or rt.sub_agents.has_running_children(agent_id))

    # -- queries ---------------------------------------------------------
    def active_task_of_agent(self, agent_id: str) -> str | None:
        """The agent's task in progress, run by this process or, failing that, by another one."""
        with self._lock:
            task_id = self._by_agent.get(agent_id)
        return task_id or task_store.active_task_of_agent(self._rt.db, agent_id)

    # -- starting a turn ---------------------------------------------------
    def create_chat_task(self, agent_id: str) -> str | None:
        """Start a turn for an idle/completed agent that has queued messages; its task id, or None
        when the agent is busy, has nothing queued, or another caller won the claim."""
        rt = self._rt
        agent = agent_store.get_agent(rt.db, agent_id)
        if agent is None or agent.terminated or agent.state not in (agent_state.IDLE, agent_state.COMPLETED):
            return None
        if not rt.router.has_queued(agent_id):
            return None
        try:
            # The claim, the task and the drain commit together: an agent is never `running` without its
            # task, so nothing (recovery included) can mistake a fresh claim for an orphan.
            with rt.db.write() as s:
                # Locked first, so a termination cannot slip in between this check and the claim.
                if s.scalars(select(Agent.terminated).where(Agent.id == agent_id)
                             .with_for_update(key_share=True)).first():
                    raise _NoTurn
                claim = rt.agent_states.transition_in(s, agent_id, agent_state.RUNNING)
                if claim is None:
                    raise _NoTurn
                task = task_store.create_task_in(s, conversation_id=agent.conversation_id, agent_id=agent_id,
                                                 task_type="chat" if agent.kind == MASTER_KIND else "sub_agent",
                                                 owner=rt.membership.process_id)
                drained = rt.router.drain_to_history_in(s, agent_id, agent.conversation_id, task.id,
                                                        last_starts_work=True)
                if not drained:
                    raise _NoTurn
                task.trigger_message_id = drained[-1].message_id
                task.meta = {"message_ids": [m.message_id for m in drained],
                             "from_user": all((m.meta or {}).get("source") == "user" for m in drained)}
        except _NoTurn:
            return None
        self._register(task, agent, drained, claim)
        rt.spawn(self._run_chat_task, task.id)
        return task.id

    def _register(self, task: Task, agent: Agent, drained: list[Message], claim: StateChange) -> None:
        rt = self._rt
        turn = ChatTurn(task_id=task.id, conversation_id=agent.conversation_id, agent_id=agent.id,
                        display_name=agent.display_name, profile=rt.profile(agent.role))
        sender = TaskEventSender(rt.event_log, rt.transport, task_id=task.id,
                                 conversation_id=agent.conversation_id, agent_id=agent.id)
        with self._lock:
            self._running[task.id] = RunningTask(task, turn, sender, agent.kind, agent.parent_id, drained, claim)
            self._by_agent[agent.id] = task.id

    # -- running ---------------------------------------------------------
    def _run_chat_task(self, task_id: str) -> None:
        with self._lock:
            running = self._running[task_id]
        rt, turn, sender = self._rt, running.turn, running.sender
        outcome = TurnOutcome(FAILED, {"code": "internal_error", "message": "the task ended unexpectedly"})
        try:
            emit_user_messages(sender, running.drained, TRIGGERED_NEW_TURN, turn.display_name)
            self._emit_state_change(running.claim)
            if turn.stopped():
                outcome = TurnOutcome(STOPPED)
            else:
                task_store.set_task_status(rt.db, task_id, "running", expected=("pending",))
                outcome = handle_task_with_sender(rt, turn, sender)
        except Exception:
            log.exception("task %s crashed", task_id)
        finally:
            self._finish(running, outcome)

    def _finish(self, running: RunningTask, outcome: TurnOutcome) -> None:
        """Close open calls, settle the agent, emit the last event, then write the final status
        (with the parent's completion notice in the same transaction), then the end-of-turn check.

        The status is written after the last event, so a poller that sees a final
        status has already been able to read every event.
        """
        rt, turn, sender = self._rt, running.turn, running.sender
        if not task_store.still_owned(rt.db, turn.task_id, rt.membership.process_id):
            # Another process judged us gone and took this task over: its history is no longer ours to write.
            log.warning("task %s was taken over by another process; leaving it alone", turn.task_id)
            with self._lock:
                self._running.pop(turn.task_id, None)
                if self._by_agent.get(turn.agent_id) == turn.task_id:
                    del self._by_agent[turn.agent_id]
            rt.event_log.forget(turn.task_id)
            return
        notice = None
        settled = True
        try:
            reason = {STOPPED: STOP_REASON, SUCCEEDED: "closed: the turn ended before this call ran"}.get(
                outcome.status, "failed: the task ended before this call ran")
            close_open_tool_calls(rt, turn.conversation_id, turn.agent_id, reason)
            next_state = agent_state.COMPLETED if outcome.status == SUCCEEDED else agent_state.IDLE
            rt.agent_states.transition(turn.agent_id, next_state)
            flags = self.background_flags(turn.conversation_id)
            if running.kind == MASTER_KIND:
                self._emit_sub_agent_waiting(turn.conversation_id, sender)
            if outcome.status == SUCCEEDED:
                sender.emit("task_complete", flags)
            elif outcome.status == STOPPED:
                sender.emit("task_stopped", flags)
            else:
                sender.emit("error", {**(outcome.error or {}), **flags})
            notice = self._report_to_parent(running, outcome)
        except Exception:
            log.exception("could not finish task %s cleanly", turn.task_id)
        finally:
            try:
                settled = self._write_final_status(turn.task_id, outcome, notice)
            finally:
                with self._lock:
                    self._running.pop(turn.task_id, None)
                    if self._by_agent.get(turn.agent_id) == turn.task_id:
                        del self._by_agent[turn.agent_id]
                    rt.event_log.forget(turn.task_id)
        if not settled:
            return
        if notice is not None:
            rt.router.deliver(notice)
        if outcome.status == SUCCEEDED:
            self._suggest(running)
        run_completion_poll(rt, turn.agent_id)

    def _write_final_status(self, task_id: str, outcome: TurnOutcome, notice: PendingMessage | None) -> bool:
        """The final status (with the parent's notice), retried until the database takes it: a task left
        active under a live owner would look busy forever, since recovery only takes over dead owners."""
        attempt = 0
        while True:
            try:
                with self._rt.db.write() as s:
                    # Another process that took this task over (it thought us gone) has the last word.
                    settled = task_store.set_task_status_in(s, task_id, outcome.status, error=outcome.error,
                                                            expected=task_store.ACTIVE_STATUSES)
                    if settled and notice is not None:
                        self._rt.router.enqueue_in(s, notice)
                    if not settled and attempt:  # an earlier attempt committed, but its answer was lost
                        task = s.get(Task, task_id)
                        settled = task is not None and task.status == outcome.status \
                            and task.owner == self._rt.membership.process_id
                return settled
            except Exception:
                attempt += 1
                log.exception("could not record the end of task %s (attempt %d)", task_id, attempt)
                time.sleep(min(0.2 * 2**attempt, 10.0))

    def _suggest(self, running: RunningTask) -> None:
        """Suggestions follow a reply to the user: a turn that a user message started or joined."""
        turn = running.turn
        history = message_store.list_messages(self._rt.db, turn.agent_id)
        start = running.drained[0].seq
        user = [m for m in history if m.seq >= start and m.role == "user" and (m.meta or {}).get("source") == "user"]
        reply = next((m for m in reversed(history) if m.role == "assistant" and m.content
                      and (m.meta or {}).get("task_id") == turn.task_id), None)
        if not user or reply is None:
            return
        self._rt.suggestions.schedule(task_id=turn.task_id, conversation_id=turn.conversation_id,
                                      agent_id=turn.agent_id, reply_message_id=reply.message_id,
                                      user_message=user[-1].content or "", reply=reply.content or "")

    def _report_to_parent(self, running: RunningTask, outcome: TurnOutcome):
        """A sub-agent's finished turn goes to whoever awaits it, else to its parent as a notice
        (not for a turn the user had with it directly, nor for one its master terminated)."""
        if running.kind == MASTER_KIND or running.parent_id is None:
            return None
        rt, turn = self._rt, running.turn
        final = next((m.content for m in reversed(message_store.list_messages(rt.db, turn.agent_id))
                      if m.role == "assistant" and m.content and (m.meta or {}).get("task_id") == turn.task_id), "")
        result = TurnResult(task_id=turn.task_id, status=outcome.status, final_text=final or "",
                            error=(outcome.error or {}).get("message"),
                            duration_s=time.monotonic() - running.started)
        with self._lock:
            waiter = self._turn_waiters.pop(turn.agent_id, None)
        if waiter is not None:
            waiter.result = result
            waiter.event.set()
            return None
        agent = agent_store.get_agent(rt.db, turn.agent_id)
        if (running.task.meta or {}).get("from_user", False) or agent.terminated:
            return None
        return rt.sub_agents.completion_notice(agent, result)

    def expect_turn(self, agent_id: str) -> _TurnWaiter:
        waiter = _TurnWaiter(self, agent_id)
        with self._lock:
            self._turn_waiters[agent_id] = waiter
        return waiter

    def _drop_turn_waiter(self, waiter: _TurnWaiter) -> None:
        with self._lock:
            if self._turn_waiters.get(waiter.agent_id) is waiter:
                del self._turn_waiters[waiter.agent_id]

    def background_flags(self, conversation_id: str) -> dict[str, Any]:
        rt = self._rt
        return {"has_running_sub_agents": bool(rt.sub_agents.running(conversation_id)),
                "has_running_background_commands": rt.commands.has_running(conversation_id)}

    def _emit_sub_agent_waiting(self, conversation_id: str, sender: TaskEventSender) -> None:
        busy = self._rt.sub_agents.running(conversation_id)
        if busy:
            sender.emit("sub_agent_waiting", {"count": len(busy), "tasks": [
                {"agent_id": a.id, "display_name": a.display_name, "summary": (a.task or "")[:200]} for a in busy
            ]})

    def _emit_state_change(self, change: StateChange) -> None:
        """Agent state changes go into the event log of the agent's running task, if any."""
        with self._lock:
            task_id = self._by_agent.get(change.agent_id)
            running = self._running.get(task_id) if task_id else None
        data = {"state": change.state, "previous": change.previous, "display_name": change.display_name,
                "agent_id": change.agent_id}
        if running is not None:
            running.sender.emit("agent_state", data)
        else:
            self._rt.transport.emit("agent_state", {**data, "conversation_id": change.conversation_id},
                                    change.conversation_id)

    # -- stopping --------------------------------------------------------
    def stop(self, task_id: str) -> bool:
        """Ask a task to stop. False when it is not in progress.

        A task run by another live process is flagged in the database; that process's
        membership loop sees the flag within a second and stops it.
        """
        with self._lock:
            running = self._running.get(task_id)
        if running is not None:
            running.turn.stop_event.set()
            return True
        rt = self._rt
        task = task_store.get_task(rt.db, task_id)
        if task is None or task.status not in task_store.ACTIVE_STATUSES:
            return False
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
        with self._lock:
            mine = dict(self._running)
        for task_id in task_store.stop_requested(self._rt.db, list(mine)):
            mine[task_id].turn.stop_event.set()

    # -- recovery --------------------------------------------------------
    def recover_interrupted(self, gone: dict[str, str], *, orphan_grace_s: float = 5.0) -> int:
        """Take over the work of server processes that are not alive (gone, forgotten, or never recorded): fail their
        tasks, close their agents' open tool calls, put the agents back to idle, report their
        background commands lost, and give every idle agent with queued messages its turn.

        Each task is claimed by compare-and-set, so two processes never recover it twice.
        """
        rt = self._rt
        alive = rt.membership.alive()
        error = {"code": "interrupted", "message": "the server process running this task stopped"}
        recovered = 0
        notices = []
        for task in task_store.list_tasks_with_status(rt.db, task_store.ACTIVE_STATUSES):
            if task.owner in alive:
                continue
            notice = self._interrupted_notice(task, error["message"])
            released, free = None, False
            with rt.db.write() as s:
                # The task's end, its agent's release and its parent's notice commit together: whoever sees
                # the task failed sees the agent idle too.
                if not task_store.set_task_status_in(s, task.id, FAILED, error=error,
                                                     expected=task_store.ACTIVE_STATUSES):
                    continue
                if notice is not None:
                    rt.router.enqueue_in(s, notice)
                    notices.append(notice)
                # The agent may already be in a newer turn elsewhere (the process died after releasing it);
                # that turn's calls and state are not ours to touch.
                free = task_store.active_task_of_agent_in(s, task.agent_id) is None
                if free:
                    # An answer its ask took but never wrote down goes back to the queue: the agent's
                    # next turn reads it (the membership sweep starts that turn below).
                    queue.requeue_answers_taken_after_in(s, task.agent_id,
                                                         message_store.last_written_at_in(s, task.agent_id))
                    close_open_tool_calls_in(s, task.conversation_id, task.agent_id, RESTART_REASON)
                    released = rt.agent_states.transition_in(s, task.agent_id, agent_state.IDLE, force=True)
            if free:
                rt.user_questions.close_for_agent(task.conversation_id, task.agent_id)
            if released is not None:
                rt.agent_states.announce(released)
            TaskEventSender(rt.event_log, rt.transport, task_id=task.id, conversation_id=task.conversation_id,
                            agent_id=task.agent_id).emit("error", {**error, "has_running_sub_agents": False,
                                                                   "has_running_background_commands": False})
            rt.event_log.forget(task.id)
            recovered += 1
        busy = {t.agent_id for t in task_store.list_tasks_with_status(rt.db, task_store.ACTIVE_STATUSES)}
        for agent in agent_store.list_agents_in_states(rt.db, (agent_state.RUNNING, agent_state.WAITING)):
            # Running with no task anywhere (left by a version that claimed agents apart from their tasks):
            # released only if it is still exactly as listed, in the transaction that checks for a task.
            if agent.id in busy or now() - agent.updated_at <= orphan_grace_s:
                continue
            with rt.db.write() as s:
                released = None
                if task_store.active_task_of_agent_in(s, agent.id) is None:
                    released = rt.agent_states.transition_in(s, agent.id, agent_state.IDLE, force=True,
                                                             version=agent.version)
                if released is not None:
                    close_open_tool_calls_in(s, agent.conversation_id, agent.id, RESTART_REASON)
            if released is not None:
                rt.user_questions.close_for_agent(agent.conversation_id, agent.id)
                rt.agent_states.announce(released)
        rt.commands.recover_lost(gone)
        for notice in notices:
            rt.router.deliver(notice)
        for agent_id in queue.agents_with_queued(rt.db):
            self.create_chat_task(agent_id)
        return recovered

    def _interrupted_notice(self, task: Task, reason: str):
        """The parent of a sub-agent whose turn died with its process hears of it, as of any end."""
        agent = agent_store.get_agent(self._rt.db, task.agent_id)
        if agent is None or agent.kind == MASTER_KIND or agent.parent_id is None or agent.terminated \
                or (task.meta or {}).get("from_user", False):
            return None
        duration = now() - (task.started_at or task.created_at)
        return self._rt.sub_agents.completion_notice(agent, TurnResult(task.id, FAILED, "", reason, duration))
