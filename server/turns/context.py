"""What the turn package needs of the server's runtime, as a protocol: `server/runtime.py` builds the
concrete `Runtime` (and the `TurnManager` inside it), so nothing here imports it and no import circle
closes (docs/ARCHITECTURE.md, "Layers")."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from modules.agents.profiles import AgentProfile
from modules.agents.services import AgentServices
from modules.background_command_manager import BackgroundCommandManager
from modules.config import Settings
from modules.context.budget import RefusedSizes
from modules.multi_agent.active_agent import ActiveAgentSessionStore
from modules.multi_agent.agent_state import AgentStates
from modules.multi_agent.message_router import MessageRouter
from modules.multi_agent.user_questions import UserQuestions
from modules.peer_signals import PeerSignals
from modules.storage.db import Database
from modules.sub_agent.manager import SubAgentManager
from modules.tools.registry import ToolRegistry
from modules.tools.sandbox import Sandbox
from modules.tracing import Tracing
from modules.usage.budgets import Budgets
from modules.usage.ledger import UsageLedger
from modules.usage.metered_model import MeteredChatModel
from server.cluster import Membership
from server.metrics import Metrics
from server.sender import EventSender, Transport
from server.suggestions import SuggestionService
from server.turns.event_log import EventLog
from server.turns.types import Collect, StartTurn, Turn, TurnOutcome


class TurnRuntime(Protocol):
    settings: Settings
    db: Database
    model: MeteredChatModel  # bind a CallContext for each request (modules/usage/metered_model.py)
    ledger: UsageLedger
    budgets: Budgets
    metrics: Metrics
    tracing: Tracing
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


@dataclass(frozen=True)
class TurnLoop:
    """The loop files' entry points (server/chat_flow_task_main.py), handed to the `TurnManager` by the
    runtime so that the package never imports the loop that imports it: `run` runs one turn, `poll` is the
    one place a turn starts from the agent's queue (`poll_completion_notifications`), `collect` what a turn
    takes from it (`collect_queue`: the poller's, and the claim in a released message's transaction)."""

    run: Callable[[TurnRuntime, Turn, EventSender], TurnOutcome]
    poll: Callable[[TurnRuntime, str, StartTurn, bool], str | None]
    collect: Callable[[TurnRuntime, str], Collect]
