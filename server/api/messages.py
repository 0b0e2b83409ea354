"""`/api/messages/<id>`: where a sent message went, once routed (the acknowledgement comes before the route)."""

from __future__ import annotations

from typing import Any

from flask import Blueprint

from modules.statuses import MessageSource, SendStatus
from modules.storage import pending_messages
from modules.storage.unrouted import ROUTING
from server.api import response_models as out
from server.api.context import lookup_id, owned_conversation, runtime
from server.api.endpoint import endpoint
from server.errors import not_found

bp = Blueprint("messages", __name__, url_prefix="/api/messages")

@bp.get("/<message_id>")
@endpoint({200: out.MessageRoute}, errors=(404,))
def get_message(message_id: str, user_id: int) -> out.MessageRoute:
    """Where a message the caller sent went: `status` is `routing` until it is routed."""
    mid = lookup_id(message_id)
    row = pending_messages.get_message(runtime().db, mid) if mid else None
    if row is None or row.typed_meta.source != MessageSource.USER:
        raise not_found("message")
    owned_conversation(row.conversation_id, user_id)
    routed = row.typed_meta.routed
    route = routed if row.status != ROUTING else None
    fields: dict[str, Any] = route.model_dump() if route is not None else {}
    return out.MessageRoute(message_id=row.id, conversation_id=row.conversation_id,
                            status=SendStatus.ROUTED if route is not None else SendStatus.ROUTING, **fields)
