"""Rename, delete and regenerate: `PATCH`/`DELETE /api/conversations/<id>`, `POST .../regenerate`."""

from __future__ import annotations

import logging
import time
from pathlib import Path

from flask import Blueprint, Response

from modules.context.versions import version_meta
from modules.statuses import MessageSource, Visibility
from modules.storage import agents as agent_store
from modules.storage import conversations as conversation_store
from modules.storage import messages as message_store
from modules.storage import tasks as task_store
from modules.storage.message_meta import MessageMeta
from modules.storage.models import Conversation, Message
from server import rate_limits
from server.api import response_models as out
from server.api.context import owned_conversation, runtime
from server.api.endpoint import endpoint
from server.api.request_models import RenameConversationBody
from server.api.serializers import agent_out, conversation_detail
from server.api.turn_versions import send_version
from server.budget_guard import refuse_over_budget
from server.errors import ApiError, not_found
from server.runtime import Runtime

log = logging.getLogger(__name__)

bp = Blueprint("conversation_admin", __name__, url_prefix="/api/conversations")

# How long a delete waits for the conversation's turns and commands to end before it answers; what is
# still running then is left to finish and the rows are removed by a background retry.
DELETE_WAIT_S = 10.0
PURGE_RETRY_S = 120.0


@bp.patch("/<conversation_id>")
@endpoint({200: out.ConversationDetail}, errors=(400, 404), body=RenameConversationBody)
def rename_conversation(conversation_id: str, body: RenameConversationBody, user_id: int) -> out.ConversationDetail:
    """Rename the conversation (1 to 200 characters after stripping white space)."""
    conv = owned_conversation(conversation_id, user_id)
    rt = runtime()
    renamed = conversation_store.rename_conversation(rt.db, conv.id, user_id, body.title)
    if renamed is None:
        raise not_found("conversation")
    return conversation_detail(renamed, [agent_out(a) for a in agent_store.list_agents(rt.db, conv.id)])


def _stop_work(rt: Runtime, conversation_id: str, agent_ids: list[str]) -> None:
    for agent_id in agent_ids:
        rt.tasks.terminate_agent(agent_id)  # its turn, and its background commands
    for task in task_store.list_tasks(rt.db, conversation_id, active_only=True):
        rt.tasks.stop(task.id)


def _remove_files(rt: Runtime, conv: Conversation, command_logs: list[str]) -> None:
    rt.remove_workspace(conv.id)
    for path in command_logs:
        Path(path).unlink(missing_ok=True)


def _purge_when_idle(rt: Runtime, conv: Conversation, agent_ids: list[str], wait_s: float) -> bool:
    """Remove the conversation's rows once its turns and commands have ended; False if they still run
    after `wait_s`."""
    deadline = time.monotonic() + wait_s
    while True:
        command_logs = [c.log_path for c in rt.commands.in_conversation(conv.id)]
        if conversation_store.purge_conversation(rt.db, conv.id):
            _remove_files(rt, conv, command_logs)
            return True
        if time.monotonic() >= deadline:
            return False
        _stop_work(rt, conv.id, agent_ids)  # a stop may have been missed by a task that was starting
        time.sleep(0.1)


def _purge_later(rt: Runtime, conv: Conversation, agent_ids: list[str]) -> None:
    try:
        if not _purge_when_idle(rt, conv, agent_ids, PURGE_RETRY_S):
            log.warning("conversation %s is deleted, but its work did not end in %g s: its rows stay, hidden",
                        conv.id, DELETE_WAIT_S + PURGE_RETRY_S)
    except Exception:
        log.exception("removing the rows of deleted conversation %s failed; they stay, hidden", conv.id)


@bp.delete("/<conversation_id>")
@endpoint({}, errors=(404,), files={204: ""})
def delete_conversation(conversation_id: str, user_id: int) -> Response:
    """Delete the conversation: its turns and commands are stopped, then its rows and workspace removed.

    From the answer on it is in no list and every endpoint answers 404 for it."""
    conv = owned_conversation(conversation_id, user_id)
    rt = runtime()
    if not conversation_store.mark_deleted(rt.db, conv.id, user_id):
        raise not_found("conversation")
    rt.suggestions.cancel(conv.id)
    agent_ids = conversation_store.retire_agents(rt.db, conv.id)
    _stop_work(rt, conv.id, agent_ids)
    if not _purge_when_idle(rt, conv, agent_ids, DELETE_WAIT_S):
        rt.spawn(_purge_later, rt, conv, agent_ids)
    _remove_files(rt, conv, [])
    return Response(status=204)


def _last_user_message(rt: Runtime, master_id: str) -> Message | None:
    for msg in reversed(message_store.list_messages(rt.db, master_id)):
        if msg.role == "user" and msg.typed_meta.source in (None, MessageSource.USER):
            return msg
    return None


@bp.post("/<conversation_id>/regenerate")
@endpoint({202: out.SendAccepted, 429: out.BudgetExceededBody}, errors=(404, 409))
def regenerate(conversation_id: str, user_id: int) -> tuple[out.SendAccepted, int]:
    """A new turn of the master that answers the last user message again; the old answer stays.

    The message reaches the master again as a hidden copy (`metadata.regenerate_of` names the original).
    409 `nothing_to_regenerate` without a user message, 409 `task_in_progress` while the master runs."""
    conv = owned_conversation(conversation_id, user_id)
    rt = runtime()
    rate_limits.check(rt.rate_limiter, rt.settings, rate_limits.SENDS, user_id)  # a turn, as a send is
    master = agent_store.get_master(rt.db, conv.id)
    if rt.tasks.active_task_of_agent(master.id) is not None:
        raise ApiError(409, "task_in_progress", "the master agent is still answering; stop it or wait")
    last = _last_user_message(rt, master.id)
    if last is None:
        raise ApiError(409, "nothing_to_regenerate", "the conversation has no user message to answer again")
    refuse_over_budget(rt.budgets, user_id)
    original = last.typed_meta.regenerate_of or last.message_id
    return send_version(rt, conv.id, master, last.content or "",
                        MessageMeta(source=MessageSource.USER, visibility=Visibility.HIDDEN, regenerate_of=original,
                                    **version_meta(last.message_id, last.seq, last.typed_meta)))
