"""The `pending_count` event: an agent's queue of unread messages changed, so a client's team panel
shows the count live (docs/API.md). Sent to the conversation's room only, outside any task's log."""

from __future__ import annotations

import logging

from modules.storage import pending_messages as queue
from server.runtime import Runtime

log = logging.getLogger(__name__)


def emit_pending_count(rt: Runtime, conversation_id: str, agent_id: str) -> None:
    """Tell the room how many messages wait in the agent's queue now; a failure only loses the update."""
    try:
        count = queue.queued_count(rt.db, agent_id)
        rt.transport.emit("pending_count", {"agent_id": agent_id, "conversation_id": conversation_id,
                                            "pending_count": count}, conversation_id)
    except Exception:
        log.warning("could not send the queue size of agent %s", agent_id, exc_info=True)
