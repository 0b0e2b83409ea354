"""A turn's history: persisting replies and tool results, closing open tool calls, and the ownership check
that guards every write (docs/ARCHITECTURE.md, "The turn package"); the model's view of it is
server/turns/context_window.py."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from sqlalchemy.orm import Session

from modules.llm import ToolCall
from modules.storage import messages as message_store
from modules.storage import tasks as task_store
from modules.storage.message_meta import MessageMeta
from modules.storage.messages import MessageDraft, storable
from modules.storage.models import Message
from server.turns.context import TurnRuntime
from server.turns.types import Turn


def turn_is_ours(rt: TurnRuntime, turn: Turn) -> bool:
    """False once another process took the task over (it judged this one gone): from then on this
    process must not write the agent's history."""
    return task_store.still_owned(rt.db, turn.task_id, rt.membership.process_id)


def append_if_ours(rt: TurnRuntime, turn: Turn, drafts: list[MessageDraft]) -> list[Message] | None:
    """Append `drafts` to the turn's agent's history, with the ownership check in the same transaction (the
    group commit's: a wave of replies shares commits); None, with nothing written, once another process took
    the task over."""
    owner = rt.membership.process_id

    def step(s: Session) -> list[Message] | None:
        if not task_store.still_owned_in(s, turn.task_id, owner):
            return None
        return message_store.append_in(s, turn.conversation_id, turn.agent_id, drafts)

    return rt.event_log.writer.call(step)


def persist_assistant_message(rt: TurnRuntime, turn: Turn, message_id: str, content: str,
                              tool_calls: list[ToolCall], *, meta: MessageMeta | None = None) -> bool:
    """The model's reply into the history (nothing when it is empty); False, with nothing written, once the
    task is no longer this process's."""
    calls = [
        {"id": call.id, "type": "function", "function": {"name": call.name, "arguments": call.arguments}}
        | ({"extra_content": call.extra_content} if call.extra_content else {})  # replayed as it came
        for call in tool_calls
    ]
    drafts = [MessageDraft(role="assistant", content=content or None, tool_calls=calls or None,
                           message_id=message_id,
                           meta=(meta or MessageMeta()).model_copy(update={"task_id": turn.task_id}))]
    if append_if_ours(rt, turn, drafts if content or calls else []) is None:
        return False
    if content:
        turn.reply = (message_id, storable(content) or "")  # as stored: its end hands it on (a notice's text)
    return True


def tool_result_draft(call_id: str, name: str, result: dict[str, Any]) -> MessageDraft:
    return MessageDraft(role="tool", content=json.dumps(result, ensure_ascii=False), tool_call_id=call_id,
                        name=name)


def close_open_tool_calls_in(s: Session, conversation_id: str, agent_id: str, reason: str,
                             extra: Callable[[str], dict[str, Any]] = lambda call_id: {},
                             first_seq: int = 0) -> list[Message]:
    """Give every tool call still without a result one, so the agent's next model request is valid;
    `extra(call_id)` adds what is left of the call (recovery: a killed command's partial output); `first_seq`:
    the turn's first entry (a turn's end looks at its own calls only)."""
    drafts = [
        tool_result_draft(call["id"], call["function"]["name"],
                          {"success": False, "error": reason, **extra(call["id"])})
        for call in message_store.open_tool_calls_in(s, agent_id, first_seq)
    ]
    return message_store.append_in(s, conversation_id, agent_id, drafts) if drafts else []
