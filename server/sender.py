"""The one interface between the chat flow and the transports.

Every event of a task goes first to its durable event log (the REST polling
log, numbered per task) and then to the Socket.IO room of its conversation,
with the same `type` and `data`, so socket and REST clients see one story.
Only durable events are sent (see `EventLog`: group commit, coalesced text chunks).
"""

from __future__ import annotations

from typing import Any, Protocol

from flask_socketio import SocketIO

from server.turns.event_log import CHUNK_TYPES, EventLog


class Transport(Protocol):
    def emit(self, event_type: str, data: dict[str, Any], room: str) -> None: ...


class EventSender(Protocol):
    def emit(self, event_type: str, data: dict[str, Any]) -> int: ...

    def emit_many(self, events: list[tuple[str, dict[str, Any]]]) -> int: ...


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

    def emit(self, event_type: str, data: dict[str, Any]) -> int:
        if event_type in CHUNK_TYPES:  # coalesced with the message's previous chunk while that one waits
            return self._log.append_chunk(self.task_id, self.payloads([(event_type, data)])[0][1], self.deliver,
                                          event_type)
        return self.emit_many([(event_type, data)])

    def emit_many(self, events: list[tuple[str, dict[str, Any]]]) -> int:
        """Log the events in one transaction, then send each to the room; returns the first index."""
        payloads = self.payloads(events)
        return self._log.append_many(self.task_id, payloads, lambda first: self.deliver(first, payloads))

    def payloads(self, events: list[tuple[str, dict[str, Any]]]) -> list[tuple[str, dict[str, Any]]]:
        """The events as logged: each carries its task, conversation and agent."""
        return [(event_type, {**data, "task_id": self.task_id, "conversation_id": self.conversation_id,
                              "agent_id": data.get("agent_id", self.agent_id)}) for event_type, data in events]

    def deliver(self, first: int, payloads: list[tuple[str, dict[str, Any]]]) -> None:
        """Send logged events to the room, numbered from `first`."""
        for i, (event_type, payload) in enumerate(payloads):
            self._transport.emit(event_type, {**payload, "idx": first + i}, self.conversation_id)
