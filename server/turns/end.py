"""The end of a turn: one transaction, retried until the database takes it.

Closing the turn's open tool calls, releasing its agent, its last events, its
final status and its parent's completion notice commit together, so no state
in between (a final task whose agent still runs, a failed turn with an open
call) can ever be seen or left behind. Until the database answers, the turn's
thread waits and tries again: a task left active under a live owner would look
busy for good. What follows the commit (socket delivery, waking the parent,
suggestions) touches nothing that would be lost if it failed: the membership
sweep starts the turns of queued messages anyway. The end-of-turn poller runs
after this, called by the TurnManager (docs/ARCHITECTURE.md).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypedDict, TypeVarTuple

from sqlalchemy.orm import Session

from modules.agents.profiles import MASTER_KIND
from modules.event_catalogue import (
    BusySubAgent,
    ErrorEvent,
    Event,
    SubAgentWaitingEvent,
    TaskCompleteEvent,
    TaskEndEvent,
    UsageSums,
)
from modules.multi_agent import agent_state
from modules.multi_agent.agent_state import StateChange
from modules.multi_agent.message_router import PendingMessage
from modules.statuses import BUSY_AGENT_STATES
from modules.storage import agents as agent_store
from modules.storage import pending_messages as queue
from modules.storage import tasks as task_store
from modules.storage.retry import until_answered
from modules.storage.work_counts import RunningWork, running_work
from modules.sub_agent.manager import TurnResult
from server.budget_guard import conversation_over_budget
from server.sender import TaskEventSender
from server.turns.context import TurnRuntime
from server.turns.events import state_event
from server.turns.history import close_open_tool_calls_in
from server.turns.types import STOPPED, SUCCEEDED, Turn, TurnOutcome
from server.turns.waiters import TurnWaiters

log = logging.getLogger(__name__)
Ts = TypeVarTuple("Ts")

STOP_REASON = "cancelled: the user stopped the task"
_CLOSE_REASONS = {STOPPED: STOP_REASON, SUCCEEDED: "closed: the turn ended before this call ran"}
_FAILED_REASON = "failed: the task ended before this call ran"


class BackgroundFlags(TypedDict):
    has_running_sub_agents: bool
    has_running_background_commands: bool


@dataclass(frozen=True)
class _Facts:
    """What the end reads before its transaction (none of it is written there)."""

    flags: BackgroundFlags
    busy_sub_agents: list[BusySubAgent]
    result: TurnResult | None
    notice: PendingMessage | None
    awaited: bool


@dataclass(frozen=True)
class _Ended:
    first_idx: int | None  # None: an earlier try had committed, and only its answer was lost
    payloads: list[tuple[str, dict[str, Any]]]

    @property
    def next_idx(self) -> int | None:
        """The index of the task's next event (its suggestions'), None when unknown."""
        return None if self.first_idx is None else self.first_idx + len(self.payloads)


def background_flags(rt: TurnRuntime, conversation_id: str) -> BackgroundFlags:
    return _flags(running_work(rt.db, conversation_id))


def _flags(work: RunningWork) -> BackgroundFlags:
    return {"has_running_sub_agents": bool(work.sub_agents), "has_running_background_commands": work.commands}


def finish_turn(rt: TurnRuntime, turn: Turn, sender: TaskEventSender, outcome: TurnOutcome,
                waiters: TurnWaiters) -> bool:
    """End the turn; False when another process had taken the task over (then it is theirs to end)."""
    task_id = turn.task_id
    facts = until_answered(lambda: _read_facts(rt, turn, outcome, waiters), f"the end of task {task_id}")
    usage = rt.ledger.take_task(task_id).as_dict()  # the turn's model requests, for its task_complete
    answers = rt.router.forget_answers_taken(turn.agent_id)  # read once: every try of the commit needs it
    tries: list[int] = []

    def commit() -> _Ended | None:
        tries.append(1)
        return _commit(rt, turn, sender, outcome, facts, usage, answers, retried=len(tries) > 1)

    ended = until_answered(commit, f"the end of task {task_id}")
    if ended is None:
        log.warning("task %s was taken over by another process; leaving it alone", task_id)
        return False
    if ended.first_idx is not None:
        sender.deliver(ended.first_idx, ended.payloads)
    notice = facts.notice
    if facts.awaited and facts.result is not None:
        waiter = waiters.pop(turn.agent_id)
        if waiter is None or not waiter.hand(facts.result):
            # The wait gave up after the end saw it (its timeout, a stop): it told the parent a notice follows.
            try:
                notice = _late_notice(rt, turn, facts.result)
            except Exception:
                log.exception("the result of task %s reached neither its waiter nor its parent", task_id)
    if notice is not None:
        after_commit(rt.router.deliver, notice)
    if outcome.status == SUCCEEDED:
        after_commit(_suggest, rt, turn, ended.next_idx)
    return True


def after_commit(step: Callable[[*Ts], object], *args: *Ts) -> None:
    try:
        step(*args)
    except Exception:
        log.exception("after the end of a task, %s failed; the membership sweep catches up",
                      getattr(step, "__name__", step))


def _late_notice(rt: TurnRuntime, turn: Turn, result: TurnResult) -> PendingMessage | None:
    """The parent's notice of a result no blocking wait took, queued after the end's commit (its id is the
    task's, so it is queued once)."""
    agent = agent_store.get_agent(rt.db, turn.agent_id)
    if turn.from_user or agent is None or agent.terminated:  # as `_read_facts` decides for an end nobody awaits
        return None
    notice = rt.sub_agents.completion_notice(agent, result)

    def enqueue() -> None:
        with rt.db.write() as s:
            rt.router.enqueue_in(s, notice)

    until_answered(enqueue, f"the notice of task {turn.task_id}")
    return notice


def _read_facts(rt: TurnRuntime, turn: Turn, outcome: TurnOutcome, waiters: TurnWaiters) -> _Facts:
    work = running_work(rt.db, turn.conversation_id)  # one read: the flags and the master's busy list
    flags = _flags(work)
    busy: list[BusySubAgent] = []
    if turn.kind == MASTER_KIND:
        busy = [BusySubAgent(agent_id=a.id, display_name=a.display_name, summary=(a.task or "")[:200])
                for a in work.sub_agents]
    if turn.kind == MASTER_KIND or turn.parent_id is None:
        return _Facts(flags, busy, None, None, False)
    # A sub-agent's finished turn goes to whoever awaits it, else to its parent as a notice (not for a turn
    # the user had with it directly, nor for one its master terminated).
    result = TurnResult(task_id=turn.task_id, status=outcome.status, final_text=turn.reply[1] if turn.reply else "",
                        error=(outcome.error or {}).get("message"), duration_s=time.monotonic() - turn.started)
    if waiters.awaited(turn.agent_id):
        return _Facts(flags, busy, result, None, True)
    agent = agent_store.get_agent(rt.db, turn.agent_id)
    if turn.from_user or agent is None or agent.terminated:
        return _Facts(flags, busy, result, None, False)
    return _Facts(flags, busy, result, rt.sub_agents.completion_notice(agent, result), False)


def _commit(rt: TurnRuntime, turn: Turn, sender: TaskEventSender, outcome: TurnOutcome, facts: _Facts,
            usage: UsageSums, answers: bool, *, retried: bool) -> _Ended | None:
    """The end's one transaction, shared with whatever else the process writes at that moment (the group
    commit: a wave of turns ending costs one commit, not one each). `answers`: an ask of the turn took an
    answer (`MessageRouter.forget_answers_taken`)."""
    with rt.event_log.exclusive(turn.task_id):
        return rt.event_log.writer.call(lambda s: _commit_in(s, rt, turn, sender, outcome, facts, usage, answers,
                                                             retried=retried))


def _commit_in(s: Session, rt: TurnRuntime, turn: Turn, sender: TaskEventSender, outcome: TurnOutcome,
               facts: _Facts, usage: UsageSums, answers: bool, *, retried: bool) -> _Ended | None:
    me = rt.membership.process_id
    # First the status, by compare-and-set: a process that took this task over (it judged us gone)
    # has the last word, and its row lock keeps anyone else from ending it meanwhile.
    if not task_store.set_task_status_in(s, turn.task_id, outcome.status, error=outcome.error,
                                         expected=task_store.ACTIVE_STATUSES, owner=me):
        task = task_store.reread_in(s, turn.task_id)
        mine = retried and task is not None and task.owner == me and task.status == outcome.status \
            and task.error == outcome.error
        return _Ended(None, []) if mine else None
    if turn.wrote_tool_calls:  # (a read every reply without calls made for nothing, issue 26)
        close_open_tool_calls_in(s, turn.conversation_id, turn.agent_id,
                                 _CLOSE_REASONS.get(outcome.status, _FAILED_REASON), first_seq=_first_seq(turn))
    # An answer an ask took but never wrote down goes back to the queue, for the agent's next turn (a look every
    # turn's end made for nothing where no ask took one, issue 26).
    if answers:
        queue.requeue_unwritten_answers_in(s, turn.agent_id)
    # Messages an inline batch drained just before a stop, which no model request read, go back to the queue: the
    # follow-up turn answers them, as it does those the stop left queued (docs/API.md, `POST /api/tasks`).
    if outcome.status == STOPPED and turn.unread:
        queue.put_back_in(s, turn.agent_id, turn.task_id, turn.unread)
    change = _release_in(rt, s, turn.agent_id, outcome)
    events: list[Event] = []
    if change is not None:
        events.append(state_event(change))
    if facts.busy_sub_agents:
        events.append(SubAgentWaitingEvent(count=len(facts.busy_sub_agents), tasks=facts.busy_sub_agents))
    if outcome.status == SUCCEEDED:
        events.append(TaskCompleteEvent(**facts.flags, usage=usage))
    elif outcome.status == STOPPED:
        events.append(TaskEndEvent(**facts.flags))
    else:
        events.append(ErrorEvent.of(outcome.error, **facts.flags))
    payloads = sender.payloads(events)
    first_idx = rt.event_log.append_in(s, turn.task_id, payloads)
    if facts.notice is not None:
        rt.router.enqueue_in(s, facts.notice)
    return _Ended(first_idx, payloads)


def _release_in(rt: TurnRuntime, s: Session, agent_id: str, outcome: TurnOutcome) -> StateChange | None:
    """The agent leaves `running` (or `waiting`, when the turn died inside an ask), whatever it was."""
    agent = agent_store.state_in(s, agent_id)
    if agent is None or agent.state not in BUSY_AGENT_STATES:
        return None
    done = outcome.status == SUCCEEDED and agent.state == agent_state.RUNNING
    return rt.agent_states.transition_in(s, agent_id, agent_state.COMPLETED if done else agent_state.IDLE, force=True,
                                         read=agent)


def _first_seq(turn: Turn) -> int:
    """Where the turn's own history entries begin: the first message its start drained. What a turn's end reads
    of the history follows what the turn wrote, not the length of the conversation."""
    return turn.drained[0].seq if turn.drained else 0


def _suggest(rt: TurnRuntime, turn: Turn, next_idx: int | None) -> None:
    """Suggestions follow a reply to the user: a turn that a user message started or joined, while the user is within
    their budget. `next_idx`: the index their event takes, the one after the end's events (None when unknown: their
    log is read)."""
    if turn.user_text is None or turn.reply is None:
        return
    if conversation_over_budget(rt.budgets, rt.ledger, turn.conversation_id) is not None:
        return  # a request past the user's budget, for chips a send would refuse (docs/API.md, "Usage and budgets")
    message_id, reply = turn.reply
    rt.suggestions.schedule(task_id=turn.task_id, conversation_id=turn.conversation_id,
                            agent_id=turn.agent_id, reply_message_id=message_id,
                            user_message=turn.user_text, reply=reply, next_idx=next_idx)

