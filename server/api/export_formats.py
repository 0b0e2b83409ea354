"""The export's two formats (docs/API.md, `GET .../export`) written piece by piece as the histories are read.

The bytes are those of the whole document rendered at once (`json.dumps(document, ensure_ascii=False,
indent=2)`, and the Markdown below joined and stripped at its end), so a long conversation streams without
being held in memory, and clients see the same file as before.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from modules.statuses import MessageSource
from modules.storage.message_meta import MessageMeta

CHUNK_CHARS = 64 * 1024  # pieces are gathered up to about this size before each write to the client


@dataclass(frozen=True)
class AgentHistory:
    """One agent of the export (as `GET .../agents` shows it) and its messages (as `GET .../messages`), lazily."""

    agent: dict[str, Any]
    messages: Iterator[dict[str, Any]]


def _dumps(value: Any, depth: int) -> str:
    """`value` as `json.dumps(..., indent=2)` writes it `depth` levels deep: JSON escapes every newline inside a
    string, so each newline of the text is one of the layout's."""
    return json.dumps(value, ensure_ascii=False, indent=2).replace("\n", "\n" + "  " * depth)


def _json_pieces(conversation: dict[str, Any], histories: Iterable[AgentHistory]) -> Iterator[str]:
    yield '{\n  "conversation": ' + _dumps(conversation, 1) + ',\n  "agents": ['
    agents = 0
    for entry in histories:
        yield (",\n" if agents else "\n") + '    {\n      "agent": ' + _dumps(entry.agent, 3) + ',\n      "messages": ['
        messages = 0
        for message in entry.messages:
            yield (",\n" if messages else "\n") + "        " + _dumps(message, 4)
            messages += 1
        yield ("\n      ]" if messages else "]") + "\n    }"
        agents += 1
    yield ("\n  ]" if agents else "]") + "\n}"


def json_chunks(conversation: dict[str, Any], histories: Iterable[AgentHistory]) -> Iterator[str]:
    """`{"conversation": ..., "agents": [{"agent": ..., "messages": [...]}]}`, indented by 2."""
    return _gathered(_json_pieces(conversation, histories))


def _message_markdown(msg: dict[str, Any], agent_name: str) -> str:
    meta = MessageMeta.load(msg["metadata"])
    if msg["role"] == "user":
        who = "User" if meta.source in (None, MessageSource.USER) else f"Notice ({meta.source})"
    elif msg["role"] == "assistant":
        who = agent_name
    else:
        who = f"Tool result ({msg['name'] or msg['tool_call_id']})"
    lines = [f"**{who}** · {msg['created_at']}", ""]
    if msg["content"]:
        lines += [msg["content"], ""]
    for call in msg["tool_calls"] or []:
        function = call.get("function", {})
        lines += [f"Tool call `{function.get('name')}`:", "", "```json", str(function.get("arguments", "")),
                  "```", ""]
    return "\n".join(lines)


def _markdown_parts(conversation: dict[str, Any], histories: Iterable[AgentHistory],
                    exported_at: str | None) -> Iterator[str]:
    yield from (f"# {conversation['title']}", "", f"Created {conversation['created_at']}, exported {exported_at}.", "")
    for entry in histories:
        agent = entry.agent
        yield from (f"## {agent['display_name']} ({agent['role']}, {agent['kind']})", "")
        for message in entry.messages:
            yield _message_markdown(message, agent["display_name"])


def _joined_and_stripped(parts: Iterator[str]) -> Iterator[str]:
    """`"\\n".join(parts).rstrip() + "\\n"`, piece by piece: white space is held back until text follows it."""
    held = None
    for part in parts:
        text = part if held is None else held + "\n" + part
        kept = text.rstrip()
        held = text[len(kept):]
        if kept:
            yield kept
    yield "\n"


def markdown_chunks(conversation: dict[str, Any], histories: Iterable[AgentHistory],
                    exported_at: str | None) -> Iterator[str]:
    """The title, then each agent's heading and its messages, each with its author and `created_at`."""
    return _gathered(_joined_and_stripped(_markdown_parts(conversation, histories, exported_at)))


def _gathered(pieces: Iterator[str]) -> Iterator[str]:
    """The pieces joined into chunks of about CHUNK_CHARS: one write to the client each, not one per message."""
    buffer: list[str] = []
    size = 0
    for piece in pieces:
        buffer.append(piece)
        size += len(piece)
        if size >= CHUNK_CHARS:
            yield "".join(buffer)
            buffer, size = [], 0
    if buffer:
        yield "".join(buffer)
