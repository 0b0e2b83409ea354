"""The scripted model of bench/fast_path.py: answers every request like a streaming model would.

Every request waits `ttft_s` (time to the first token) from its receipt, then streams its
answer two characters (about one token) at a time, `token_s` apart. The routing stages
answer with the whole JSON or text they need before the agent can start, the rewritten
query resolving the message against the previous request as a rewriter would; agents
answer with `reply` (the labelled reply of the turn being replayed); the suggestion call
offers `chips`.
"""

from __future__ import annotations

import json
import threading
import time

from test.scripted_llm import ScriptedLLMServer, TextStep, dynamic, is_stage_request, text

MARKS = {"You are QueryRewritingAgent": "rewrite", "You are IntentRecognitionAgent": "intent",
         "You are RoutingAgent": "route", "You suggest what the user may want to say next": "suggest"}
STAGES = ("rewrite", "intent", "route")


class Deadline(threading.Event):
    """An event that sets itself `seconds` after its creation (the request's receipt); the scripted
    server waits on it outside its lock, so concurrent requests are delayed independently."""

    def __init__(self, seconds: float):
        super().__init__()
        self._at = time.monotonic() + seconds

    def is_set(self) -> bool:
        return time.monotonic() >= self._at

    def wait(self, timeout: float | None = None) -> bool:
        remaining = self._at - time.monotonic()
        if remaining > 0:
            time.sleep(remaining if timeout is None else min(remaining, timeout))
        return self.is_set()


def _system(body: dict) -> str:
    first = next((m for m in body.get("messages", []) if isinstance(m, dict) and m.get("role") == "system"), {})
    content = first.get("content")
    return content if isinstance(content, str) else ""


def last_user(body: dict) -> str:
    users = [m for m in body.get("messages", []) if isinstance(m, dict) and m.get("role") == "user"]
    content = users[-1].get("content") if users else ""
    return content if isinstance(content, str) else ""


def self_contained(prompt: str, message: str) -> str:
    """What a rewriter makes of a message: the message with the request it refers to ("确认" ->
    "确认（帮我查一下杭州的差旅政策）"), taken from the last user line of the recent conversation."""
    history = prompt.partition("Recent conversation:")[2].rpartition("Latest message:")[0]
    users = [line.removeprefix("user:").strip() for line in history.splitlines() if line.startswith("user:")]
    return f"{message}（{users[-1].split(chr(10))[0][:60]}）" if users else message


def request_kind(body: dict) -> str:
    system = _system(body)
    return next((kind for mark, kind in MARKS.items() if mark in system), "agent")


class StreamingModel:
    def __init__(self, llm: ScriptedLLMServer, ttft_s: float = 0.0, token_s: float = 0.0):
        self.llm = llm
        self.ttft_s = ttft_s
        self.token_s = token_s
        self.agent = "MasterAgent"  # what the routing stages choose
        self.reply = "好的，已处理。"
        self.chips: list[str] = []

    def install(self) -> None:
        self.llm.set_default(dynamic(self.respond))
        self.top_up()

    def top_up(self) -> None:
        """Stage calls take only queued steps whose match names them: keep a few queued."""
        if self.llm.pending_steps() < 10:
            self.llm.script(*[dynamic(self.respond)] * 20, match=is_stage_request)

    def respond(self, body: dict) -> TextStep:
        kind, last = request_kind(body), last_user(body)
        message = last.rpartition("Latest message:")[2].strip() or last
        if kind == "rewrite":
            content = self_contained(last, message)
        elif kind == "intent":
            content = json.dumps({"agent": self.agent})
        elif kind == "route":
            content = json.dumps({"query": self_contained(last, message), "agent": self.agent}, ensure_ascii=False)
        elif kind == "suggest":
            content = json.dumps({"questions": self.chips}, ensure_ascii=False)
        else:
            content = self.reply
        wait = Deadline(self.ttft_s) if self.ttft_s > 0 else None
        chunk = 2 if self.token_s > 0 else max(1, len(content))
        return text(content, chunk_size=chunk, delay_s=self.token_s, wait=wait)
