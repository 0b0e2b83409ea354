"""Task records in motion: creating a chat task, running it, stopping it, recovering after a crash."""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass

from modules.multi_agent import agent_state
from modules.multi_agent.agent_state import StateChange
from modules.storage import agents as agent_store
from modules.storage import messages as message_store
from modules.storage import tasks as task_store
from modules.storage.messages import MessageDraft
from modules.storage.models import Message, Task
from server.chat_flow_task_main import handle_task_with_sender
from server.chat_flow_task_support import close_open_tool_calls, emit_user_message
from server.chat_flow_types import FAILED, STOPPED, SUCCEEDED, ChatTurn, TurnOutcome
from server.runtime import Runtime
from server.sender import TaskEventSender

log = logging.getLogger(__name__)

STOP_REASON = "cancelled: the user stopped the task"
RESTART_REASON = "interrupted: the server restarted while this call was open"


class TaskConflict(Exception):
    """The conversation already has a chat task in progress."""

    def __init__(self, task_id: str):
        super().__init__(f"task {task_id} is still running in this conversation")
        self.task_id = task_id


@dataclass
class RunningTask:
    task: Task
    turn: ChatTurn
    sender: TaskEventSender


class TaskManager:
    def __init__(self, rt: Runtime):
        self._rt = rt
        self._lock = threading.Lock()
        self._running: dict[str, RunningTask] = {}
        self._by_conversation: dict[str, str] = {}
        self._idle = threading.Condition(self._lock)
        rt.agent_states.subscribe(self._emit_state_change)

    # -- queries ---------------------------------------------------------
    def active_task_id(self, conversation_id: str) -> str | None:
        with self._lock:
            return self._by_conversation.get(conversation_id)

    def is_running_here(self, task_id: str) -> bool:
        with self._lock:
            return task_id in self._running

    # -- creation --------------------------------------------------------
    def create_chat_task(self, *, conversation_id: str, agent_id: str, trigger: MessageDraft,
                         task_type: str = "chat") -> Task:
        """Persist the trigger message and a pending task together, then start the task.

        One chat task per conversation: a second one raises TaskConflict.
        """
        rt = self._rt
        agent = agent_store.get_agent(rt.db, agent_id)
        if agent is None:
            raise ValueError(f"unknown agent {agent_id}")
        with self._lock:
            existing = self._by_conversation.get(conversation_id)
            if existing is None:
                stale = task_store.list_tasks(rt.db, conversation_id, active_only=True)
                existing = stale[0].id if stale else None
            if existing is not None:
                raise TaskConflict(existing)
            with rt.db.write() as s:
                message_store.append_in(s, conversation_id, agent_id, [trigger])
                task = task_store.create_task_in(s, conversation_id=conversation_id, agent_id=agent_id,
                                                 task_type=task_type, trigger_message_id=trigger.message_id)
            turn = ChatTurn(task_id=task.id, conversation_id=conversation_id, agent_id=agent_id,
                            display_name=agent.display_name, profile=rt.profile(agent.role))
            sender = TaskEventSender(rt.event_log, rt.transport, task_id=task.id,
                                     conversation_id=conversation_id, agent_id=agent_id)
            self._running[task.id] = RunningTask(task, turn, sender)
            self._by_conversation[conversation_id] = task.id
        rt.spawn(self._run_chat_task, task.id)
        return task

    # -- running ---------------------------------------------------------
    def _run_chat_task(self, task_id: str) -> None:
        with self._lock:
            running = self._running[task_id]
        rt, turn, sender = self._rt, running.turn, running.sender
        outcome = TurnOutcome(FAILED, {"code": "internal_error", "message": "the task ended unexpectedly"})
        try:
            trigger = self._trigger_message(running.task)
            if trigger is not None:
                emit_user_message(sender, trigger)
            if turn.stopped():
                outcome = TurnOutcome(STOPPED)
            else:
                task_store.set_task_status(rt.db, task_id, "running", expected=("pending",))
                rt.agent_states.transition(turn.agent_id, agent_state.RUNNING)
                outcome = handle_task_with_sender(rt, turn, sender)
        except Exception:
            log.exception("task %s crashed", task_id)
        finally:
            self._finish(running, outcome)

    def _trigger_message(self, task: Task) -> Message | None:
        if not task.trigger_message_id:
            return None
        for msg in reversed(message_store.list_messages(self._rt.db, task.agent_id)):
            if msg.message_id == task.trigger_message_id:
                return msg
        return None

    def _finish(self, running: RunningTask, outcome: TurnOutcome) -> None:
        """Close open calls, settle the agent's state, emit the last event, then the final status.

        The status is written after the last event, so a poller that sees a final
        status has already been able to read every event.
        """
        rt, turn, sender = self._rt, running.turn, running.sender
        try:
            reason = STOP_REASON if outcome.status == STOPPED else "failed: the task ended before this call ran"
            close_open_tool_calls(rt, turn.conversation_id, turn.agent_id, reason)
            next_state = agent_state.COMPLETED if outcome.status == SUCCEEDED else agent_state.IDLE
            rt.agent_states.transition(turn.agent_id, next_state)
            flags = {"has_running_sub_agents": False, "has_running_background_commands": False}
            if outcome.status == SUCCEEDED:
                sender.emit("task_complete", flags)
            elif outcome.status == STOPPED:
                sender.emit("task_stopped", flags)
            else:
                sender.emit("error", {**(outcome.error or {}), **flags})
        except Exception:
            log.exception("could not finish task %s cleanly", turn.task_id)
        finally:
            task_store.set_task_status(rt.db, turn.task_id, outcome.status, error=outcome.error)
            with self._lock:
                self._running.pop(turn.task_id, None)
                if self._by_conversation.get(turn.conversation_id) == turn.task_id:
                    del self._by_conversation[turn.conversation_id]
                self._idle.notify_all()
            rt.event_log.forget(turn.task_id)

    def _emit_state_change(self, change: StateChange) -> None:
        """Agent state changes go into the event log of the agent's running task, if any."""
        with self._lock:
            running = next((r for r in self._running.values() if r.turn.agent_id == change.agent_id), None)
        data = {"state": change.state, "previous": change.previous, "display_name": change.display_name,
                "agent_id": change.agent_id}
        if running is not None:
            running.sender.emit("agent_state", data)
        else:
            self._rt.transport.emit("agent_state", {**data, "conversation_id": change.conversation_id},
                                    change.conversation_id)

    # -- stopping --------------------------------------------------------
    def stop(self, task_id: str) -> bool:
        """Ask a task to stop. False when it is not in progress."""
        with self._lock:
            running = self._running.get(task_id)
        if running is not None:
            running.turn.stop_event.set()
            return True
        task = task_store.get_task(self._rt.db, task_id)
        if task is None or task.status not in task_store.ACTIVE_STATUSES:
            return False
        # Active in the database but run by no one here: an orphan of a dead process.
        return task_store.set_task_status(self._rt.db, task_id, STOPPED, expected=task_store.ACTIVE_STATUSES)

    def wait_idle(self, timeout: float) -> bool:
        with self._lock:
            return self._idle.wait_for(lambda: not self._running, timeout)

    # -- recovery --------------------------------------------------------
    def recover_interrupted(self) -> int:
        """After a crash: fail the tasks that were in progress, close their agents' open tool calls,
        and put the agents back to idle, so every later model request is valid."""
        rt = self._rt
        interrupted = task_store.list_tasks_with_status(rt.db, task_store.ACTIVE_STATUSES)
        for task in interrupted:
            close_open_tool_calls(rt, task.conversation_id, task.agent_id, RESTART_REASON)
            error = {"code": "interrupted", "message": "the server restarted while this task was running"}
            sender = TaskEventSender(rt.event_log, rt.transport, task_id=task.id,
                                     conversation_id=task.conversation_id, agent_id=task.agent_id)
            sender.emit("error", {**error, "has_running_sub_agents": False,
                                  "has_running_background_commands": False})
            task_store.set_task_status(rt.db, task.id, FAILED, error=error)
            rt.event_log.forget(task.id)
        for agent in agent_store.list_agents_in_states(rt.db, (agent_state.RUNNING, agent_state.WAITING)):
            close_open_tool_calls(rt, agent.conversation_id, agent.id, RESTART_REASON)
            rt.agent_states.transition(agent.id, agent_state.IDLE, force=True)
        return len(interrupted)
