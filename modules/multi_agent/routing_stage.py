"""One model request in front of the agents: the rewrite and the intent of a message in a single answer.

Where the fast path's rules cannot decide, the seed's two sequential stages (query
rewriting, then intent recognition) cost two round trips before the agent starts.
This stage asks both at once and names the agent the user is talking with, so a
follow-up the rules missed still lands there. It answers JSON
`{"query": "...", "agent": "<profile name>"}` (API.md); a malformed or failed
answer falls back like the separate stages: the original text, the master.
`ROUTING_STAGES=separate` keeps the two stages (pipeline.py).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass

from modules.agents.profiles import SUB_AGENT_KIND, AgentProfile
from modules.llm import ChatModel
from modules.multi_agent.pipeline import _JSON_OBJECT, HISTORY_CHARS, HISTORY_TURNS, _ask

ROUTER = "RoutingAgent"


@dataclass(frozen=True)
class CombinedRoute:
    query: str  # the message rewritten to stand alone (the message itself when the answer had none)
    agent: str  # a profile name: the master or a sub-agent role


def route_in_one_request(model: ChatModel, model_name: str | None, profiles: dict[str, AgentProfile],
                         history: list[tuple[str, str]], message: str, active: str | None, master_name: str,
                         before_reasoning: Callable[[str], None]) -> CombinedRoute:
    """The rewritten query and the agent for it, from one request; `active` names who the user talks with."""
    before_reasoning(ROUTER)
    recent = "\n".join(f"{role}: {text[:HISTORY_CHARS]}" for role, text in history[-HISTORY_TURNS:]) or "(none)"
    listing = "\n".join(f"- {p.name}: {p.description}" for p in profiles.values())
    talking = (f"The user is talking with {active} right now; choose it when the message goes on with what "
               "it was doing.\n" if active else "")
    system = (f"You are {ROUTER}. Do two things in one answer. First rewrite the user's latest message into one "
              "self-contained query, resolving references (that, there, 那, 这个) from the recent conversation, "
              f"in its language. Then choose the one agent that should handle it.\nAgents:\n{listing}\n{talking}"
              f'Answer with JSON only: {{"query": "<rewritten query>", "agent": "<name>"}}. '
              f"Choose {master_name} when no specialist fits.")
    answer = _ask(model, model_name, system, f"Recent conversation:\n{recent}\n\nLatest message: {message}")
    return parse_combined(answer or "", message, profiles, master_name)


def parse_combined(answer: str, message: str, profiles: dict[str, AgentProfile], master_name: str) -> CombinedRoute:
    data = None
    match = _JSON_OBJECT.search(answer)
    if match:
        try:
            data = json.loads(match.group(0))
        except json.JSONDecodeError:
            data = None
    data = data if isinstance(data, dict) else {}
    query, agent = data.get("query"), data.get("agent")
    if not isinstance(query, str) or not query.strip() or len(query) > 4 * len(message) + 400:
        query = message
    agent = agent.strip() if isinstance(agent, str) else ""
    if not (agent in profiles and (agent == master_name or profiles[agent].kind == SUB_AGENT_KIND)):
        agent = master_name
    return CombinedRoute(query.strip(), agent)
