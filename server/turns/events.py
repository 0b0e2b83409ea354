"""The events a turn emits about messages, queues and agent states (docs/API.md lists them)."""

from __future__ import annotations

import logging

from modules.event_catalogue import AgentStateEvent, Event, PendingCountEvent, RouteEvent, UserMessageEvent
from modules.multi_agent.agent_state import StateChange
from modules.statuses import Delivery, MessageSource, Visibility
from modules.storage import pending_messages as queue
from modules.storage.models import Message
from server.sender import EventSender, to_room
from server.turns.context import TurnRuntime

log = logging.getLogger(__name__)


def user_message_event(msg: Message) -> UserMessageEvent:
    """The `user_message` event of a stored user-role message."""
    meta = msg.typed_meta
    return UserMessageEvent(
        message=msg.content or "",
        message_id=msg.message_id,
        source=meta.source or MessageSource.USER,
        visibility=meta.visibility or Visibility.CHAT,
        starts_work=True if meta.starts_work is None else meta.starts_work,
        metadata=meta.event_metadata(),
        agent_id=msg.agent_id,
    )


def user_message_events(msg: Message, delivery: Delivery, display_name: str) -> list[Event]:
    """The echo of a message the agent now sees; a user's message is followed by how it was routed."""
    event = user_message_event(msg)
    events: list[Event] = [event]
    route = msg.typed_meta.route
    if event.source == MessageSource.USER and route:
        events.append(RouteEvent(route=route, delivery=delivery, target_agent=display_name,
                                 message_id=msg.message_id))
    return events


def emit_user_messages(sender: EventSender, messages: list[Message], delivery: Delivery, display_name: str) -> None:
    events = [event for msg in messages for event in user_message_events(msg, delivery, display_name)]
    if events:
        sender.emit_many(events)


def state_event(change: StateChange, *, in_room: bool = False) -> AgentStateEvent:
    """The `agent_state` event of a change; sent to the room (outside a task's log) it names the conversation."""
    return AgentStateEvent(state=change.state, previous=change.previous, display_name=change.display_name,
                           agent_id=change.agent_id, conversation_id=change.conversation_id if in_room else None)


def emit_pending_count(rt: TurnRuntime, conversation_id: str, agent_id: str) -> int | None:
    """`pending_count`: how many messages wait in the agent's queue now, to the room only (outside any
    task's log), so the team panel shows the count live; a failure only loses the update. Returns the count
    (None when it could not be read)."""
    try:
        count = queue.queued_count(rt.db, agent_id)
    except Exception:
        log.warning("could not read the queue size of agent %s", agent_id, exc_info=True)
        return None
    try:
        to_room(rt.transport, PendingCountEvent(agent_id=agent_id, conversation_id=conversation_id,
                                                pending_count=count), conversation_id)
    except Exception:
        log.warning("could not send the queue size of agent %s", agent_id, exc_info=True)
    return count
