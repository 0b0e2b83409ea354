"""What agent tools may use, handed to them through their ToolContext."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from modules.agents.profiles import AgentProfile
from modules.config import Settings
from modules.multi_agent.agent_state import AgentStates
from modules.multi_agent.message_router import MessageRouter
from modules.multi_agent.user_questions import UserQuestions
from modules.storage.db import Database

if TYPE_CHECKING:
    from modules.background_command_manager import BackgroundCommandManager
    from modules.foreground_commands import ForegroundCommands
    from modules.sub_agent.manager import SubAgentManager, TurnResult


class TurnWaiter(Protocol):
    """Waits for the next turn of one agent to end (a blocking create_sub_agent)."""

    def wait(self, timeout_s: float, should_stop: Callable[[], bool]) -> TurnResult | None: ...

    def cancel(self) -> None: ...


@dataclass
class AgentServices:
    db: Database
    settings: Settings
    router: MessageRouter
    states: AgentStates
    sub_agents: SubAgentManager
    commands: BackgroundCommandManager
    foreground: ForegroundCommands
    profiles: dict[str, AgentProfile]
    user_questions: UserQuestions
    expect_turn: Callable[[str], TurnWaiter]
    terminate_agent: Callable[[str], None]
