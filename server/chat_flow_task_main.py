"""The body of one task: call the model, run its tool calls, again, until it answers or stops."""

from __future__ import annotations

import logging

from modules.llm import ModelError, ModelReply
from modules.storage.records import new_id
from server.chat_flow_task_support import (
    build_model_messages,
    inject_runtime_user_message,
    persist_assistant_message,
    turn_is_ours,
)
from server.chat_flow_tool_loop import execute_tool_calls
from server.chat_flow_types import FAILED, STOPPED, SUCCEEDED, ChatTurn, TurnOutcome
from server.runtime import Runtime
from server.sender import EventSender

log = logging.getLogger(__name__)


def _stream_reply(rt: Runtime, turn: ChatTurn, sender: EventSender, message_id: str) -> ModelReply:
    messages = build_model_messages(rt, turn)
    tools = rt.tools.definitions(list(turn.profile.tools)) or None
    rt.active_agents.set_active_agent(turn.conversation_id, turn.display_name)  # the pre-reasoning hook
    sender.emit("ai_message_start", {"message_id": message_id, "display_name": turn.display_name})
    return rt.model.stream_chat(
        messages=messages, tools=tools, model=turn.profile.model or rt.settings.llm_model or None,
        on_text=lambda chunk: sender.emit("text_chunk", {"message_id": message_id, "content": chunk}),
        should_stop=turn.stopped,
    )


def _keep_partial(rt: Runtime, turn: ChatTurn, sender: EventSender, message_id: str, exc: ModelError) -> None:
    """What the model streamed before it failed stays in the history and the chat, marked as cut off."""
    mark = {"partial": True, "error_code": exc.code}
    persist_assistant_message(rt, turn, message_id, ModelReply(exc.partial, [], "error"), meta=mark)
    sender.emit("text_end", {"message_id": message_id, "content": exc.partial, **mark})


def handle_task_with_sender(rt: Runtime, turn: ChatTurn, sender: EventSender) -> TurnOutcome:
    """Run one turn. Messages that reach the agent while it runs are drained into its history
    before its next model call (see `execute_tool_calls`); what arrives after the last model call
    is picked up by the end-of-turn check, `run_completion_poll`."""
    inject_runtime_user_message(rt, turn, sender)
    limit = rt.settings.max_tool_iterations
    for iteration in range(limit):
        if turn.stopped() or not turn_is_ours(rt, turn):
            return TurnOutcome(STOPPED)  # (a task taken over by another process is left to it by _finish)
        message_id = new_id()
        try:
            reply = _stream_reply(rt, turn, sender, message_id)
        except ModelError as exc:
            log.warning("model call failed for task %s: %s %s", turn.task_id, exc.code, exc)
            if exc.partial:
                _keep_partial(rt, turn, sender, message_id, exc)
            return TurnOutcome(FAILED, {"code": exc.code, "message": str(exc)})
        if not turn_is_ours(rt, turn):
            return TurnOutcome(STOPPED)
        calls = [] if turn.stopped() else reply.tool_calls
        mark = {"partial": True, "stopped": True} if reply.finish_reason == "stopped" else {}  # cut off by Stop
        persist_assistant_message(rt, turn, message_id, ModelReply(reply.content, calls, reply.finish_reason),
                                  meta=mark)
        sender.emit("text_end", {"message_id": message_id, "content": reply.content, **mark})
        if turn.stopped():
            return TurnOutcome(STOPPED)
        if not calls:
            return TurnOutcome(SUCCEEDED)
        execute_tool_calls(rt, turn, sender, calls, inline_batch=iteration + 1 < limit)
    return TurnOutcome(FAILED, {"code": "iteration_limit",
                                "message": f"stopped after {limit} model calls without a final answer"})


def run_completion_poll(rt: Runtime, agent_id: str) -> str | None:
    """The end-of-turn check, run once after the agent's state left `running`.

    Completions (sub-agent and background-command notices) and messages that
    queued up after the turn's last model call are all still in the agent's
    queue: one follow-up turn takes every one of them, in arrival order, the
    first N-1 as preceding notices and the last as its trigger. Completions
    that come later wake the agent themselves when they are queued (the
    membership sweep's wake is only a safety net).
    """
    return rt.tasks.create_chat_task(agent_id)
