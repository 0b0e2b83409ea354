"""How much work runs now, per conversation and per user: what modules/work_caps.py compares with its caps.

Counted in the database, so every server process sees the same numbers (README, "Configuration")."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import BindParameter, ScalarSelect, and_, bindparam, exists, func, literal, select

from modules.statuses import ACTIVE_AGENT_STATES, BUSY_AGENT_STATES
from modules.storage.commands import RUNNING
from modules.storage.db import Database
from modules.storage.models import Agent, BackgroundCommand, Conversation, ForegroundCommand


@dataclass(frozen=True)
class WorkingSubAgent:
    id: str
    display_name: str
    task: str | None


@dataclass(frozen=True)
class RunningWork:
    """A conversation's background work at one moment: its sub-agents at work (oldest first) and whether one of
    its commands runs."""

    sub_agents: list[WorkingSubAgent]
    commands: bool


# One statement, asked at every turn's end (issue 26): the sub-agents at work joined to a one-row select, so that
# the commands' flag comes back when no sub-agent is at work too.
_CONVERSATION: BindParameter[str] = bindparam("conversation")
_RUNNING_WORK = select(
    exists().where(BackgroundCommand.conversation_id == _CONVERSATION, BackgroundCommand.status == RUNNING)
    .label("commands"), Agent.id, Agent.display_name, Agent.task,
).select_from(select(literal(1).label("one")).subquery().outerjoin(Agent, and_(
    Agent.conversation_id == _CONVERSATION, Agent.kind == "sub_agent", Agent.state.in_(BUSY_AGENT_STATES)),
)).order_by(Agent.created_at)


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


def running_foreground_commands(db: Database, conversation_id: str) -> tuple[int, int]:
    """(foreground commands running in the conversation, in every conversation of its user)."""
    with db.read() as s:
        here = s.scalar(select(func.count()).select_from(ForegroundCommand).where(
            ForegroundCommand.conversation_id == conversation_id)) or 0
        mine = s.scalar(select(func.count()).select_from(ForegroundCommand).join(
            Conversation, Conversation.id == ForegroundCommand.conversation_id).where(
            Conversation.user_id == _owner(conversation_id))) or 0
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


def running_work(db: Database, conversation_id: str) -> RunningWork:
    with db.read() as s:
        rows = s.execute(_RUNNING_WORK, {"conversation": conversation_id}).all()
    return RunningWork([WorkingSubAgent(row.id, row.display_name, row.task) for row in rows if row.id is not None],
                       bool(rows[0].commands))
