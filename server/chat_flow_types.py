"""Records that cross the chat flow's boundaries."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from modules.agents.profiles import AgentProfile

SUCCEEDED, FAILED, STOPPED = "succeeded", "failed", "stopped"


@dataclass
class ChatTurn:
    """One run of one agent: what the flow needs to know about it, and its stop switch."""

    task_id: str
    conversation_id: str
    agent_id: str
    display_name: str
    profile: AgentProfile
    stop_event: threading.Event = field(default_factory=threading.Event)

    def stopped(self) -> bool:
        return self.stop_event.is_set()


@dataclass(frozen=True)
class TurnOutcome:
    status: str
    error: dict[str, Any] | None = None
