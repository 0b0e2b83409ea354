"""How much work runs now, per conversation and per user: what modules/work_caps.py compares with its caps.

Counted in the database, so every server process sees the same numbers (README, "Configuration")."""

from __future__ import annotations

from sqlalchemy import ScalarSelect, func, select

from modules.statuses import AgentState
from modules.storage.commands import RUNNING
from modules.storage.db import Database
from modules.storage.models import Agent, BackgroundCommand, Conversation

# A sub-agent not yet completed or terminated.
ACTIVE_AGENT_STATES = (AgentState.IDLE, AgentState.RUNNING, AgentState.WAITING)


def _owner(conversation_id: str) -> ScalarSelect[int]:
    return select(Conversation.user_id).where(Conversation.id == conversation_id).scalar_subquery()


def running_commands(db: Database, conversation_id: str) -> tuple[int, int]:
    """(running background commands of the conversation, of every conversation of its user)."""
    with db.read() as s:
        here = s.scalar(select(func.count()).select_from(BackgroundCommand).where(
            BackgroundCommand.conversation_id == conversation_id, BackgroundCommand.status == RUNNING)) or 0
        mine = s.scalar(select(func.count()).select_from(BackgroundCommand).join(
            Conversation, Conversation.id == BackgroundCommand.conversation_id).where(
            Conversation.user_id == _owner(conversation_id), BackgroundCommand.status == RUNNING)) or 0
    return here, mine


def active_sub_agents(db: Database, conversation_id: str) -> tuple[int, int]:
    """(sub-agents of the conversation neither completed nor terminated, of every conversation of its user)."""
    active = (Agent.kind == "sub_agent", Agent.terminated.is_(False), Agent.state.in_(ACTIVE_AGENT_STATES))
    with db.read() as s:
        here = s.scalar(select(func.count()).select_from(Agent).where(
            Agent.conversation_id == conversation_id, *active)) or 0
        mine = s.scalar(select(func.count()).select_from(Agent).join(
            Conversation, Conversation.id == Agent.conversation_id).where(
            Conversation.user_id == _owner(conversation_id), *active)) or 0
    return here, mine
