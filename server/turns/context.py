"""What the turn package needs of the server's runtime, as a protocol: `server/runtime.py` builds the
concrete `Runtime` (and the `TurnManager` inside it), so nothing here imports it and no import circle
closes (docs/ARCHITECTURE.md, "Layers")."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from modules.agents.profiles import AgentProfile
from modules.agents.services import AgentServices
from modules.background_command_manager import BackgroundCommandManager
from modules.config import Settings
from modules.context.budget import RefusedSizes
from modules.llm import ChatModel
from modules.multi_agent.agent_state import AgentStates
from modules.multi_agent.message_router import ActiveAgentSessionStore, MessageRouter
from modules.multi_agent.user_questions import UserQuestions
from modules.peer_signals import PeerSignals
from modules.storage.db import Database
from modules.sub_agent.manager import SubAgentManager
from modules.tools.registry import ToolRegistry
from modules.tools.sandbox import Sandbox
from server.cluster import Membership
from server.sender import Transport
from server.suggestions import SuggestionService
from server.turns.event_log import EventLog


class TurnRuntime(Protocol):
    settings: Settings
    db: Database
    model: ChatModel
    tools: ToolRegistry
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
    peers: PeerSignals
    sandbox: Sandbox
    services: AgentServices
    suggestions: SuggestionService
    refused_sizes: RefusedSizes

    def workspace(self, conversation_id: str) -> Path: ...

    def profile(self, role: str) -> AgentProfile: ...
