"""Helpers of the chat flow: history <-> model messages, persisting replies, closing open tool calls."""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy import Row
from sqlalchemy.orm import Session

from modules.llm import ModelReply
from modules.multi_agent.message_router import INJECTED_INLINE
from modules.storage import messages as message_store
from modules.storage import tasks as task_store
from modules.storage.messages import MessageDraft
from modules.storage.models import Message
from server.chat_flow_types import ChatTurn
from server.queue_events import emit_pending_count
from server.runtime import Runtime
from server.sender import EventSender


def turn_is_ours(rt: Runtime, turn: ChatTurn) -> bool:
    """False once another process took the task over (it judged this one gone): from then on this
    process must not write the agent's history."""
    return task_store.still_owned(rt.db, turn.task_id, rt.membership.process_id)


def to_model_message(msg: Message | Row) -> dict[str, Any]:
    out: dict[str, Any] = {"role": msg.role, "content": msg.content or ""}
    if msg.role == "assistant" and msg.tool_calls:
        out["tool_calls"] = msg.tool_calls
        if not msg.content:
            out["content"] = None
    if msg.role == "tool":
        out["tool_call_id"] = msg.tool_call_id
    return out


def build_model_messages(rt: Runtime, turn: ChatTurn) -> list[dict[str, Any]]:
    system = turn.profile.system_message(turn.display_name)
    history = message_store.model_history(rt.db, turn.agent_id)
    return [{"role": "system", "content": system}, *(to_model_message(m) for m in history)]


def user_message_event(msg: Message) -> dict[str, Any]:
    """The `user_message` event data of a stored user-role message."""
    meta = dict(msg.meta or {})
    return {
        "message": msg.content or "",
        "message_id": msg.message_id,
        "source": meta.pop("source", "user"),
        "visibility": meta.pop("visibility", "chat"),
        "starts_work": meta.pop("starts_work", True),
        "metadata": meta,
        "agent_id": msg.agent_id,
    }


def user_message_events(msg: Message, delivery: str, display_name: str) -> list[tuple[str, dict[str, Any]]]:
    """The echo of a message the agent now sees; a user's message is followed by how it was routed."""
    event = user_message_event(msg)
    events: list[tuple[str, dict[str, Any]]] = [("user_message", event)]
    route = event["metadata"].get("route")
    if event["source"] == "user" and route:
        events.append(("route", {"route": route, "delivery": delivery, "target_agent": display_name,
                                 "message_id": msg.message_id}))
    return events


def emit_user_messages(sender: EventSender, messages: list[Message], delivery: str, display_name: str) -> None:
    events = [event for msg in messages for event in user_message_events(msg, delivery, display_name)]
    if events:
        sender.emit_many(events)


def inject_runtime_user_message(rt: Runtime, turn: ChatTurn, sender: EventSender) -> int:
    """The inline batch: drain everything queued for the running agent (completion notices of its
    sub-agents and background commands, messages, questions, answers) into its history, after any
    tool block, in one transaction, and echo each as a `user_message`. No new task."""
    drained = rt.router.consume_pending_messages(turn.agent_id, turn.conversation_id, turn.task_id)
    emit_user_messages(sender, drained, INJECTED_INLINE, turn.display_name)
    if drained:
        emit_pending_count(rt, turn.conversation_id, turn.agent_id)
    return len(drained)


def persist_assistant_message(rt: Runtime, turn: ChatTurn, message_id: str, reply: ModelReply,
                              *, meta: dict[str, Any] | None = None) -> Message | None:
    calls = [
        {"id": call.id, "type": "function", "function": {"name": call.name, "arguments": call.arguments}}
        for call in reply.tool_calls
    ]
    if not reply.content and not calls:
        return None
    draft = MessageDraft(role="assistant", content=reply.content or None, tool_calls=calls or None,
                         message_id=message_id, meta={"task_id": turn.task_id, **(meta or {})})
    return message_store.append_messages(rt.db, turn.conversation_id, turn.agent_id, [draft])[0]


def tool_result_draft(call_id: str, name: str, result: dict[str, Any]) -> MessageDraft:
    return MessageDraft(role="tool", content=json.dumps(result, ensure_ascii=False), tool_call_id=call_id,
                        name=name)


def close_open_tool_calls(rt: Runtime, conversation_id: str, agent_id: str, reason: str) -> list[Message]:
    """Give every tool call still without a result one, so the agent's next model request is valid."""
    with rt.db.write() as s:
        return close_open_tool_calls_in(s, conversation_id, agent_id, reason)


def close_open_tool_calls_in(s: Session, conversation_id: str, agent_id: str, reason: str) -> list[Message]:
    drafts = [
        tool_result_draft(call["id"], call["function"]["name"], {"success": False, "error": reason})
        for call in message_store.open_tool_calls_in(s, agent_id)
    ]
    return message_store.append_in(s, conversation_id, agent_id, drafts) if drafts else []
