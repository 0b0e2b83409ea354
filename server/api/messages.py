"""`/api/messages/<id>`: where a sent message went, once routed (the acknowledgement comes before the route)."""

from __future__ import annotations

from flask import Blueprint, jsonify

from modules.storage import pending_messages
from modules.storage.unrouted import ROUTING
from server.api.context import current_user_id, owned_conversation, runtime
from server.errors import not_found

bp = Blueprint("messages", __name__, url_prefix="/api/messages")


@bp.get("/<message_id>")
def get_message(message_id: str):
    row = pending_messages.get_message(runtime().db, message_id)
    if row is None or (row.meta or {}).get("source") != "user":
        raise not_found("message")
    owned_conversation(row.conversation_id, current_user_id())
    routed = (row.meta or {}).get("routed")
    answer = {"route": None, "delivery": None, "task_id": None, "agent_id": None, "target_agent": None}
    if row.status != ROUTING and isinstance(routed, dict):
        answer.update({k: routed.get(k) for k in answer})
    return jsonify({"success": True, "message_id": row.id, "conversation_id": row.conversation_id,
                    "status": "routed" if row.status != ROUTING and routed else ROUTING, **answer})
