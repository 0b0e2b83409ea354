"""An offline, deterministic stand-in model, so the server works with no API key.

It recognises "run `<cmd>`" requests and answers them with a `run_command` tool call,
summarises the tool's result, and otherwise explains that it is the demo model. It
streams like a real model (a few words per chunk) so the UI path is the same.

`EXAMPLES` are phrases that show each mechanism of the team without an API key (the UI offers them
as chips, `GET /healthz` lists them): a background command whose completion notice comes back, a
background sub-agent that reports back, a question to the user (`ask_user`), a sub-agent's question
to its master (`ask_master`, answered with `answer_sub_agent_question`); every reply is followed by
suggestions, which offer the other examples.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from typing import Any

from modules.notice_fence import unfenced
from modules.statuses import CommandStatus

from .types import FailedAttempt, ModelReply, ToolCall, ignore_attempt, ignore_text, never_stop

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

EXAMPLE_BACKGROUND_COMMAND = "run `sleep 3; echo background work done` in the background"
EXAMPLE_SUB_AGENT = "start a background sub-agent to research Lisbon"
EXAMPLE_ASK_USER = "ask me which city I prefer"
EXAMPLE_SUB_AGENT_QUESTION = "let a sub-agent ask you a question"
EXAMPLE_FOREGROUND_COMMAND = "run `ls -la`"
EXAMPLES = (EXAMPLE_BACKGROUND_COMMAND, EXAMPLE_SUB_AGENT, EXAMPLE_ASK_USER, EXAMPLE_SUB_AGENT_QUESTION,
            EXAMPLE_FOREGROUND_COMMAND)

# What the master's demo hands its sub-agents, and how the sub-agent's demo recognises each kind of task.
_RESEARCH_TASK = "Research Lisbon's top sights and report back."
_ASKING_TASK = "Ask your master which city to research, then report back."
_CITIES = ["Lisbon", "Porto"]
_QUESTION = re.compile(r"^\[Question (\S+) from ([^\]]+)\]")
_SUB_AGENT_NOTICE = re.compile(r"^\[Sub-agent (\S+) ([a-z]+) in [^\]]*\]")
_COMMAND_NOTICE = re.compile(r"^\[Background command \S+ ([a-z]+)[^\]]*\] `([^`]*)`")


class DemoChatModel:
    """A ChatModel that needs no network; labelled "demo" everywhere it is shown."""

    label = "demo"

    def __init__(self, *, chunk_delay_s: float = 0.02) -> None:
        self._chunk_delay_s = chunk_delay_s

    def stream_chat(
        self,
        *,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None = None,
        model: str | None = None,  # the demo has one voice whatever model is named
        on_text: Callable[[str], None] = ignore_text,
        should_stop: Callable[[], bool] = never_stop,
        on_reasoning: Callable[[str], None] = ignore_text,  # the demo does not think aloud
        on_failed_attempt: Callable[[FailedAttempt], None] = ignore_attempt,  # the demo never fails an attempt
    ) -> ModelReply:
        history = [m for m in messages if isinstance(m, dict)] if isinstance(messages, list) else []
        text, calls = _answer(history, _tool_names(tools))
        sent: list[str] = []
        words = _WORD.findall(text)
        chunks = ["".join(words[i : i + _WORDS_PER_CHUNK]) for i in range(0, len(words), _WORDS_PER_CHUNK)]
        for i, chunk in enumerate(chunks):
            if i and self._chunk_delay_s > 0:
                time.sleep(self._chunk_delay_s)
            if should_stop():
                return ModelReply("".join(sent), [], "stopped", model=self.label)
            sent.append(chunk)
            on_text(chunk)
        return ModelReply(text, calls, "tool_calls" if calls else "stop", model=self.label)


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
        return json.dumps({"agent": _intent(system, last_user)})
    if "You are RoutingAgent" in system:
        query = last_user.rpartition("Latest message:")[2].strip() or last_user
        return json.dumps({"query": query, "agent": _intent(system, query)}, ensure_ascii=False)
    if system.startswith("You condense the earlier part of a conversation"):  # modules/context/compaction.py
        return _demo_summary(last_user)
    if "You suggest what the user may want to say next" in system:
        said = last_user.partition("User said:")[2].partition("\n\nAssistant replied:")[0].strip()
        return json.dumps({"questions": [e for e in EXAMPLES if e != said][:3]}, ensure_ascii=False)
    return None


def _demo_summary(request: str) -> str:
    """A context summary as a model told to keep the user's words would write it: the previous summary's
    lines and every line the user wrote in the span, verbatim."""
    previous, _, piece = request.partition("Messages to add:")
    kept = [line for line in previous.removeprefix("Previous summary:").strip().splitlines() if line.strip()]
    kept += [line for line in piece.splitlines() if line.startswith("user: ")]
    return "\n".join(kept) or "Nothing the user said needs keeping."


def _intent(system: str, message: str) -> str:
    lowered = message.lower()
    if any(example in message for example in EXAMPLES):
        return "MasterAgent"
    for name, words in _INTENT_KEYWORDS:
        if f"{name}:" in system and any(w in lowered for w in words):
            return name
    return "MasterAgent"


def _answer(history: list[dict[str, Any]], tools: set[str]) -> tuple[str, list[ToolCall]]:
    last = history[-1] if history else {}
    system = _text(history[0].get("content")) if history and history[0].get("role") == "system" else ""
    stage = _stage_answer(system, _text(last.get("content")) if last.get("role") == "user" else "")
    if stage is not None:
        return stage, []
    if last.get("role") == "tool":
        return _summarise_tool_result(history, last), []
    if (reported := _wave_report(history)) is not None:
        return reported, []
    said = _text(last.get("content")) if last.get("role") == "user" else ""
    scripted = _mechanism(said, system, tools, len(history))
    if scripted is not None:
        return scripted
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
        f"Hello! {_DEMO_NOTE} {heard} Try one of these to see the team at work: "
        + "; ".join(f'"{e}"' for e in EXAMPLES),
        [],
    )


def _call(n: int, name: str, arguments: dict[str, Any]) -> list[ToolCall]:
    return [ToolCall(f"call_demo_{n}", name, json.dumps(arguments, ensure_ascii=False))]


def _mechanism(said: str, system: str, tools: set[str], n: int) -> tuple[str, list[ToolCall]] | None:
    """The example phrases, the notices and questions they lead to, and a sub-agent's demo tasks."""
    said = said.partition("\n\n[Understood as:")[0].strip()
    lowered = said.lower()
    if match := _QUESTION.match(said):
        if "answer_sub_agent_question" in tools:
            return (f"{match.group(2)} asks me a question; I answer: {_CITIES[0]}.",
                    _call(n, "answer_sub_agent_question", {"question_id": match.group(1), "answer": _CITIES[0]}))
        return f"I was asked a question ({match.group(1)}), but I have no tool to answer it.", []
    if said == _RESEARCH_TASK and "run_command" in tools:
        return ("Researching Lisbon (this takes a moment)...",
                _call(n, "run_command", {"command": "sleep 2; echo 'Belem Tower, Alfama, Jeronimos Monastery'"}))
    if said == _ASKING_TASK and "ask_master" in tools:
        return "I need a decision from my master first.", _call(
            n, "ask_master", {"question": f"Which city should I research: {' or '.join(_CITIES)}?"})
    if "create_sub_agent" in tools and "sub-agent" in lowered:
        task = _ASKING_TASK if "ask" in lowered else _RESEARCH_TASK
        return ("I am starting a sub-agent in the background; it reports back when it is done.",
                _call(n, "create_sub_agent", {"role": "InfoAgent", "task": task, "run_in_background": True}))
    if "ask_user" in tools and lowered.startswith("ask me"):
        return "I need your choice first.", _call(
            n, "ask_user", {"question": "Which city do you prefer?", "options": _CITIES})
    command = _requested_command(said)
    if command and "run_command" in tools and "background" in lowered:
        command = command if "`" in said else command.rsplit(" in the background", 1)[0]
        return (f"Starting `{command}` in the background; I will tell you when it ends.",
                _call(n, "run_command", {"command": command, "run_in_background": True}))
    return None


def _notice_report(said: str) -> str | None:
    """What the master says of one completion notice; None if `said` is no notice."""
    said = unfenced(said)
    if match := _SUB_AGENT_NOTICE.match(said):
        report = said.partition("Result:\n")[2].strip() or "(no report)"
        return f"{match.group(1)} reported back ({match.group(2)}):\n\n{report}"
    if match := _COMMAND_NOTICE.match(said):
        output = said.partition("Output (tail):\n")[2].strip()
        tail = f"\n\n{_fenced(_clip(output))}" if output else " It printed nothing."
        return f"The background command `{match.group(2)}` has {match.group(1)}.{tail}\n"
    return None


def _wave_report(history: list[dict[str, Any]]) -> str | None:
    """A follow-up turn of the notification pool sees a wave of notices after its last reply (N-1 written to the
    history, the last one starting the turn): the demo reports each, as a model would."""
    reports = []  # of the user-role messages after the last reply, newest first
    for message in reversed(history):
        if message.get("role") != "user":
            break
        reports.append(_notice_report(_text(message.get("content"))))
    if not reports or reports[0] is None:
        return None
    return "\n\n".join(r for r in reversed(reports) if r is not None)


def _requested_command(said: str) -> str:
    """The command the user asked to run, or "" if they did not ask."""
    quoted = _BACKTICK.search(said)
    if quoted and _VERB.search(said):
        return quoted.group(1).strip()
    for pattern in _PLAIN:
        if match := pattern.match(said):
            return match.group(1).strip().rstrip("。！？").strip()
    return ""


def _summarise_tool_result(history: list[dict[str, Any]], result: dict[str, Any]) -> str:
    name, arguments = _originating_call(history, result.get("tool_call_id"))
    raw = _text(result.get("content"))
    try:
        payload = json.loads(raw)
    except ValueError:
        payload = None
    if isinstance(payload, dict) and (summary := _agent_tool_summary(name, payload)) is not None:
        return summary
    if name not in ("run_command", "") or not isinstance(payload, dict):
        label = f"`{name}`" if name else "The tool"
        return f"{label} returned:\n\n{_fenced(_clip(raw) or '(nothing)')}\n"
    command = arguments.get("command") or payload.get("command") or ""
    if payload.get("command_id") and payload.get("status") == CommandStatus.RUNNING:
        return f"`{command}` runs in the background (command {payload['command_id'][:8]}); its notice follows.\n"
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


def _agent_tool_summary(name: str, payload: dict[str, Any]) -> str | None:
    """The demo's words after the team's tools; None for a tool it has no words for."""
    if name not in _AGENT_TOOLS:
        return None
    if not payload.get("success"):
        return f"`{name}` failed: {_text(payload.get('error')) or 'no reason given'}.\n"
    if name == "create_sub_agent":
        return f"{payload.get('display_name')} is {payload.get('status')}; its report will follow as a notice.\n"
    if name == "ask_user":
        return f"You chose **{_text(payload.get('answer'))}**. Thank you!\n"
    if name == "answer_sub_agent_question":
        return "I answered; the sub-agent carries on and reports back when it is done.\n"
    if name == "ask_master":
        answer = _text(payload.get("answer"))
        return f"My master decided: {answer}. Report: {answer} is worth a visit (researched by the demo).\n"
    return None


_AGENT_TOOLS = ("create_sub_agent", "ask_user", "answer_sub_agent_question", "ask_master")


def _originating_call(history: list[dict[str, Any]], call_id: Any) -> tuple[str, dict[str, Any]]:
    """Name and parsed arguments of the assistant tool call a tool result answers."""
    for message in reversed(history):
        calls = message.get("tool_calls") if message.get("role") == "assistant" else None
        for call in calls if isinstance(calls, list) else []:
            if isinstance(call, dict) and call.get("id") == call_id:
                function = call.get("function")
                if not isinstance(function, dict):
                    function = {}
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
