"""The one interface between the chat flow and the transports.

Every event of a task goes first to its durable event log (the REST polling
log, numbered per task) and then to the Socket.IO room of its conversation,
with the same `type` and `data`, so socket and REST clients see one story.
Only durable events are sent (see `EventLog`: group commit, coalesced text chunks). Events are built from
the catalogue (modules/event_catalogue.py) only; `Transport` carries their wire form.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from flask_socketio import SocketIO
from sqlalchemy.orm import Session

from modules.event_catalogue import Event
from server.turns.event_log import CHUNK_TYPES, EventLog


class Transport(Protocol):
    def emit(self, event_type: str, data: dict[str, Any], room: str) -> None: ...


class EventSender(Protocol):
    def emit(self, event: Event) -> int: ...

    def emit_many(self, events: list[Event], *, step: Callable[[Session], Any] | None = None) -> int: ...


def to_room(transport: Transport, event: Event, room: str) -> None:
    """Send an event outside any task's log (`pending_count`, a room's `route` and `agent_state`)."""
    transport.emit(event.TYPE, event.data(), room)


class SocketIOTransport:
    def __init__(self, socketio: SocketIO):
        self._socketio = socketio

    def emit(self, event_type: str, data: dict[str, Any], room: str) -> None:
        self._socketio.emit(event_type, data, to=room)


class TaskEventSender:
    """Sends the events of one task; `emit` returns the event's index in the task's log."""

    def __init__(self, event_log: EventLog, transport: Transport, *, task_id: str,
                 conversation_id: str, agent_id: str):
        self._log = event_log
        self._transport = transport
        self.task_id = task_id
        self.conversation_id = conversation_id
        self.agent_id = agent_id

    def emit(self, event: Event) -> int:
        if event.TYPE in CHUNK_TYPES:  # coalesced with the message's previous chunk while that one waits
            return self._log.append_chunk(self.task_id, self.payloads([event])[0][1], self.deliver, event.TYPE)
        return self.emit_many([event])

    def emit_many(self, events: list[Event], *, step: Callable[[Session], Any] | None = None) -> int:
        """Log the events in one transaction, then send each to the room; returns the first index. `step`: a
        write of the caller's in the same transaction (a turn's start: its status beside its first events)."""
        payloads = self.payloads(events)
        return self._log.append_many(self.task_id, payloads, lambda first: self.deliver(first, payloads), step=step)

    def payloads(self, events: list[Event]) -> list[tuple[str, dict[str, Any]]]:
        """The events as logged: each carries its task, conversation and agent."""
        return [(event.TYPE, {**(data := event.data()), "task_id": self.task_id,
                              "conversation_id": self.conversation_id, "agent_id": data.get("agent_id", self.agent_id)})
                for event in events]

    def deliver(self, first: int, payloads: list[tuple[str, dict[str, Any]]]) -> None:
        """Send logged events to the room, numbered from `first`."""
        for i, (event_type, payload) in enumerate(payloads):
            self._transport.emit(event_type, {**payload, "idx": first + i}, self.conversation_id)
