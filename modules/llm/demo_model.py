"""An offline, deterministic stand-in model, so the server works with no API key.

It recognises "run `<cmd>`" requests and answers them with a `run_command` tool call,
summarises the tool's result, and otherwise explains that it is the demo model. It
streams like a real model (a few words per chunk) so the UI path is the same.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from typing import Any

from .types import ModelReply, ToolCall, ignore_text, never_stop

_MAX_OUTPUT_CHARS = 1500  # keep the streamed summary short whatever the command printed
_MAX_QUOTE_CHARS = 200
_DEMO_NOTE = "I am the offline demo model (no OPENAI_API_KEY is set), so my answers are canned."

_BACKTICK = re.compile(r"`([^`\n]+)`")
_VERB = re.compile(r"\b(?:run|running|execute|executing|exec)\b|运行|执行|跑", re.IGNORECASE)
_PLAIN = (
    re.compile(r"^\s*(?:please\s+)?(?:run|execute)\s*:?\s+(.+)$", re.IGNORECASE | re.DOTALL),
    re.compile(r"^\s*请?(?:帮我)?(?:运行|执行|跑一下|跑)\s*[:：]?\s*(.+)$", re.DOTALL),
)
_WORD = re.compile(r"\S{1,12}\s*|\s+")  # a "word" (long runs, e.g. Chinese, split) and its trailing space
_WORDS_PER_CHUNK = 3


class DemoChatModel:
    """A ChatModel that needs no network; labelled "demo" everywhere it is shown."""

    label = "demo"

    def __init__(self, *, chunk_delay_s: float = 0.02) -> None:
        self._chunk_delay_s = chunk_delay_s

    def stream_chat(
        self,
        *,
        messages: list[dict],
        tools: list[dict] | None = None,
        model: str | None = None,  # the demo has one voice whatever model is named
        on_text: Callable[[str], None] = ignore_text,
        should_stop: Callable[[], bool] = never_stop,
    ) -> ModelReply:
        history = [m for m in messages if isinstance(m, dict)] if isinstance(messages, list) else []
        text, calls = _answer(history, _tool_names(tools))
        sent = []
        words = _WORD.findall(text)
        chunks = ["".join(words[i : i + _WORDS_PER_CHUNK]) for i in range(0, len(words), _WORDS_PER_CHUNK)]
        for i, chunk in enumerate(chunks):
            if i and self._chunk_delay_s > 0:
                time.sleep(self._chunk_delay_s)
            if should_stop():
                return ModelReply("".join(sent), [], "stopped")
            sent.append(chunk)
            on_text(chunk)
        return ModelReply(text, calls, "tool_calls" if calls else "stop")


_INTENT_KEYWORDS = (
    ("InfoAgent", ("policy", "policies", "政策", "规定", "查一下", "look up")),
    ("BookingAgent", ("book", "booking", "reserve", "预订", "预定", "订票", "订酒店")),
    ("CoderAgent", ("code", "script", "bug", "代码", "脚本")),
)


def _stage_answer(system: str, last_user: str) -> str | None:
    """The pipeline stages' fixed answer shapes (API.md), so the demo runs the whole pipeline."""
    if "You are QueryRewritingAgent" in system:
        return last_user.rpartition("Latest message:")[2].strip() or last_user
    if "You are IntentRecognitionAgent" in system:
        lowered = last_user.lower()
        for name, words in _INTENT_KEYWORDS:
            if f"- {name}:" in system and any(w in lowered for w in words):
                return json.dumps({"agent": name})
        return json.dumps({"agent": "MasterAgent"})
    if "You suggest what the user may want to say next" in system:
        return json.dumps({"questions": ["继续", "ok", "run `ls -la`"]}, ensure_ascii=False)
    return None


def _answer(history: list[dict], tools: set[str]) -> tuple[str, list[ToolCall]]:
    last = history[-1] if history else {}
    system = _text(history[0].get("content")) if history and history[0].get("role") == "system" else ""
    stage = _stage_answer(system, _text(last.get("content")) if last.get("role") == "user" else "")
    if stage is not None:
        return stage, []
    if last.get("role") == "tool":
        return _summarise_tool_result(history, last), []
    said = _text(last.get("content")) if last.get("role") == "user" else ""
    command = _requested_command(said)
    if command and "run_command" in tools:
        arguments = json.dumps({"command": command}, ensure_ascii=False)
        return f"Running `{command}`...", [ToolCall(f"call_demo_{len(history)}", "run_command", arguments)]
    if command:
        refusal = f"I would run `{command}`, but the `run_command` tool is not available to me here. "
        return refusal + _DEMO_NOTE, []
    quote = " ".join(said.split())[:_MAX_QUOTE_CHARS]
    heard = f'You said: "{quote}".' if quote else "I could not find a message to answer."
    return (
        f"Hello! {_DEMO_NOTE} {heard} Try asking me to run a command, for example: run `ls -la`",
        [],
    )


def _requested_command(said: str) -> str:
    """The command the user asked to run, or "" if they did not ask."""
    quoted = _BACKTICK.search(said)
    if quoted and _VERB.search(said):
        return quoted.group(1).strip()
    for pattern in _PLAIN:
        if match := pattern.match(said):
            return match.group(1).strip().rstrip("。！？").strip()
    return ""


def _summarise_tool_result(history: list[dict], result: dict) -> str:
    name, arguments = _originating_call(history, result.get("tool_call_id"))
    raw = _text(result.get("content"))
    try:
        payload = json.loads(raw)
    except ValueError:
        payload = None
    if name not in ("run_command", "") or not isinstance(payload, dict):
        label = f"`{name}`" if name else "The tool"
        return f"{label} returned:\n\n{_fenced(_clip(raw) or '(nothing)')}\n"
    command = arguments.get("command") or payload.get("command") or ""
    title = f"Ran `{command}`" if command else "The command ran"
    if "exit_code" in payload:
        status = f"exit code **{payload['exit_code']}**"
    else:
        status = f"status: {payload.get('status') or ('ok' if payload.get('success') else 'failed')}"
    lines = [f"{title} ({status})."]
    if payload.get("error"):
        lines.append(f"Error: {_text(payload['error'])}")
    output = _text(payload.get("output"))
    lines.append(_fenced(_clip(output) or "(no output)"))
    return "\n\n".join(lines) + "\n"


def _originating_call(history: list[dict], call_id: Any) -> tuple[str, dict]:
    """Name and parsed arguments of the assistant tool call a tool result answers."""
    for message in reversed(history):
        calls = message.get("tool_calls") if message.get("role") == "assistant" else None
        for call in calls if isinstance(calls, list) else []:
            if isinstance(call, dict) and call.get("id") == call_id:
                function = call.get("function") if isinstance(call.get("function"), dict) else {}
                try:
                    arguments = json.loads(function.get("arguments") or "{}")
                except (TypeError, ValueError):
                    arguments = {}
                return str(function.get("name") or ""), arguments if isinstance(arguments, dict) else {}
    return "", {}


def _tool_names(tools: Any) -> set[str]:
    if not isinstance(tools, list):
        return set()
    functions = (t.get("function") for t in tools if isinstance(t, dict))
    return {f["name"] for f in functions if isinstance(f, dict) and isinstance(f.get("name"), str)}


def _text(content: Any) -> str:
    """Message content as plain text, whatever shape it came in."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts
        return "".join(_text(p.get("text")) if isinstance(p, dict) else _text(p) for p in content)
    try:
        return json.dumps(content, ensure_ascii=False)
    except (TypeError, ValueError):
        return str(content)


def _clip(text: str) -> str:
    text = text.rstrip()
    if len(text) <= _MAX_OUTPUT_CHARS:
        return text
    return f"{text[:_MAX_OUTPUT_CHARS]}\n... ({len(text) - _MAX_OUTPUT_CHARS} more characters)"


def _fenced(text: str) -> str:
    """A Markdown code block whose fence outlasts any backtick run in `text`."""
    fence = "`" * max([3, *(len(run) + 1 for run in re.findall(r"`+", text))])
    return f"{fence}\n{text}\n{fence}"
