"""A scripted model with a context window: it refuses a request longer than its window as a provider does
(with one of the providers' wordings), answers agents' turns with `reply`, answers context summary requests
as a model told to keep the user's instructions would, and records what it saw (test/scripted_llm.py)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from modules.llm.tokens import count_messages, count_tools
from test.scripted_llm import ScriptedLLMServer
from test.scripted_steps import COMPACT_MARKER, Step, dynamic, error, match_compaction, text, text_of

# What providers answer to a request longer than the window: (status, message[, error code]).
OVERFLOW_ANSWERS = {
    "openai": (400, "This model's maximum context length is 4096 tokens. However, your messages resulted in "
                    "5000 tokens. Please reduce the length of the messages.", "context_length_exceeded"),
    "deepseek": (400, "This model's maximum context length is 65536 tokens. However, you requested 70000 "
                      "tokens (70000 in the messages, 0 in the completion)."),
    "anthropic_proxy": (400, "prompt is too long: 210000 tokens > 200000 maximum"),
    "gemini": (400, "The input token count (1200000) exceeds the maximum number of tokens allowed "
                    "(1048576). input tokens exceed the limit"),
    "vllm": (400, "'max_tokens' is too large: 4096. This model's maximum context length is 8192 tokens and "
                  "your request has 6000 input tokens"),
    "gateway_413": (413, "Request Entity Too Large"),
}


def request_size(body: dict) -> int:
    """The request's size by the server's own estimate (modules/llm/tokens.py)."""
    return count_messages(body.get("messages") or []) + count_tools(body.get("tools"))


def is_compaction(body: dict) -> bool:
    system = next((m for m in body.get("messages", []) if m.get("role") == "system"), {})
    return COMPACT_MARKER in text_of(system)


def everything_seen(body: dict) -> str:
    return "\n".join(text_of(m) for m in body.get("messages", []))


def keep_marked_lines(request: str, marker: str) -> str:
    """The summary a model told to keep every instruction writes: each line holding `marker` (the user's
    instructions), once, and a line on the latest messages."""
    kept: list[str] = []
    for line in request.splitlines():
        if marker in line:
            line = line.split(marker, 1)[1]
            if line not in kept:
                kept.append(line)
    return "\n".join(f"- the user said: {marker}{line}" for line in kept) + "\n- later: small talk, answered."


@dataclass
class WindowedModel:
    window: int  # tokens, by the server's own estimate
    reply: Callable[[dict], Step]
    overflow: str = "openai"
    marker: str = "INSTRUCTION"
    lock: threading.Lock = field(default_factory=threading.Lock)
    refused: list[int] = field(default_factory=list)  # sizes of the requests refused as too long
    sizes: list[int] = field(default_factory=list)  # sizes of the agents' requests answered
    summaries: int = 0  # summary requests answered

    def serve(self, llm: ScriptedLLMServer, summaries: int = 400) -> WindowedModel:
        """Answer every agent's turn, and up to `summaries` summary requests, on `llm`."""
        llm.set_default(dynamic(self))
        llm.script(*[dynamic(self)] * summaries, match=match_compaction)
        return self

    def __call__(self, body: dict) -> Step:
        size = request_size(body)
        if size > self.window:
            with self.lock:
                self.refused.append(size)
            status, message, *code = OVERFLOW_ANSWERS[self.overflow]
            return error(status, message, code=code[0] if code else None)
        if is_compaction(body):
            with self.lock:
                self.summaries += 1
            return text(keep_marked_lines(everything_seen(body), self.marker), chunk_size=200)
        with self.lock:
            self.sizes.append(size)
        return self.reply(body)
