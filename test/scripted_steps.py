"""The script of the scripted model server (test/scripted_llm.py): its steps, their builders, which requests
a step matches, and what a routing stage gets unless a test scripts it."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass

# A step never holds a model call open longer than this, so a forgotten event cannot
# wedge a test run.
MAX_WAIT_S = 30.0


@dataclass(frozen=True)
class StepUsage:
    """What the step reports as its `usage` (a last chunk with `choices: []`, sent only when the request
    asked for it with `stream_options.include_usage`, as the real API does)."""

    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int = 0
    reasoning_tokens: int = 0

    def body(self) -> dict:
        return {"prompt_tokens": self.prompt_tokens, "completion_tokens": self.completion_tokens,
                "total_tokens": self.prompt_tokens + self.completion_tokens,
                "prompt_tokens_details": {"cached_tokens": self.cached_tokens},
                "completion_tokens_details": {"reasoning_tokens": self.reasoning_tokens}}


@dataclass(frozen=True)
class TextStep:
    content: str
    chunk_size: int = 4
    delay_s: float = 0.0
    wait: threading.Event | None = None
    drop: bool = False  # cut the connection after the content, before finish_reason/[DONE]
    usage: StepUsage | None = None


@dataclass(frozen=True)
class ToolCallsStep:
    calls: tuple[tuple[str, str], ...]  # (name, raw JSON arguments)
    text: str = ""
    delay_s: float = 0.0
    wait: threading.Event | None = None
    usage: StepUsage | None = None


@dataclass(frozen=True)
class ErrorStep:
    status: int
    message: str = "scripted error"
    retry_after: float | None = None
    code: str | None = None  # the error body's `code` (e.g. "context_length_exceeded")


@dataclass(frozen=True)
class HangStep:
    seconds: float


@dataclass(frozen=True)
class RawChunksStep:
    """Stream exactly these chunks (a provider's own wire format, test/provider_replies.py): a dict is sent as
    `data: <json>` with the chunk's id, object, created and model filled in where it lacks them; a str is
    sent as it is (an SSE comment, a malformed line)."""

    chunks: tuple[dict | str, ...]
    done: bool = True  # end with `data: [DONE]`
    end_after_s: float = 0  # how long the body's end (its last, empty chunk) waits after the chunks


@dataclass(frozen=True)
class JsonBodyStep:
    """Answer 200 with this JSON body, whether the request asked for a stream or not."""

    body: dict


@dataclass(frozen=True)
class DynamicStep:
    build: Callable[[dict], TextStep | ToolCallsStep | ErrorStep | HangStep | RawChunksStep | JsonBodyStep]


Step = TextStep | ToolCallsStep | ErrorStep | HangStep | RawChunksStep | JsonBodyStep | DynamicStep
Match = Callable[[dict], bool]


def text(content: str, *, chunk_size: int = 4, delay_s: float = 0.0, wait: threading.Event | None = None,
         usage: StepUsage | None = None) -> TextStep:
    """Stream `content` in `chunk_size`-character deltas, `delay_s` apart, then finish with "stop".

    With `wait`, the server holds the call open until the event is set (at most MAX_WAIT_S); with `usage`,
    it reports those token counts.
    """
    return TextStep(content, max(1, chunk_size), delay_s, wait, usage=usage)


def broken_stream(content: str, *, chunk_size: int = 4) -> TextStep:
    """Stream `content`, then drop the connection mid-response (a network failure after partial output)."""
    return TextStep(content, max(1, chunk_size), drop=True)


def tool_calls(
    *calls: tuple[str, dict | str],
    text: str = "",
    delay_s: float = 0.0,
    wait: threading.Event | None = None,
    usage: StepUsage | None = None,
) -> ToolCallsStep:
    """Answer with tool calls; dict arguments are JSON-dumped, str arguments are sent verbatim (may be malformed).

    Ids are `call_<n>`, numbered across the server's life (see RecordedRequest.tool_call_ids);
    each call's arguments are streamed in several pieces, like the real API.
    """
    raw = tuple((name, args if isinstance(args, str) else json.dumps(args)) for name, args in calls)
    return ToolCallsStep(raw, text, delay_s, wait, usage)


def error(status: int, message: str = "scripted error", *, retry_after: float | None = None,
          code: str | None = None) -> ErrorStep:
    """Answer with an HTTP error in OpenAI's JSON shape, with a Retry-After header if given."""
    return ErrorStep(status, message, retry_after, code)


def hang(seconds: float) -> HangStep:
    """Accept the request, send nothing for `seconds`, then drop the connection."""
    return HangStep(seconds)


def dynamic(build: Callable[[dict], Step]) -> DynamicStep:
    """Build the reply from the request body when it arrives (e.g. to answer a question id it carries)."""
    return DynamicStep(build)


COMPACT_MARKER = "You condense the earlier part of a conversation"  # a context summary request
STAGE_MARKERS = ("You are QueryRewritingAgent", "You are IntentRecognitionAgent", "You are RoutingAgent",
                 "You suggest what the user may want to say next", COMPACT_MARKER)


def is_stage_request(body: dict) -> bool:
    """A pipeline-stage or suggestion call (not an agent's turn)."""
    system = next((m for m in body.get("messages", []) if isinstance(m, dict) and m.get("role") == "system"), None)
    return system is not None and any(marker in text_of(system) for marker in STAGE_MARKERS)


def stage_default(body: dict) -> TextStep:
    """What a stage gets unless a test scripts it: the rewrite echoes the message, intent picks the
    master, suggestions are empty. Tests that care script stages with an explicit `match`."""
    system = text_of(next(m for m in body["messages"] if m.get("role") == "system"))
    users = [m for m in body.get("messages", []) if m.get("role") == "user"]
    last = text_of(users[-1]) if users else ""
    if "QueryRewritingAgent" in system:
        return text(last.rpartition("Latest message:")[2].strip() or last)
    if "IntentRecognitionAgent" in system:
        return text('{"agent": "MasterAgent"}')
    if "RoutingAgent" in system:
        query = last.rpartition("Latest message:")[2].strip() or last
        return text(json.dumps({"query": query, "agent": "MasterAgent"}, ensure_ascii=False))
    if COMPACT_MARKER in system:
        return text(keep_user_lines(last))
    return text('{"questions": []}')


def keep_user_lines(request: str, *, first: int = 8, latest: int = 8) -> str:
    """A summary as a model told to keep the user's instructions writes one, deterministically: the lines of
    the previous summary and the user's lines of the new messages (each cut to 160 characters), the first
    `first` and the latest `latest` of them."""
    lines = [line[:160] for line in request.splitlines()
             if line.startswith(("user: ", "- user: "))]
    kept = lines if len(lines) <= first + latest else lines[:first] + lines[-latest:]
    return "\n".join(line if line.startswith("- ") else f"- {line}" for line in kept) or "- (nothing to keep)"


def match_compaction(body: dict) -> bool:
    """A context summary request (server/turns/context_window.py)."""
    return match_system(COMPACT_MARKER)(body)


def text_of(message: dict) -> str:
    content = message.get("content")
    if isinstance(content, list):  # content parts
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return content if isinstance(content, str) else ""


def match_system(substr: str) -> Match:
    """True when the request's first system message contains `substr`."""

    def match(body: dict) -> bool:
        system = next((m for m in body.get("messages", []) if m.get("role") == "system"), None)
        return system is not None and substr in text_of(system)

    return match


def match_last_user(substr: str) -> Match:
    """True when the request's last user message contains `substr`."""

    def match(body: dict) -> bool:
        users = [m for m in body.get("messages", []) if m.get("role") == "user"]
        return bool(users) and substr in text_of(users[-1])

    return match


def match_model(name: str) -> Match:
    """True when the request asks for model `name`."""
    return lambda body: body.get("model") == name
