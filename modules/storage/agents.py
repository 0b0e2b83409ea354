"""Agent rows: every query of them. State changes are decided by modules.multi_agent.agent_state only."""

from __future__ import annotations

from typing import cast

from sqlalchemy import Row, Table, bindparam, func, or_, select, update
from sqlalchemy.orm import Session

from modules.storage.db import Database
from modules.storage.models import Agent
from modules.storage.records import now
from modules.storage.results import rowcount

# The statements every turn runs, built once: building one costs more CPU than running it on SQLite
# (about 150 µs against 100), and every stream pays each of them (docs/ARCHITECTURE.md, "Statements built once").
_OF_CONVERSATION = select(Agent).where(Agent.conversation_id == bindparam("conversation"))
_ALL_OF_CONVERSATION = _OF_CONVERSATION.order_by(Agent.created_at, Agent.id)
_MASTER = _OF_CONVERSATION.where(Agent.kind == "master")
_OF_KIND = _OF_CONVERSATION.where(Agent.kind == bindparam("kind")).order_by(Agent.created_at)
_LOCK_FOR_TURN = select(Agent).where(Agent.id == bindparam("agent")).with_for_update(key_share=True) \
    .execution_options(populate_existing=True)


def list_agents(db: Database, conversation_id: str) -> list[Agent]:
    with db.read() as s:
        return list(s.scalars(_ALL_OF_CONVERSATION, {"conversation": conversation_id}))


def get_agent(db: Database, agent_id: str) -> Agent | None:
    with db.read() as s:
        return s.get(Agent, agent_id)


def get_master(db: Database, conversation_id: str) -> Agent:
    with db.read() as s:
        return s.scalars(_MASTER, {"conversation": conversation_id}).one()


def find_agent(db: Database, conversation_id: str, ref: str) -> Agent | None:
    """An agent of the conversation by id or display name."""
    with db.read() as s:
        return s.scalars(
            select(Agent).where(
                Agent.conversation_id == conversation_id,
                or_(Agent.id == ref, Agent.display_name == ref),
            )
        ).first()


def agents_in_states(db: Database, states: tuple[str, ...]) -> list[Row[str, str, int, float]]:
    """The `id`, `conversation_id`, `version` and `updated_at` of the agents in `states` (the watchdog's sweep:
    rows, not ORM objects, of hundreds of running agents)."""
    with db.read() as s:
        return list(s.connection().execute(select(Agent.id, Agent.conversation_id, Agent.version, Agent.updated_at)
                                           .where(Agent.state.in_(states))))


def lock_terminated_in(session: Session, agent_id: str) -> bool | None:
    """Whether the agent is terminated, its row locked against a termination until the caller commits
    (key-share: a claim and a queueing may hold it together); None for no such agent."""
    return session.scalars(select(Agent.terminated).where(Agent.id == agent_id)
                           .with_for_update(key_share=True)).first()


def lock_for_turn_in(session: Session, agent_id: str) -> Agent | None:
    """The agent, its row locked as `lock_terminated_in` locks it: read whole (as the transaction sees it now, not
    as its session cached it), for the start of its turn."""
    return session.scalars(_LOCK_FOR_TURN, {"agent": agent_id}).first()


def lock_for_queueing_in(session: Session, agent_id: str) -> Row[str, bool] | None:
    """The agent, its row share-locked while a message is queued for it: a termination (which discards the
    queue) commits either before, and the sender hears it, or after, and takes the message along."""
    return session.execute(select(Agent.display_name, Agent.terminated).where(Agent.id == agent_id)
                           .with_for_update(read=True)).first()


# A receiver as `lock_many_for_queueing_in` read it: id, display name, terminated, state.
ReceiverRow = Row[str, str, bool, str]


AGENTS = cast(Table, Agent.__table__)
# Built once (a send's hot statement), executed on the session's connection without the ORM.
_LOCK_RECEIVERS = select(AGENTS.c.id, AGENTS.c.display_name, AGENTS.c.terminated, AGENTS.c.state) \
    .where(AGENTS.c.id.in_(bindparam("ids", expanding=True))).with_for_update(read=True)
# What a state transition reads (at every turn's end), likewise.
_STATE_OF = select(AGENTS.c.id, AGENTS.c.conversation_id, AGENTS.c.display_name, AGENTS.c.state, AGENTS.c.version) \
    .where(AGENTS.c.id == bindparam("agent"))


_SET_STATE = AGENTS.update().where(AGENTS.c.id == bindparam("agent"), AGENTS.c.version == bindparam("read")) \
    .values(state=bindparam("new_state"), version=bindparam("next"), updated_at=bindparam("at"))


def lock_many_for_queueing_in(session: Session, agent_ids: set[str]) -> dict[str, ReceiverRow]:
    """`lock_for_queueing_in` for the receivers of a batch of sends, in one statement; by agent id, with
    each one's state as of this lock (it cannot change before the commit)."""
    rows = session.connection().execute(_LOCK_RECEIVERS, {"ids": sorted(agent_ids)})
    return {row.id: row for row in rows}


def count_with_role(db: Database, conversation_id: str, role: str) -> int:
    with db.read() as s:
        return s.scalars(select(func.count()).select_from(Agent).where(
            Agent.conversation_id == conversation_id, Agent.role == role)).one()


def insert_agent(db: Database, agent: Agent) -> None:
    """Raises IntegrityError when its display name is taken in the conversation."""
    with db.write() as s:
        s.add(agent)


def list_of_kind(db: Database, conversation_id: str, kind: str) -> list[Agent]:
    with db.read() as s:
        return list(s.scalars(_OF_KIND, {"conversation": conversation_id, "kind": kind}))


def has_child_in_states(db: Database, parent_id: str, states: tuple[str, ...]) -> bool:
    with db.read() as s:
        return s.scalars(select(Agent.id).where(Agent.parent_id == parent_id, Agent.state.in_(states))
                         .limit(1)).first() is not None


def mark_terminated_in(session: Session, agent_id: str, kind: str) -> bool:
    """Terminate a live agent of this kind by compare-and-set; False when it was terminated already."""
    return rowcount(session.execute(
        update(Agent).where(Agent.id == agent_id, Agent.kind == kind, Agent.terminated.is_(False))
        .values(terminated=True, updated_at=now()))) == 1


def set_state_in(session: Session, agent_id: str, version: int, state: str) -> bool:
    """Compare-and-set of an agent's state on its version (modules/multi_agent/agent_state.py decides which)."""
    return rowcount(session.execute(_SET_STATE, {"agent": agent_id, "read": version, "new_state": state,
                                                "next": version + 1, "at": now()})) == 1


def state_in(session: Session, agent_id: str) -> Row[str, str, str, str, int] | None:
    """What a state transition reads of the agent (`id`, `conversation_id`, `display_name`, `state`, `version`),
    as the caller's transaction sees it now: a row on the connection, not an ORM object loaded afresh (at every
    turn's end)."""
    return session.connection().execute(_STATE_OF, {"agent": agent_id}).first()
