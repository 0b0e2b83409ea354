"""The composition root: the services one server process runs with, built once by the app factory."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from modules.agents.profiles import AgentProfile, master_profile
from modules.agents.services import AgentServices
from modules.background_command_manager import BackgroundCommandManager
from modules.config import Settings
from modules.llm import ChatModel
from modules.multi_agent.agent_state import AgentStates
from modules.multi_agent.fast_path import ActiveAgentSessionStore, RoutingSignals
from modules.multi_agent.message_router import MessageRouter
from modules.multi_agent.user_questions import UserQuestions
from modules.peer_signals import PeerSignals
from modules.storage.db import Database
from modules.sub_agent.manager import SubAgentManager
from modules.tools.registry import ToolRegistry
from modules.tools.sandbox import Sandbox
from server.cluster import Membership
from server.sender import Transport
from server.tasks.event_log import EventLog

if TYPE_CHECKING:
    from server.suggestions import SuggestionService
    from server.tasks.models import TaskManager


@dataclass
class Runtime:
    settings: Settings
    db: Database
    model: ChatModel
    tools: ToolRegistry
    profiles: dict[str, AgentProfile]
    agent_states: AgentStates
    router: MessageRouter
    sub_agents: SubAgentManager
    commands: BackgroundCommandManager
    membership: Membership
    event_log: EventLog
    transport: Transport
    spawn: Callable[..., Any]
    active_agents: ActiveAgentSessionStore
    user_questions: UserQuestions
    signals: RoutingSignals
    peers: PeerSignals
    sandbox: Sandbox
    tasks: TaskManager | None = None
    services: AgentServices | None = None
    suggestions: SuggestionService | None = None

    @property
    def master(self) -> AgentProfile:
        return master_profile(self.profiles)

    def workspace(self, conversation_id: str) -> Path:
        path = self.settings.workspaces_dir / conversation_id
        path.mkdir(parents=True, exist_ok=True)
        return path

    def profile(self, role: str) -> AgentProfile:
        return self.profiles.get(role) or self.master
