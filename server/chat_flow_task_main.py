"""The body of one turn (call the model, run its tool calls, again, until it answers or stops) and the one
end-of-turn poller, `poll_completion_notifications` (docs/ARCHITECTURE.md, "The path of a completion notice")."""

from __future__ import annotations

import logging
import time

from sqlalchemy.orm import Session

from modules.event_catalogue import AiMessageStartEvent, ReasoningChunkEvent, TextChunkEvent, TextEndEvent
from modules.llm import ModelError, ModelReply
from modules.llm.types import CONTEXT_LENGTH_EXCEEDED
from modules.storage import agents as agent_store
from modules.storage.message_meta import MessageMeta
from modules.storage.models import Agent, Message
from modules.storage.records import new_id
from modules.usage.records import AGENT, CallContext
from server.budget_guard import conversation_over_budget
from server.chat_flow_tool_loop import execute_tool_calls, inject_runtime_user_message
from server.sender import EventSender
from server.turns.context import TurnRuntime
from server.turns.context_window import ContextTooLarge, agent_producer, build_model_messages, request_tokens
from server.turns.history import persist_assistant_message, turn_is_ours
from server.turns.types import CLAIM_TRUSTED_S, FAILED, STOPPED, SUCCEEDED, Collect, StartTurn, Turn, TurnOutcome

log = logging.getLogger(__name__)


class _Overflow(Exception):
    """The provider refused a request of `sent` (estimated) tokens as longer than its window."""

    def __init__(self, sent: int, error: ModelError) -> None:
        super().__init__(str(error))
        self.sent, self.error = sent, error


class _StoppedWhileCompacting(Exception):
    """The user stopped the turn while its history was being summarised: no model request follows."""


def _stream_reply(rt: TurnRuntime, turn: Turn, sender: EventSender, message_id: str, *,
                  refused_at: int | None = None) -> ModelReply:
    tools = rt.tools.definitions(list(turn.profile.tools)) or None
    messages = build_model_messages(rt, turn, sender, tools, refused_at=refused_at)
    if turn.stopped():
        raise _StoppedWhileCompacting
    turn.unread.clear()  # the request below reads what the inline batches drained
    if turn.active_recorded:  # the turn's start wrote it, in the claim's transaction
        turn.active_recorded = False
    elif turn.from_user:  # the pre-reasoning hook: a turn on the user's messages (never a background task's)
        rt.active_agents.set_active_agent(turn.conversation_id, turn.agent_id)
    if refused_at is None:
        sender.emit(AiMessageStartEvent(message_id=message_id, display_name=turn.display_name))
    context = CallContext(AGENT, turn.conversation_id, agent=turn.display_name, agent_id=turn.agent_id,
                          task_id=turn.task_id)

    def on_text(chunk: str) -> None:
        sender.emit(TextChunkEvent(message_id=message_id, content=chunk))

    def on_reasoning(chunk: str) -> None:
        sender.emit(ReasoningChunkEvent(message_id=message_id, content=chunk))

    try:
        return rt.model.bound(context).stream_chat(
            messages=messages, tools=tools, model=turn.profile.model or rt.settings.llm_model or None,
            on_text=on_text, on_reasoning=on_reasoning, should_stop=turn.stopped,
        )
    except ModelError as exc:
        if exc.code == CONTEXT_LENGTH_EXCEEDED and not (exc.partial or exc.partial_reasoning) and refused_at is None:
            raise _Overflow(request_tokens(messages, tools), exc) from exc
        raise


def _reply_within_window(rt: TurnRuntime, turn: Turn, sender: EventSender, message_id: str) -> ModelReply:
    """The model's reply; when the provider says the request overflowed its window although the budget
    thought it fit, compacted harder and asked once more (README, "Long conversations")."""
    try:
        return _stream_reply(rt, turn, sender, message_id)
    except _Overflow as overflow:
        log.warning("task %s: the model refused %d tokens as too long (%s); compacting harder",
                    turn.task_id, overflow.sent, overflow.error)
        return _stream_reply(rt, turn, sender, message_id, refused_at=overflow.sent)


def _reply_marks(reply: ModelReply, producer: str) -> MessageMeta:
    """What `text_end` and the stored message say of a reply cut short: by Stop, at the output limit or by the
    provider's content filter; the model's thinking; and who wrote it (`producer`: what the provider wants back
    goes back to it only)."""
    stopped = True if reply.finish_reason == "stopped" else None
    return MessageMeta(partial=stopped, stopped=stopped, truncated=True if reply.truncated else None,
                       filtered=True if reply.filtered else None, reasoning=reply.reasoning or None,
                       reasoning_details=reply.reasoning_details, producer=producer)


def _keep_partial(rt: TurnRuntime, turn: Turn, sender: EventSender, message_id: str, exc: ModelError) -> None:
    """What the model streamed before it failed stays in the history and the chat, marked as cut off: its text
    and the thinking before it (thinking alone ends the reply in the chat; an empty reply is not stored)."""
    reasoning = exc.partial_reasoning or None
    persist_assistant_message(rt, turn, message_id, exc.partial, [],
                              meta=MessageMeta(partial=True, error_code=exc.code, reasoning=reasoning))
    sender.emit(TextEndEvent(message_id=message_id, content=exc.partial, partial=True, error_code=exc.code,
                             reasoning=reasoning))


def handle_task_with_sender(rt: TurnRuntime, turn: Turn, sender: EventSender) -> TurnOutcome:
    """Run one turn. Messages that reach the agent while it runs are drained into its history
    before its next model call (see `execute_tool_calls`); what arrives after the last model call
    is picked up by the end-of-turn poller, `poll_completion_notifications`."""
    checked = turn.take_start_check()  # what the turn's start read a moment ago, if it did
    inject_runtime_user_message(rt, turn, sender, queued=checked.queued if checked is not None else None)
    limit = rt.settings.max_tool_iterations
    for iteration in range(limit):
        # The claim wrote the task as ours a moment ago (unless its thread started late).
        confirmed = iteration == 0 and checked is not None and time.monotonic() - turn.started < CLAIM_TRUSTED_S
        if turn.stopped() or not (confirmed or turn_is_ours(rt, turn)):
            return TurnOutcome(STOPPED)  # (a task taken over by another process is left to it by _finish)
        if over := conversation_over_budget(rt.budgets, rt.ledger, turn.conversation_id):
            return TurnOutcome(FAILED, {"code": "budget_exceeded", "message": over.message,
                                        "resets_at": over.resets_at})
        if iteration:  # the round before's inline batch, once this request is sure to be made: a turn that ends
            inject_runtime_user_message(rt, turn, sender)  # here (over budget) leaves the queue to the next one
        message_id = new_id()
        try:
            reply = _reply_within_window(rt, turn, sender, message_id)
        except _StoppedWhileCompacting:
            return TurnOutcome(STOPPED)
        except ContextTooLarge as exc:
            log.warning("task %s: %s", turn.task_id, exc)
            return TurnOutcome(FAILED, {"code": "context_too_large", "message": str(exc)})
        except ModelError as exc:
            log.warning("model call failed for task %s: %s %s", turn.task_id, exc.code, exc)
            if exc.partial or exc.partial_reasoning:
                _keep_partial(rt, turn, sender, message_id, exc)
            return TurnOutcome(FAILED, {"code": exc.code, "message": str(exc)})
        calls = [] if turn.stopped() else reply.tool_calls
        turn.wrote_tool_calls = turn.wrote_tool_calls or bool(calls)  # (before the write: its end must look)
        mark = _reply_marks(reply, agent_producer(rt, turn))
        if not persist_assistant_message(rt, turn, message_id, reply.content, calls, meta=mark):
            return TurnOutcome(STOPPED)  # taken over by another process
        sender.emit(TextEndEvent(message_id=message_id, content=reply.content, partial=mark.partial,
                                 stopped=mark.stopped, truncated=mark.truncated, filtered=mark.filtered,
                                 reasoning=mark.reasoning))
        if turn.stopped():
            return TurnOutcome(STOPPED)
        if not calls:
            return TurnOutcome(SUCCEEDED)
        execute_tool_calls(rt, turn, sender, calls)
    return TurnOutcome(FAILED, {"code": "iteration_limit",
                                "message": f"stopped after {limit} model calls without a final answer"})


def poll_completion_notifications(rt: TurnRuntime, agent_id: str, claim: StartTurn, queued: bool = False) -> str | None:
    """The one place a turn starts from an agent's queue: run after each turn's end (once the agent's state
    left `running`) and whenever a message wakes an idle agent; the new task's id, if any.

    Completions (sub-agent and background-command notices) and messages that
    queued up while nobody ran are all in the agent's queue: one follow-up turn
    (`claim`, the TurnManager's compare-and-set) takes every one of them, in
    arrival order, inside the claim's transaction, the first N-1 into the
    history as preceding notices (`starts_work: false`) and the last as its
    trigger. Completions that come later wake the agent themselves when they
    are queued (the membership sweep's wake is only a safety net).

    `queued`: the caller has just queued a message for the agent (the router's wake), so the look at the queue
    before the claim is skipped; the claim looks again under the agent's lock either way.
    """
    if not queued and not rt.router.has_queued(agent_id):
        return None
    if rt.budgets.active and _owner_over_budget(rt, agent_id):
        return None  # what is queued stays queued for a turn the budget allows (docs/API.md, "Usage and budgets")
    return claim(agent_id, collect_queue(rt, agent_id))


def _owner_over_budget(rt: TurnRuntime, agent_id: str) -> bool:
    """Whether the user of the agent's conversation has used up a budget: a turn would end before its first
    model request, with the queue it took read into its history and never answered."""
    agent = agent_store.get_agent(rt.db, agent_id)
    return agent is not None and conversation_over_budget(rt.budgets, rt.ledger, agent.conversation_id) is not None


def collect_queue(rt: TurnRuntime, agent_id: str) -> Collect:
    """What a turn takes from the agent's queue inside its claim: all of it, the last message its trigger."""

    def collect(session: Session, agent: Agent, task_id: str) -> list[Message]:
        return rt.router.drain_to_history_in(session, agent_id, agent.conversation_id, task_id,
                                             last_starts_work=True)

    return collect
