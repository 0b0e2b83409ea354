"""Edit a sent message: `POST /api/conversations/<id>/messages/<message_id>/edit` (docs/API.md, "Versions of
a turn"). The edited text is a new version of the turn: the master answers it, the older version stays
stored and readable, and the model sees only the newest version (modules/context/versions.py)."""

from __future__ import annotations

from flask import Blueprint

from modules.context.versions import version_meta
from modules.multi_agent.message_router import PendingMessage, RouteError
from modules.statuses import MessageSource, SendStatus
from modules.storage import agents as agent_store
from modules.storage import messages as message_store
from modules.storage.message_meta import MessageMeta
from modules.storage.models import Agent, Message
from server import rate_limits
from server.api import response_models as out
from server.api.context import lookup_id, owned_conversation, runtime
from server.api.endpoint import endpoint
from server.api.request_models import EditMessageBody
from server.budget_guard import refuse_over_budget
from server.errors import ApiError, not_found
from server.runtime import Runtime

bp = Blueprint("turn_versions", __name__, url_prefix="/api/conversations")


def _users_message(history: list[Message], message_id: str) -> Message | None:
    """The user's own message `message_id` in the master's history (a Regenerate copy counts: it is a version)."""
    for msg in history:
        if msg.message_id == message_id and msg.role == "user" and msg.typed_meta.source in (None, MessageSource.USER):
            return msg
    return None


@bp.post("/<conversation_id>/messages/<message_id>/edit")
@endpoint({202: out.SendAccepted, 429: out.BudgetExceededBody}, errors=(400, 404, 409), body=EditMessageBody)
def edit_message(conversation_id: str, message_id: str, body: EditMessageBody,
                 user_id: int) -> tuple[out.SendAccepted, int]:
    """A new version of the user's turn that starts with `message_id`, with the new text; the master answers it.

    The stored message gets `metadata.version_of` (the turn's first message) and `metadata.replaces_from_seq`;
    404 for a message that is not the user's in the master's history, 409 `task_in_progress` while the master
    runs."""
    conv = owned_conversation(conversation_id, user_id)
    rt = runtime()
    rate_limits.check(rt.rate_limiter, rt.settings, rate_limits.SENDS, user_id)  # a turn, as a send is
    master = agent_store.get_master(rt.db, conv.id)
    mid = lookup_id(message_id)
    replaced = _users_message(message_store.list_messages(rt.db, master.id), mid) if mid else None
    if replaced is None:
        raise not_found("message")
    if rt.tasks.active_task_of_agent(master.id) is not None:
        raise ApiError(409, "task_in_progress", "the master agent is still answering; stop it or wait")
    refuse_over_budget(rt.budgets, user_id)
    return send_version(rt, conv.id, master, body.message,
                        MessageMeta(source=MessageSource.USER, edit_of=replaced.message_id,
                                    **version_meta(replaced.message_id, replaced.seq, replaced.typed_meta)))


def send_version(rt: Runtime, conversation_id: str, master: Agent, content: str,
                 meta: MessageMeta) -> tuple[out.SendAccepted, int]:
    """Send a new version of a turn (an edit, or Regenerate's copy) to the master, as the user: the pending
    suggestions are withdrawn, and the answer is the send's (202)."""
    rt.suggestions.cancel(conversation_id)
    message = PendingMessage.new(conversation_id=conversation_id, target_agent_id=master.id, type="message",
                                 content=content, source_display_name="user", meta=meta)
    try:
        routed = rt.router.route_message(master.id, message)
    except RouteError:
        raise not_found("conversation") from None
    return out.SendAccepted(message_id=message.id, conversation_id=conversation_id,
                            status=SendStatus.ROUTED,
                            task_id=routed.task_id, agent_id=master.id, delivery=routed.delivery,
                            target_agent=master.display_name), 202
