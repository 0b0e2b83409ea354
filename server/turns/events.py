"""The events a turn emits about messages, queues and agent states (docs/API.md lists them)."""

from __future__ import annotations

import logging
from typing import Any

from modules.multi_agent.agent_state import StateChange
from modules.storage import pending_messages as queue
from modules.storage.models import Message
from server.sender import EventSender
from server.turns.context import TurnRuntime

log = logging.getLogger(__name__)


def user_message_event(msg: Message) -> dict[str, Any]:
    """The `user_message` event data of a stored user-role message."""
    meta = dict(msg.meta or {})
    return {
        "message": msg.content or "",
        "message_id": msg.message_id,
        "source": meta.pop("source", "user"),
        "visibility": meta.pop("visibility", "chat"),
        "starts_work": meta.pop("starts_work", True),
        "metadata": meta,
        "agent_id": msg.agent_id,
    }


def user_message_events(msg: Message, delivery: str, display_name: str) -> list[tuple[str, dict[str, Any]]]:
    """The echo of a message the agent now sees; a user's message is followed by how it was routed."""
    event = user_message_event(msg)
    events: list[tuple[str, dict[str, Any]]] = [("user_message", event)]
    route = event["metadata"].get("route")
    if event["source"] == "user" and route:
        events.append(("route", {"route": route, "delivery": delivery, "target_agent": display_name,
                                 "message_id": msg.message_id}))
    return events


def emit_user_messages(sender: EventSender, messages: list[Message], delivery: str, display_name: str) -> None:
    events = [event for msg in messages for event in user_message_events(msg, delivery, display_name)]
    if events:
        sender.emit_many(events)


def state_event(change: StateChange) -> dict[str, Any]:
    return {"state": change.state, "previous": change.previous, "display_name": change.display_name,
            "agent_id": change.agent_id}


def emit_pending_count(rt: TurnRuntime, conversation_id: str, agent_id: str) -> None:
    """`pending_count`: how many messages wait in the agent's queue now, to the room only (outside any
    task's log), so the team panel shows the count live; a failure only loses the update."""
    try:
        count = queue.queued_count(rt.db, agent_id)
        rt.transport.emit("pending_count", {"agent_id": agent_id, "conversation_id": conversation_id,
                                            "pending_count": count}, conversation_id)
    except Exception:
        log.warning("could not send the queue size of agent %s", agent_id, exc_info=True)
