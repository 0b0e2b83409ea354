"""`/api/conversations`: create, list, read, and what a conversation's agents are doing."""

from __future__ import annotations

from flask import Blueprint, jsonify, request

from modules.storage import agents as agent_store
from modules.storage import conversations as conversation_store
from modules.storage import messages as message_store
from modules.storage import pending_messages as queue
from server.api.context import current_user_id, json_body, owned_conversation, runtime
from server.api.serializers import agent_json, conversation_json, message_json
from server.chat_service import DEFAULT_TITLE, storable
from server.errors import ApiError, not_found

bp = Blueprint("conversations", __name__, url_prefix="/api/conversations")

MAX_TITLE_CHARS = 200


@bp.post("")
def create_conversation():
    user_id = current_user_id()
    payload = json_body(required=False)
    title = payload.get("title", DEFAULT_TITLE)
    if not isinstance(title, str) or len(title) > MAX_TITLE_CHARS or not storable(title):
        raise ApiError(400, "invalid_title", f"`title` must be a string of at most {MAX_TITLE_CHARS} characters")
    rt = runtime()
    conv, master = conversation_store.create_conversation(rt.db, user_id, title.strip() or DEFAULT_TITLE,
                                                          rt.master.name)
    return jsonify({"success": True, **conversation_json(conv), "agents": [agent_json(master)]}), 201


@bp.get("")
def list_conversations():
    convs = conversation_store.list_conversations(runtime().db, current_user_id())
    return jsonify({"success": True, "data": [conversation_json(c) for c in convs]})


@bp.get("/<cid>")
def get_conversation(cid: str):
    conv = owned_conversation(cid, current_user_id())
    return jsonify({"success": True, **conversation_json(conv), "agents": _agents_json(conv.id)})


@bp.get("/<cid>/messages")
def list_messages(cid: str):
    conv = owned_conversation(cid, current_user_id())
    db = runtime().db
    ref = request.args.get("agent")
    agent = agent_store.find_agent(db, conv.id, ref) if ref else agent_store.get_master(db, conv.id)
    if agent is None:
        raise not_found("agent")
    msgs = message_store.list_messages(db, agent.id)
    return jsonify({"success": True, "agent_id": agent.id, "display_name": agent.display_name,
                    "data": [message_json(m) for m in msgs]})


def _agents_json(conversation_id: str) -> list[dict]:
    db = runtime().db
    counts = queue.queued_counts(db, conversation_id)
    return [agent_json(a, counts.get(a.id, 0)) for a in agent_store.list_agents(db, conversation_id)]


@bp.get("/<cid>/agents")
def list_agents(cid: str):
    conv = owned_conversation(cid, current_user_id())
    return jsonify({"success": True, "data": _agents_json(conv.id)})


@bp.get("/<cid>/running-status")
def running_status(cid: str):
    conv = owned_conversation(cid, current_user_id())
    rt = runtime()
    master = agent_store.get_master(rt.db, conv.id)
    task_id = rt.tasks.active_task_of_agent(master.id)
    pending = len(rt.commands.poll_updates(conv.id)) + len(rt.sub_agents.poll_updates(conv.id))
    return jsonify({
        "success": True, "is_main_running": task_id is not None, "main_task_id": task_id,
        **rt.tasks.background_flags(conv.id), "pending_notices": pending,
    })
