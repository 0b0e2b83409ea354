"""Folds what an OpenAI-compatible endpoint sends (streamed chunks, or one JSON body from a provider that
ignores `stream: true`) into a ModelReply, passing text and thinking on as they arrive.

The quirks of real providers it absorbs (README, "Providers"):
- thinking as `reasoning_content` (DeepSeek, Qwen, GLM, Kimi), `reasoning` (OpenRouter, vLLM, Ollama) or a
  leading `<think>…</think>` in the content (reasoning models served without a reasoning parser): kept
  apart from the reply, never mixed into it;
- parallel tool calls each sent whole at `index: 0` with distinct ids (Gemini): a new id at an index that
  already holds a named call starts a new call; calls without an index (some compatible servers) too;
- a call's `extra_content` (Gemini 3's thought signature), kept to be sent back with the call; OpenRouter's
  `reasoning_details` (its fragments merged), kept to be sent back with the message's calls;
- usage in a chunk of its own with `choices: []`, or on the last chunk, or inside its choice (Kimi), or in its
  `x_groq` (Groq); DeepSeek's `prompt_cache_hit_tokens` and Kimi's top-level `cached_tokens` for cached input;
  thinking counted in `total_tokens` but left out of `completion_tokens` (Gemini) added to the completion as
  reasoning.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from .types import FailedAttempt, ModelError, ModelReply, ToolCall, Usage

_THINK_OPEN, _THINK_CLOSE = "<think>", "</think>"


@dataclass
class _PendingCall:
    id: str = ""
    name: str = ""
    arguments: str = ""
    extra_content: dict[str, Any] | None = None


class _ThinkSplitter:
    """Splits a content stream that may open with `<think>…</think>` into (thinking, text) pieces.

    Only a block at the very start counts (after white space); text is held back only while it could
    still be the start of the opening tag, and thinking only while it could be the start of the closing one.
    The white space after the block is dropped, also when it comes in chunks of its own (token by token)."""

    def __init__(self) -> None:
        self._state = "undecided"  # -> "thinking" -> "after" -> "text", or straight to "text"
        self._held = ""

    def feed(self, piece: str) -> list[tuple[bool, str]]:
        """Pieces as (is_thinking, text), in order; empty while undecided."""
        if self._state == "after":  # between the block and the reply
            piece = piece.lstrip()
            if not piece:
                return []
            self._state = "text"
        if self._state == "text":
            return [(False, piece)]
        self._held += piece
        out: list[tuple[bool, str]] = []
        if self._state == "undecided":
            lead = self._held.lstrip()
            if _THINK_OPEN.startswith(lead):
                return out  # still possibly the opening tag
            if not lead.startswith(_THINK_OPEN):
                self._state, held, self._held = "text", self._held, ""
                return [(False, held)]
            self._state, self._held = "thinking", lead[len(_THINK_OPEN):]
        end = self._held.find(_THINK_CLOSE)
        if end >= 0:
            thinking, rest = self._held[:end], self._held[end + len(_THINK_CLOSE):].lstrip()
            self._state, self._held = "text" if rest else "after", ""
            out += [(True, thinking)] if thinking else []
            return out + ([(False, rest)] if rest else [])
        keep = _partial_suffix(self._held, _THINK_CLOSE)
        ready, self._held = self._held[: len(self._held) - keep], self._held[len(self._held) - keep:]
        return out + ([(True, ready)] if ready else [])

    @property
    def held(self) -> str:
        """What is held back, not yet passed on."""
        return self._held

    def flush(self) -> list[tuple[bool, str]]:
        held, self._held = self._held, ""
        if not held:
            return []
        return [(self._state == "thinking", held)]


def _partial_suffix(text: str, tag: str) -> int:
    """Length of the longest end of `text` that is a proper start of `tag`."""
    for size in range(min(len(tag) - 1, len(text)), 0, -1):
        if tag.startswith(text[-size:]):
            return size
    return 0


def _count(value: Any) -> int:
    return value if isinstance(value, int) and value >= 0 else 0


def parse_usage(raw: Any) -> Usage | None:
    """The provider's `usage` object as a Usage; None when it sent none (or not an object)."""
    if not isinstance(raw, Mapping):
        return None
    prompt_details = raw.get("prompt_tokens_details")
    completion_details = raw.get("completion_tokens_details")
    cached = _count(prompt_details.get("cached_tokens")) if isinstance(prompt_details, Mapping) else 0
    reasoning = _count(completion_details.get("reasoning_tokens")) if isinstance(completion_details, Mapping) else 0
    prompt, completion = _count(raw.get("prompt_tokens")), _count(raw.get("completion_tokens"))
    # Gemini's OpenAI endpoint counts a thinking model's thoughts in `total_tokens` but not in `completion_tokens`:
    # they are output, billed as such (OpenAI's completion_tokens includes its reasoning).
    unlisted = max(0, _count(raw.get("total_tokens")) - prompt - completion)
    return Usage(
        prompt_tokens=prompt,
        completion_tokens=completion + unlisted,
        cached_tokens=cached or _count(raw.get("prompt_cache_hit_tokens")) or _count(raw.get("cached_tokens")),
        reasoning_tokens=reasoning or unlisted,
    )


class ReplyBuilder:
    """One attempt's reply, built chunk by chunk. `on_text`/`on_reasoning` run as pieces arrive; once
    `silence()` was called (the caller stopped waiting) nothing more is passed on."""

    def __init__(self, on_text: Callable[[str], None], on_reasoning: Callable[[str], None], model: str) -> None:
        self._on_text = on_text
        self._on_reasoning = on_reasoning
        self._model = model
        self._text: list[str] = []
        self._reasoning: list[str] = []
        self._details: list[dict[str, Any]] = []  # OpenRouter's `reasoning_details`, merged by `index`
        self._think = _ThinkSplitter()
        self._calls: list[_PendingCall] = []
        self._at_index: dict[int, int] = {}  # a call delta's index -> position in _calls
        self._finish_reason: str | None = None
        self._usage: Usage | None = None
        self._started = time.monotonic()
        self._first_token_s: float | None = None
        self._silenced = False
        self._lock = threading.Lock()

    @property
    def delivered(self) -> bool:
        """Something was passed on: a retry would show the user the same text twice."""
        return bool(self._text or self._reasoning)

    @property
    def finished(self) -> bool:
        """The provider said why the reply ended (`finish_reason`)."""
        return self._finish_reason is not None

    def add(self, chunk: Mapping[str, Any]) -> None:
        """One streamed chunk, as the provider sent it."""
        groq = chunk.get("x_groq")  # Groq without stream_options: usage in the last chunk's `x_groq`
        self._usage = (parse_usage(chunk.get("usage")) or parse_usage(groq.get("usage") if isinstance(groq, Mapping)
                                                                       else None) or self._usage)
        if isinstance(chunk.get("model"), str) and chunk["model"]:
            self._model = chunk["model"]
        choices = chunk.get("choices") or []
        if not choices or not isinstance(choices[0], Mapping):
            return  # e.g. a usage-only chunk
        choice = choices[0]
        self._usage = parse_usage(choice.get("usage")) or self._usage  # Kimi: usage inside the last choice
        delta = choice.get("delta") or {}
        calls = delta.get("tool_calls") or []
        for call_delta in calls:
            if isinstance(call_delta, Mapping):
                self._add_call_delta(call_delta)
        if choice.get("finish_reason"):
            self._finish_reason = choice["finish_reason"]
        for detail in delta.get("reasoning_details") or []:
            if isinstance(detail, Mapping):
                self._add_detail(detail)
        thinking = delta.get("reasoning_content") or delta.get("reasoning")
        pieces = [(True, thinking)] if isinstance(thinking, str) and thinking else []
        content = delta.get("content")
        if isinstance(content, str) and content:
            pieces += self._think.feed(content)
        if (pieces or calls) and self._first_token_s is None:
            self._first_token_s = time.monotonic() - self._started
        self._pass_on(pieces)

    def add_completion(self, body: Mapping[str, Any]) -> None:
        """A whole `chat.completion` body (a provider that ignored `stream: true`), read as one chunk."""
        choices = body.get("choices") or [{}]
        choice = choices[0] if isinstance(choices[0], Mapping) else {}
        message = choice.get("message") or {}
        calls = [{**call, "index": i} for i, call in enumerate(message.get("tool_calls") or [])
                 if isinstance(call, Mapping)]
        delta = {"content": message.get("content"), "tool_calls": calls,
                 "reasoning_content": message.get("reasoning_content") or message.get("reasoning"),
                 "reasoning_details": message.get("reasoning_details")}
        self.add({"choices": [{"delta": delta, "finish_reason": choice.get("finish_reason")}],
                  "usage": body.get("usage"), "model": body.get("model")})

    def silence(self) -> None:
        """The caller stopped waiting: what still arrives is dropped, never passed on."""
        with self._lock:
            self._silenced = True

    def _pass_on(self, pieces: list[tuple[bool, str]]) -> None:
        with self._lock:  # never interleaved with silence(): nothing is passed on after it
            if self._silenced:
                return
            for thinking, piece in pieces:
                (self._reasoning if thinking else self._text).append(piece)
                (self._on_reasoning if thinking else self._on_text)(piece)

    def _add_detail(self, detail: Mapping[str, Any]) -> None:
        """A fragment of `reasoning_details`: one of the same type and `index` as an earlier one continues it (its
        text and summary appended, its other fields, such as the signature, taken); any other is a new entry."""
        index = detail.get("index")
        same = next((d for d in reversed(self._details) if index is not None and d.get("index") == index
                     and d.get("type") == detail.get("type")), None)
        if same is None:
            self._details.append(dict(detail))
            return
        for key, value in detail.items():
            if key in ("text", "summary") and isinstance(value, str) and isinstance(same.get(key), str):
                same[key] += value
            elif value is not None:
                same[key] = value

    def _add_call_delta(self, delta: Mapping[str, Any]) -> None:
        index = delta.get("index")
        call_id = delta.get("id") or ""
        function = delta.get("function") or {}
        position = self._at_index.get(index) if isinstance(index, int) else (len(self._calls) - 1 if self._calls
                                                                             else None)
        current = self._calls[position] if position is not None else None
        # A new id with a name of its own at an occupied index is a new call (Gemini); an id repeated on
        # every delta of one call, or a changing id without a name, is still the same call.
        if current is None or (call_id and current.id and call_id != current.id and function.get("name")):
            current = _PendingCall()
            self._calls.append(current)
            if isinstance(index, int):
                self._at_index[index] = len(self._calls) - 1
        current.id = current.id or call_id
        current.name = current.name or function.get("name") or ""
        if isinstance(delta.get("extra_content"), Mapping):  # Gemini 3's thought signature
            current.extra_content = {**(current.extra_content or {}), **delta["extra_content"]}
        arguments = function.get("arguments")
        if isinstance(arguments, Mapping):  # an object where the format asks for its JSON text (Ollama's shape)
            arguments = json.dumps(arguments, ensure_ascii=False)
        current.arguments += arguments if isinstance(arguments, str) else ""

    def reply(self) -> ModelReply:
        self._pass_on(self._think.flush())
        calls = [ToolCall(id=c.id or f"call_{uuid.uuid4().hex[:24]}", name=c.name, arguments=c.arguments,
                          extra_content=c.extra_content) for c in self._calls if c.name]
        return self._built("".join(self._text), calls, self._finish_reason)

    def failed(self, error: ModelError) -> FailedAttempt:
        """The attempt, given up on: what streamed back, passing nothing more on (the held-back text stays
        unshown, and counts as output all the same)."""
        with self._lock:
            streamed = "".join(self._text + self._reasoning) + self._think.held
        streamed += "".join(call.name + call.arguments for call in self._calls)
        return FailedAttempt(error, self._model, streamed, self._usage, time.monotonic() - self._started,
                             self._first_token_s)

    def stopped(self) -> ModelReply:
        # Tool calls may be cut off mid-arguments, and the user asked to stop anyway.
        return self._built("".join(self._text), [], "stopped")

    def _built(self, content: str, calls: list[ToolCall], finish_reason: str | None) -> ModelReply:
        return ModelReply(content, calls, finish_reason, reasoning="".join(self._reasoning), usage=self._usage,
                          model=self._model, latency_s=time.monotonic() - self._started,
                          first_token_s=self._first_token_s, reasoning_details=self._details or None)
