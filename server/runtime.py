"""The composition root: the services one server process runs with, built once by the app factory."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from modules.agents.profiles import DEFAULT_MASTER, AgentProfile
from modules.config import Settings
from modules.llm import ChatModel
from modules.multi_agent.agent_state import AgentStates
from modules.storage.db import Database
from modules.tools.registry import ToolRegistry
from server.sender import Transport
from server.tasks.event_log import EventLog

if TYPE_CHECKING:
    from server.tasks.models import TaskManager


@dataclass
class Runtime:
    settings: Settings
    db: Database
    model: ChatModel
    tools: ToolRegistry
    agent_states: AgentStates
    event_log: EventLog
    transport: Transport
    spawn: Callable[..., Any]
    profiles: dict[str, AgentProfile] = field(default_factory=lambda: {DEFAULT_MASTER.name: DEFAULT_MASTER})
    tasks: TaskManager | None = None

    def workspace(self, conversation_id: str) -> Path:
        path = self.settings.workspaces_dir / conversation_id
        path.mkdir(parents=True, exist_ok=True)
        return path

    def profile(self, role: str) -> AgentProfile:
        return self.profiles.get(role) or self.profiles[DEFAULT_MASTER.name]
