"""One tool round: run every tool call of an assistant message, record each result, then the inline batch
(docs/ARCHITECTURE.md, "The path of a completion notice")."""

from __future__ import annotations

import dataclasses
import json

from modules.event_catalogue import ToolResultEvent, ToolStartEvent
from modules.llm import ToolCall
from modules.multi_agent.message_router import INJECTED_INLINE
from modules.tools.base import ToolContext
from server.sender import EventSender
from server.turns.context import TurnRuntime
from server.turns.events import emit_pending_count, emit_user_messages
from server.turns.history import append_if_ours, tool_result_draft
from server.turns.types import Turn

STOPPED_RESULT = {"success": False, "error": "cancelled: the user stopped the task before this call ran"}


def inject_runtime_user_message(rt: TurnRuntime, turn: Turn, sender: EventSender, *,
                                queued: int | None = None) -> int:
    """The inline batch: drain everything queued for the running agent (completion notices of its
    sub-agents and background commands, messages, questions, answers) into its history, after any
    tool block, in one transaction, and echo each as a `user_message`. No new task. `queued`: how many
    messages a read made a moment ago found queued (the turn's start), instead of looking again."""
    if queued == 0 or (queued is None and not rt.router.has_queued(turn.agent_id)):
        return 0  # (a read, not a write batch's wait: mostly nothing is queued)
    drained = rt.router.consume_pending_messages(turn.agent_id, turn.conversation_id, turn.task_id,
                                                 owner=rt.membership.process_id)
    turn.note_drained(drained)
    turn.unread.extend(m.message_id for m in drained)
    emit_user_messages(sender, drained, INJECTED_INLINE, turn.display_name)
    if drained:
        emit_pending_count(rt, turn.conversation_id, turn.agent_id)
    return len(drained)


def execute_tool_calls(rt: TurnRuntime, turn: Turn, sender: EventSender, tool_calls: list[ToolCall]) -> None:
    """Run the calls in order; once the turn is stopped, the rest are closed with a cancelled result.

    Results are written as they come, right after the assistant message, so the tool block stays contiguous.
    What queued up for the agent meanwhile is its next round's inline batch (`handle_task_with_sender`), after
    the whole block, once that round's model request is sure to be made; it stays queued otherwise.
    """
    ctx = ToolContext(
        conversation_id=turn.conversation_id, agent_id=turn.agent_id, agent_display_name=turn.display_name,
        workspace=rt.workspace(turn.conversation_id), settings=rt.settings, sandbox=rt.sandbox,
        should_stop=turn.stopped,
        task_id=turn.task_id, services=rt.services, emit=sender.emit,
    )
    for call in tool_calls:
        sender.emit(ToolStartEvent(tool_call_id=call.id, name=call.name, arguments=call.arguments))
        if turn.stopped():
            result = STOPPED_RESULT
        else:
            with rt.tracing.span(f"execute_tool {call.name}", {
                    "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": call.name,
                    "gen_ai.tool.call.id": call.id, "gen_ai.agent.name": turn.display_name}):
                result = rt.tools.execute(call.name, call.arguments, dataclasses.replace(ctx, tool_call_id=call.id),
                                          allowed=list(turn.profile.tools))
        if append_if_ours(rt, turn, [tool_result_draft(call.id, call.name, result)]) is None:
            return  # taken over: the new owner closed the open calls already
        sender.emit(ToolResultEvent(tool_call_id=call.id, name=call.name,
                                    result=json.dumps(result, ensure_ascii=False)))
