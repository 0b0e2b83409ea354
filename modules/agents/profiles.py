"""Agent profiles: who an agent is, what it may use, which model it calls."""

from __future__ import annotations

from dataclasses import dataclass

MASTER_KIND, SUB_AGENT_KIND = "master", "sub_agent"


@dataclass(frozen=True)
class AgentProfile:
    name: str
    description: str
    system_prompt: str
    tools: tuple[str, ...]
    kind: str = SUB_AGENT_KIND
    model: str | None = None

    def system_message(self, display_name: str) -> str:
        """Every agent's system prompt names its display name (API.md, model-facing contract)."""
        return f"You are {display_name} ({self.name}). {self.system_prompt}"


DEFAULT_MASTER = AgentProfile(
    name="MasterAgent",
    description="The team leader: answers the user directly or coordinates the team.",
    system_prompt=(
        "You lead a team of agents on behalf of the user. Answer directly when you can. "
        "Use run_command to inspect or change files in the conversation's workspace. "
        "Never claim that work is done before you have seen its result."
    ),
    tools=("run_command",),
    kind=MASTER_KIND,
)
