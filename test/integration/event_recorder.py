"""A Socket.IO client that records what a conversation's room hears, and the check of each event against the
catalogue (modules/event_catalogue.py), for the integration tests that watch the wire."""

from __future__ import annotations

import threading
from typing import Any

import socketio
from pydantic import ValidationError

from modules.event_catalogue import EVENTS, wire_model

MODELS = {name: wire_model(cls) for name, cls in EVENTS.items()}


def conforms(event_type: str, data: dict[str, Any]) -> str | None:
    """Why the event does not match the catalogue, or None."""
    model = MODELS.get(event_type)
    if model is None:
        return f"{event_type} is not in the catalogue"
    try:
        model.model_validate(data, strict=True)
    except ValidationError as exc:
        return f"{event_type}: {exc}"
    return None


class Recorder:
    """A Socket.IO client in one conversation's room that keeps every event it receives."""

    def __init__(self, url: str, token: str | None = None):
        self.events: list[tuple[str, dict]] = []
        self.client = socketio.Client(reconnection=False)
        self._lock = threading.Lock()

        @self.client.on("*")
        def _any(event, data):
            with self._lock:
                self.events.append((event, data))

        self.client.connect(url, auth={"token": token} if token else None, wait_timeout=10)

    def join(self, conversation_id: str) -> None:
        ack = self.client.call("join_conversation", {"conversation_id": conversation_id}, timeout=10)
        assert ack.get("success") is not False, ack

    def seen(self) -> list[tuple[str, dict]]:
        with self._lock:
            return list(self.events)
