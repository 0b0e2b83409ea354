"""Agent states and every transition between them, in one place.

A transition is a compare-and-set on the agent row's `version`, so two writers
(two green threads, or two processes) can never both move the same agent from
the same state. Listeners hear each applied change (the server emits them as
`agent_state` events).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from sqlalchemy.orm import Session

from modules.statuses import AgentState
from modules.storage import agents as agent_store
from modules.storage.db import Database

# The states themselves are defined once, in modules/statuses.py.
IDLE, RUNNING, WAITING, COMPLETED = AgentState.IDLE, AgentState.RUNNING, AgentState.WAITING, AgentState.COMPLETED
STATES = tuple(AgentState)

ALLOWED: dict[AgentState, frozenset[AgentState]] = {
    IDLE: frozenset({RUNNING}),
    COMPLETED: frozenset({RUNNING}),
    RUNNING: frozenset({WAITING, COMPLETED, IDLE}),
    WAITING: frozenset({RUNNING, IDLE}),
}


class StateRead(Protocol):
    """What a transition reads of the agent: an `Agent` the caller holds, or the row `agents.state_in` reads."""

    @property
    def id(self) -> str: ...
    @property
    def conversation_id(self) -> str: ...
    @property
    def display_name(self) -> str: ...
    @property
    def state(self) -> str: ...
    @property
    def version(self) -> int: ...


@dataclass(frozen=True)
class StateChange:
    agent_id: str
    conversation_id: str
    display_name: str
    previous: AgentState
    state: AgentState


class AgentStates:
    def __init__(self, db: Database):
        self._db = db
        self._listeners: list[Callable[[StateChange], None]] = []

    def subscribe(self, listener: Callable[[StateChange], None]) -> None:
        self._listeners.append(listener)

    def transition(self, agent_id: str, to_state: AgentState, *, force: bool = False,
                   notify: bool = True) -> StateChange | None:
        """Apply `to_state` if allowed from the current state; None when not allowed or lost a race.

        `force` skips the allowed-transition check (recovery only); with
        `notify=False` the caller announces the change itself once it can say where.
        """
        for _ in range(5):
            with self._db.write() as s:
                change = self.transition_in(s, agent_id, to_state, force=force)
            if change is not None:
                if notify:
                    self.announce(change)
                return change
            agent = agent_store.get_agent(self._db, agent_id)
            if agent is None or agent.state == to_state or \
                    (not force and to_state not in ALLOWED[AgentState(agent.state)]):
                return None
        return None

    def transition_in(self, s: Session, agent_id: str, to_state: AgentState, *, force: bool = False,
                      version: int | None = None, read: StateRead | None = None) -> StateChange | None:
        """One compare-and-set inside the caller's transaction, so a state change can commit together with
        what causes it; the caller announces the change after the commit. With `version`, only from the
        row the caller saw. `read`: the row as the caller's transaction has just read it (no second read;
        a stale one only loses the compare-and-set on its version)."""
        if to_state not in STATES:
            raise ValueError(f"unknown agent state {to_state!r}")
        agent: StateRead | None = read if read is not None else agent_store.state_in(s, agent_id)
        if agent is None or agent.state == to_state or \
                (not force and to_state not in ALLOWED[AgentState(agent.state)]):
            return None
        if version is not None and agent.version != version:
            return None
        previous, version = AgentState(agent.state), agent.version
        if not agent_store.set_state_in(s, agent_id, version, to_state):
            return None
        return StateChange(agent.id, agent.conversation_id, agent.display_name, previous, to_state)

    def announce(self, change: StateChange) -> None:
        for listener in self._listeners:
            listener(change)
