"""Agent state transitions: only allowed moves (unless forced), compare-and-set on the version, a lost race
retried while the move is still allowed, and listeners told of exactly the changes that were applied."""

from __future__ import annotations

import pytest

from modules.multi_agent import agent_state
from modules.multi_agent.agent_state import AgentStates, StateChange
from modules.statuses import AgentState
from modules.storage import conversations
from modules.storage.db import Database
from modules.storage.models import Agent
from modules.storage.users import get_or_create_user


@pytest.fixture
def states(tmp_path):
    db = Database(f"sqlite:///{tmp_path / 'app.db'}")
    db.migrate()
    _, master = conversations.create_conversation(db, get_or_create_user(db, "u").id, "t")
    heard: list[StateChange] = []
    states = AgentStates(db)
    states.subscribe(heard.append)
    yield db, states, master, heard
    db.dispose()


def _row(db, agent_id) -> Agent:
    with db.read() as s:
        return s.get(Agent, agent_id)


def test_allowed_moves_apply_once_and_are_announced(states):
    db, states, master, heard = states
    change = states.transition(master.id, agent_state.RUNNING)
    assert change == StateChange(master.id, master.conversation_id, "MasterAgent", "idle", "running")
    assert heard == [change]
    assert states.transition(master.id, agent_state.RUNNING) is None  # already there
    assert states.transition(master.id, agent_state.WAITING, notify=False) is not None
    assert heard == [change]  # not announced: the caller does it
    row = _row(db, master.id)
    assert (row.state, row.version) == (AgentState.WAITING, 2)


def test_a_move_that_is_not_allowed_needs_force(states):
    db, states, master, heard = states
    assert states.transition(master.id, agent_state.WAITING) is None
    assert states.transition(master.id, agent_state.COMPLETED) is None
    assert _row(db, master.id).state == AgentState.IDLE and heard == []
    forced = states.transition(master.id, agent_state.WAITING, force=True)
    assert forced is not None and (forced.previous, forced.state) == (AgentState.IDLE, AgentState.WAITING)
    with pytest.raises(ValueError):
        states.transition(master.id, "asleep")
    assert states.transition("no-such-agent", agent_state.RUNNING) is None


def test_the_compare_and_set_refuses_a_stale_version(states):
    db, states, master, _ = states
    seen = _row(db, master.id).version
    states.transition(master.id, agent_state.RUNNING)
    with db.write() as s:
        assert states.transition_in(s, master.id, agent_state.IDLE, version=seen) is None
    with db.write() as s:
        assert states.transition_in(s, master.id, agent_state.IDLE, version=seen + 1) is not None
    assert _row(db, master.id).state == AgentState.IDLE


def test_a_lost_race_is_retried_while_the_move_is_still_allowed(states, monkeypatch):
    db, states, master, heard = states
    real, calls = AgentStates.transition_in, []

    def lose_first(self, s, agent_id, to_state, **kw):
        calls.append(kw.get("force"))
        return None if len(calls) == 1 else real(self, s, agent_id, to_state, **kw)

    monkeypatch.setattr(AgentStates, "transition_in", lose_first)
    assert states.transition(master.id, agent_state.RUNNING) is not None
    assert calls == [False, False] and len(heard) == 1
    calls.clear()
    assert states.transition(master.id, agent_state.WAITING, force=True) is not None
    assert calls == [True, True]


def test_retries_end_when_the_move_is_no_longer_allowed_or_after_five(states, monkeypatch):
    db, states, master, _ = states
    calls = []
    monkeypatch.setattr(AgentStates, "transition_in", lambda self, s, *a, **kw: calls.append(a) or None)
    assert states.transition(master.id, agent_state.COMPLETED) is None  # idle -> completed: not allowed
    assert len(calls) == 1
    calls.clear()
    assert states.transition(master.id, agent_state.IDLE) is None  # already idle
    assert len(calls) == 1
    calls.clear()
    assert states.transition(master.id, agent_state.RUNNING) is None  # allowed, but always lost
    assert len(calls) == 5
    calls.clear()
    assert states.transition(master.id, agent_state.WAITING, force=True) is None
    assert len(calls) == 5


def test_inside_a_transaction_a_disallowed_move_needs_force_too_and_the_row_records_when(states):
    db, states, master, _ = states
    before = _row(db, master.id).updated_at
    with db.write() as s:
        assert states.transition_in(s, master.id, agent_state.WAITING) is None
    with db.write() as s:
        assert states.transition_in(s, master.id, agent_state.RUNNING) is not None
    assert _row(db, master.id).updated_at > before  # recovery judges orphans by it
    with db.write() as s, pytest.raises(ValueError, match="unknown agent state 'asleep'"):
        states.transition_in(s, master.id, "asleep")


def test_the_update_is_a_compare_and_set_on_the_version_it_read(states, monkeypatch):
    """Another writer bumps the version between this transition's read and its update: it must lose."""
    from sqlalchemy.orm import Session

    db, states, master, heard = states
    execute = Session.execute

    def bump_first(session, statement, *args, **kwargs):
        if getattr(statement, "is_update", False) and not getattr(session, "_bumped", False):
            session._bumped = True
            session.connection().exec_driver_sql("UPDATE agents SET version = version + 1 WHERE id = ?",
                                                 (master.id,))
        return execute(session, statement, *args, **kwargs)

    monkeypatch.setattr(Session, "execute", bump_first)
    with db.write() as s:
        assert states.transition_in(s, master.id, agent_state.RUNNING) is None
    monkeypatch.undo()
    row = _row(db, master.id)
    assert (row.state, row.version) == (AgentState.IDLE, 1)
