"""Agent rows: lookups. State changes go through modules.multi_agent.agent_state only."""

from __future__ import annotations

from sqlalchemy import or_, select

from modules.storage.db import Database
from modules.storage.models import Agent


def list_agents(db: Database, conversation_id: str) -> list[Agent]:
    with db.read() as s:
        return list(s.scalars(
            select(Agent).where(Agent.conversation_id == conversation_id).order_by(Agent.created_at, Agent.id)
        ))


def get_agent(db: Database, agent_id: str) -> Agent | None:
    with db.read() as s:
        return s.get(Agent, agent_id)


def get_master(db: Database, conversation_id: str) -> Agent:
    with db.read() as s:
        return s.scalars(
            select(Agent).where(Agent.conversation_id == conversation_id, Agent.kind == "master")
        ).one()


def find_agent(db: Database, conversation_id: str, ref: str) -> Agent | None:
    """An agent of the conversation by id or display name."""
    with db.read() as s:
        return s.scalars(
            select(Agent).where(
                Agent.conversation_id == conversation_id,
                or_(Agent.id == ref, Agent.display_name == ref),
            )
        ).first()


def list_agents_in_states(db: Database, states: tuple[str, ...]) -> list[Agent]:
    with db.read() as s:
        return list(s.scalars(select(Agent).where(Agent.state.in_(states))))
