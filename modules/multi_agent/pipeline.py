"""The two model stages in front of the agents: query rewriting and intent recognition.

Each stage answers in a fixed shape (API.md): rewriting with plain text,
intent recognition with `{"agent": "<profile name>"}`. A malformed answer or a
failed call falls back instead of failing the user's message: rewriting to the
original text, intent to the master.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable

from modules.agents.profiles import SUB_AGENT_KIND, AgentProfile
from modules.llm import ChatModel, ModelError

log = logging.getLogger(__name__)

REWRITER = "QueryRewritingAgent"
INTENT = "IntentRecognitionAgent"
HISTORY_TURNS = 6
HISTORY_CHARS = 600

_JSON_OBJECT = re.compile(r"\{.*\}", re.DOTALL)


def _ask(model: ChatModel, model_name: str | None, system: str, user: str) -> str | None:
    try:
        reply = model.stream_chat(messages=[{"role": "system", "content": system},
                                            {"role": "user", "content": user}], tools=None, model=model_name)
    except ModelError as exc:
        log.warning("pipeline stage failed, falling back: %s", exc)
        return None
    return reply.content.strip()


def rewrite_query(model: ChatModel, model_name: str | None, history: list[tuple[str, str]], message: str,
                  before_reasoning: Callable[[str], None]) -> str:
    """A self-contained query for the latest message, references resolved from recent history."""
    before_reasoning(REWRITER)
    recent = "\n".join(f"{role}: {text[:HISTORY_CHARS]}" for role, text in history[-HISTORY_TURNS:]) or "(none)"
    system = (f"You are {REWRITER}. Rewrite the user's latest message into one self-contained query, "
              "resolving references (that, there, 那, 这个) from the recent conversation. Keep its language. "
              "Answer with the rewritten query only, as plain text.")
    answer = _ask(model, model_name, system, f"Recent conversation:\n{recent}\n\nLatest message: {message}")
    if not answer or len(answer) > 4 * len(message) + 400:
        return message
    return answer


def recognize_intent(model: ChatModel, model_name: str | None, profiles: dict[str, AgentProfile], query: str,
                     master_name: str, before_reasoning: Callable[[str], None]) -> str:
    """The profile name of the agent that should handle the query; the master when unsure."""
    before_reasoning(INTENT)
    listing = "\n".join(f"- {p.name}: {p.description}" for p in profiles.values())
    system = (f"You are {INTENT}. Choose the one agent that should handle the user's query.\nAgents:\n{listing}\n"
              f'Answer with JSON only: {{"agent": "<name>"}}. Choose {master_name} when no specialist fits.')
    answer = _ask(model, model_name, system, query)
    name = parse_intent(answer or "")
    if name in profiles and (name == master_name or profiles[name].kind == SUB_AGENT_KIND):
        return name
    if answer is not None:
        log.info("intent answer %r is not an agent; falling back to %s", (answer or "")[:100], master_name)
    return master_name


def parse_intent(answer: str) -> str | None:
    match = _JSON_OBJECT.search(answer)
    if not match:
        return None
    try:
        data = json.loads(match.group(0))
    except json.JSONDecodeError:
        return None
    agent = data.get("agent") if isinstance(data, dict) else None
    return agent.strip() if isinstance(agent, str) else None
