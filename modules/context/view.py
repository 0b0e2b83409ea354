"""The model's view of an agent's history: stored rows -> chat messages, with long texts shortened where
the budget asks for it, and a reply's reasoning sent back where the provider needs it."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from modules.context.shorten import shorten_tokens
from modules.llm.tokens import count_message
from modules.storage.message_meta import MessageMeta


@dataclass(frozen=True)
class HistoryRow:
    """One stored history entry, as the view reads it (modules/storage/messages.py `history_after`)."""

    seq: int
    role: str
    content: str | None
    tool_calls: list[dict[str, Any]] | None = None
    tool_call_id: str | None = None
    reasoning: str = ""  # the model's thinking behind an assistant message (metadata `reasoning`)
    replaces_from: int | None = None  # a new version of a turn: the seq it replaces from (./versions.py)
    reasoning_details: list[dict[str, Any]] | None = None  # OpenRouter's structured thinking (metadata)
    producer: str | None = None  # the endpoint and model that wrote an assistant message (metadata; `producer_of`)

    @classmethod
    def from_row(cls, row: Any) -> HistoryRow:
        meta = MessageMeta.load(row.meta)
        return cls(row.seq, row.role, row.content, row.tool_calls, row.tool_call_id,
                   meta.reasoning or "", meta.replaces_from_seq, meta.reasoning_details, meta.producer)


def producer_of(endpoint: str, model: str) -> str:
    """Who a request goes to, and who wrote a reply: `<model>@<digest of the endpoint's URL>`. The model by name,
    the endpoint by a digest: the tag is in a stored message's metadata, shown to its user, and the endpoint's
    address is the operator's."""
    return f"{model}@{hashlib.sha256(endpoint.encode()).hexdigest()[:12]}"


def model_message(row: HistoryRow, *, producer: str, with_reasoning: bool = False) -> dict[str, Any]:
    """The chat message of a row for a request to `producer`. What a provider asks to get back (a call's
    `extra_content`, thinking as `reasoning_content` and OpenRouter's `reasoning_details`) goes back only to the
    endpoint and model that wrote it: another one may refuse keys it does not know (400). The thinking goes only
    when asked (an assistant message with tool calls of the current turn: DeepSeek's thinking mode, and Gemini 3
    through OpenRouter, refuse the follow-up request without it) and only when the provider produced some. A row
    stored without a producer (before it was recorded) is taken as the request's own."""
    out: dict[str, Any] = {"role": row.role, "content": row.content or ""}
    if row.role == "assistant" and row.tool_calls:
        own = row.producer is None or row.producer == producer
        out["tool_calls"] = _replayable(row.tool_calls, own=own)
        if not row.content:
            out["content"] = None
        if own and with_reasoning and row.reasoning:
            out["reasoning_content"] = row.reasoning
        if own and with_reasoning and row.reasoning_details:
            out["reasoning_details"] = row.reasoning_details
    if row.role == "tool":
        out["tool_call_id"] = row.tool_call_id
    return out


def _replayable(calls: list[dict[str, Any]], *, own: bool) -> list[dict[str, Any]]:
    """The calls with arguments that are not a JSON object (cut at the output limit, malformed) sent as `{}`:
    vLLM parses every replayed call's arguments and refuses the request when one does not parse, so one bad call
    would fail all the agent's later requests. The row keeps what the model wrote; the call's tool result says
    what was wrong with it. Not `own` (another endpoint or model wrote them): without their `extra_content`."""
    out = []
    for call in calls:
        if not own and "extra_content" in call:
            call = {k: v for k, v in call.items() if k != "extra_content"}
        function = call.get("function")
        if isinstance(function, dict) and not _json_object(function.get("arguments")):
            call = {**call, "function": {**function, "arguments": "{}"}}
        out.append(call)
    return out


def _json_object(text: Any) -> bool:
    try:
        return isinstance(text, str) and isinstance(json.loads(text), dict)
    except (ValueError, RecursionError):
        return False


def shortened(message: dict[str, Any], max_tokens: int) -> dict[str, Any]:
    """The message with its text cut to `max_tokens` (head and tail kept around a marker)."""
    content = message.get("content")
    if not isinstance(content, str) or not content:
        return message
    short = shorten_tokens(content, max_tokens)
    return message if short is content else {**message, "content": short}


@dataclass
class HistoryView:
    """The rows after the current summary and the messages the model will see for them, one per row, with
    each message's token count (kept in step, so shortening one message recounts only it)."""

    rows: list[HistoryRow]
    messages: list[dict[str, Any]]
    sizes: list[int]

    @classmethod
    def of(cls, rows: list[HistoryRow], current_from_seq: int, producer: str) -> HistoryView:
        """The view for a request to `producer` (`producer_of`)."""
        messages = [model_message(r, producer=producer, with_reasoning=r.seq >= current_from_seq) for r in rows]
        return cls(rows, messages, [count_message(m) for m in messages])

    @property
    def tokens(self) -> int:
        return sum(self.sizes)

    def shorten_where(self, max_tokens: int, *, current_from_seq: int, roles: tuple[str, ...],
                      current: bool = False) -> None:
        """Shorten the messages of `roles` before the current turn (or, with `current`, of it too) to
        `max_tokens` each."""
        for i, row in enumerate(self.rows):
            if row.role in roles and (current or row.seq < current_from_seq) and self.sizes[i] > max_tokens:
                self.messages[i] = shortened(self.messages[i], max_tokens)
                self.sizes[i] = count_message(self.messages[i])

    def drop_first(self, n: int) -> None:
        del self.rows[:n], self.messages[:n], self.sizes[:n]
