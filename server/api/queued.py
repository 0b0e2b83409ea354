"""`GET /api/conversations/<id>/queued`: the user's messages no agent has read yet, so a reloaded page
shows them where they wait (they enter an agent's history only when its turn reads them)."""

from __future__ import annotations

from flask import Blueprint

from modules.storage import agents as agent_store
from modules.storage import pending_messages as queue
from modules.storage.unrouted import ROUTING
from server.api import response_models as out
from server.api.context import owned_conversation, runtime
from server.api.endpoint import endpoint
from server.api.serializers import iso

bp = Blueprint("queued", __name__, url_prefix="/api/conversations")


@bp.get("/<conversation_id>/queued")
@endpoint({200: out.QueuedMessageList}, errors=(404,))
def list_queued(conversation_id: str, user_id: int) -> out.QueuedMessageList:
    """The user's messages that wait for their route or in an agent's queue, oldest first."""
    conv = owned_conversation(conversation_id, user_id)
    db = runtime().db
    names = {a.id: a.display_name for a in agent_store.list_agents(db, conv.id)}
    rows = queue.waiting_user_messages(db, conv.id, (ROUTING, queue.QUEUED))
    return out.QueuedMessageList(data=[
        out.QueuedMessage(message_id=r.id, content=r.content, status=ROUTING if r.status == ROUTING else queue.QUEUED,
                          agent_id=None if r.status == ROUTING else r.target_agent_id,
                          target_agent=None if r.status == ROUTING else names.get(r.target_agent_id),
                          created_at=iso(r.created_at))
        for r in rows])
