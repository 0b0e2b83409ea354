"""Agent states and every transition between them, in one place.

A transition is a compare-and-set on the agent row's `version`, so two writers
(two green threads, or two processes) can never both move the same agent from
the same state. Listeners hear each applied change (the server emits them as
`agent_state` events).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from sqlalchemy import update

from modules.storage.db import Database
from modules.storage.models import Agent
from modules.storage.records import now

IDLE, RUNNING, WAITING, COMPLETED = "idle", "running", "waiting", "completed"
STATES = (IDLE, RUNNING, WAITING, COMPLETED)

ALLOWED: dict[str, frozenset[str]] = {
    IDLE: frozenset({RUNNING}),
    COMPLETED: frozenset({RUNNING}),
    RUNNING: frozenset({WAITING, COMPLETED, IDLE}),
    WAITING: frozenset({RUNNING, IDLE}),
}


@dataclass(frozen=True)
class StateChange:
    agent_id: str
    conversation_id: str
    display_name: str
    previous: str
    state: str


class AgentStates:
    def __init__(self, db: Database):
        self._db = db
        self._listeners: list[Callable[[StateChange], None]] = []

    def subscribe(self, listener: Callable[[StateChange], None]) -> None:
        self._listeners.append(listener)

    def transition(self, agent_id: str, to_state: str, *, force: bool = False,
                   notify: bool = True) -> StateChange | None:
        """Apply `to_state` if allowed from the current state; None when not allowed or lost a race.

        `force` skips the allowed-transition check (start-up recovery only); with
        `notify=False` the caller announces the change itself once it can say where.
        """
        if to_state not in STATES:
            raise ValueError(f"unknown agent state {to_state!r}")
        for _ in range(5):
            with self._db.read() as s:
                agent = s.get(Agent, agent_id)
            if agent is None:
                return None
            if agent.state == to_state:
                return None
            if not force and to_state not in ALLOWED[agent.state]:
                return None
            with self._db.write() as s:
                won = s.execute(
                    update(Agent).where(Agent.id == agent_id, Agent.version == agent.version)
                    .values(state=to_state, version=agent.version + 1, updated_at=now())
                ).rowcount == 1
            if won:
                change = StateChange(agent.id, agent.conversation_id, agent.display_name, agent.state, to_state)
                if notify:
                    for listener in self._listeners:
                        listener(change)
                return change
        return None
