"""Ending turns that no thread will end: those of gone processes, and this process's own orphans.

A turn's thread always ends its task (server/turns/end.py), unless it died
on the way (a bug, an error nobody expected). Such a task stays active under a
live owner; recovery would never take it over, and its agent would stay
`running` for good, swallowing every later message. So the membership sweep
(the watchdog) also ends every task this process owns but runs no thread for,
and a stop of such a task ends it at once.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from modules.agents.profiles import MASTER_KIND
from modules.event_catalogue import ErrorEvent, Event, TaskEndEvent
from modules.multi_agent import agent_state
from modules.multi_agent.pending import PendingMessage
from modules.statuses import BUSY_AGENT_STATES
from modules.storage import agents as agent_store
from modules.storage import pending_messages as queue
from modules.storage import tasks as task_store
from modules.storage.models import Task
from modules.storage.records import now
from modules.sub_agent.manager import TurnResult
from modules.tools.run_command import partial_output
from server.sender import TaskEventSender
from server.turns.context import TurnRuntime
from server.turns.end import STOP_REASON, BackgroundFlags
from server.turns.events import state_event
from server.turns.history import close_open_tool_calls_in
from server.turns.types import FAILED, STOPPED

log = logging.getLogger(__name__)

RESTART_REASON = "interrupted: the server restarted while this call was open"
CRASH_REASON = "failed: the turn stopped unexpectedly while this call was open"
INTERRUPTED = {"code": "interrupted", "message": "the server process running this task stopped"}
TURN_CRASHED = {"code": "turn_crashed",
                "message": "the turn stopped unexpectedly inside the server; the watchdog ended it"}
_NO_BACKGROUND = BackgroundFlags(has_running_sub_agents=False, has_running_background_commands=False)


class Recovery:
    def __init__(self, rt: TurnRuntime, runs_here: Callable[[str], bool], start_turn: Callable[[str], str | None]):
        self._rt = rt
        self._runs_here = runs_here
        self._start_turn = start_turn

    def recover(self, gone: dict[str, str], *, orphan_grace_s: float = 5.0) -> int:
        """Take over the work of server processes that are not alive (gone, forgotten, or never recorded) and
        this process's orphans: fail their tasks, close their agents' open tool calls, put the agents back to
        idle, report gone processes' background commands lost, and give every idle agent with queued
        messages its turn. Each task is ended by compare-and-set, so two processes never end it twice."""
        rt = self._rt
        alive = rt.membership.alive()
        me = rt.membership.process_id
        recovered = 0
        for active in task_store.active_tasks(rt.db):
            if active.owner == me:
                if self._runs_here(active.id):
                    continue
                log.error("task %s has no thread left in this process; the watchdog ends it", active.id)
                recovered += self._end(active.id, TURN_CRASHED)
            elif active.owner not in alive:
                recovered += self._end(active.id, INTERRUPTED)
        self._release_taskless_agents(orphan_grace_s)
        rt.commands.recover_lost(gone)
        for agent_id in queue.agents_with_queued(rt.db):
            self._start_turn(agent_id)
        return recovered

    def _end(self, task_id: str, error: dict[str, Any]) -> bool:
        task = task_store.get_task(self._rt.db, task_id)
        return task is not None and self.end_task(task, FAILED, error)

    def end_task(self, task: Task, status: str, error: dict[str, Any] | None) -> bool:
        """End a task no thread runs: status, closed calls, released agent, last event and the parent's
        notice in one transaction. False when it had ended already."""
        rt = self._rt
        reason = (error or {}).get("message") or STOP_REASON
        notice = self._notice(task, status, reason)
        crashed = (error or {}).get("code") == TURN_CRASHED["code"]
        call_reason = STOP_REASON if status == STOPPED else CRASH_REASON if crashed else RESTART_REASON
        sender = TaskEventSender(rt.event_log, rt.transport, task_id=task.id, conversation_id=task.conversation_id,
                                 agent_id=task.agent_id)
        released = None
        with rt.event_log.exclusive(task.id), rt.db.write() as s:
            if not task_store.set_task_status_in(s, task.id, status, error=error,
                                                 expected=task_store.ACTIVE_STATUSES):
                return False
            if notice is not None:
                rt.router.enqueue_in(s, notice)
            # The agent may already be in a newer turn elsewhere (the process died after releasing it);
            # that turn's calls and state are not ours to touch.
            free = task_store.active_task_of_agent_in(s, task.agent_id) is None
            if free:
                # An answer its ask took but never wrote down goes back to the queue: the agent's next turn
                # reads it.
                queue.requeue_unwritten_answers_in(s, task.agent_id)
                close_open_tool_calls_in(s, task.conversation_id, task.agent_id, call_reason,
                                         self._partial_output(task.agent_id))
                released = rt.agent_states.transition_in(s, task.agent_id, agent_state.IDLE, force=True)
            events: list[Event] = [state_event(released)] if released is not None else []
            final = TaskEndEvent(**_NO_BACKGROUND) if status == STOPPED else ErrorEvent.of(error, **_NO_BACKGROUND)
            payloads = sender.payloads([*events, final])
            first = rt.event_log.append_in(s, task.id, payloads)
        rt.event_log.forget(task.id)
        sender.deliver(first, payloads)
        if free:
            rt.user_questions.close_for_agent(task.conversation_id, task.agent_id)
        if notice is not None:
            rt.router.deliver(notice)
        return True

    def _release_taskless_agents(self, grace_s: float) -> None:
        """Running with no task anywhere (left by a version that claimed agents apart from their tasks):
        released only if it is still exactly as listed, in the transaction that checks for a task."""
        rt = self._rt
        busy = {active.agent_id for active in task_store.active_tasks(rt.db)}
        for agent in agent_store.agents_in_states(rt.db, BUSY_AGENT_STATES):
            if agent.id in busy or now() - agent.updated_at <= grace_s:
                continue
            with rt.db.write() as s:
                released = None
                if task_store.active_task_of_agent_in(s, agent.id) is None:
                    released = rt.agent_states.transition_in(s, agent.id, agent_state.IDLE, force=True,
                                                             version=agent.version)
                if released is not None:
                    close_open_tool_calls_in(s, agent.conversation_id, agent.id, RESTART_REASON,
                                             self._partial_output(agent.id))
            if released is not None:
                rt.user_questions.close_for_agent(agent.conversation_id, agent.id)
                rt.agent_states.announce(released)

    def _partial_output(self, agent_id: str) -> Callable[[str], dict[str, Any]]:
        """What a foreground command killed with its process printed, for its closed call (the defect of a
        restart losing it: docs/API.md, "The model-facing contract", `run_command`)."""
        settings = self._rt.settings
        return lambda call_id: partial_output(settings.data_dir, agent_id, call_id, settings.command_output_tail_chars)

    def _notice(self, task: Task, status: str, reason: str) -> PendingMessage | None:
        """The parent of a sub-agent whose turn ended this way hears of it, as of any end."""
        agent = agent_store.get_agent(self._rt.db, task.agent_id)
        if agent is None or agent.kind == MASTER_KIND or agent.parent_id is None or agent.terminated \
                or task.typed_meta.from_user:
            return None
        duration = now() - (task.started_at or task.created_at)
        return self._rt.sub_agents.completion_notice(agent, TurnResult(task.id, status, "", reason, duration))
