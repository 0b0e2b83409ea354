"""`/api/tasks`: send a message, list tasks, read a task's durable event log, cancel."""

from __future__ import annotations

from flask import Blueprint, current_app, jsonify, request

from modules.storage import tasks as task_store
from server.api.context import current_user_id, json_body, owned_conversation, runtime
from server.api.serializers import event_json, task_json
from server.errors import ApiError, not_found

bp = Blueprint("tasks", __name__, url_prefix="/api/tasks")

MAX_EVENTS_PER_PAGE = 5000
MAX_OFFSET = 2**31 - 1


def _owned_task(task_id: str, user_id: int):
    task = task_store.get_task(runtime().db, task_id)
    if task is None:
        raise not_found("task")
    owned_conversation(task.conversation_id, user_id)
    return task


@bp.post("")
def send_message():
    user_id = current_user_id()
    answer = current_app.extensions["chat_service"].send(user_id, json_body())
    return jsonify(answer), 202


@bp.get("")
def list_tasks():
    user_id = current_user_id()
    cid = request.args.get("conversation_id")
    if not cid:
        raise ApiError(400, "missing_conversation_id", "`conversation_id` query parameter is required")
    conv = owned_conversation(cid, user_id)
    status = request.args.get("status")
    if status not in (None, "", "active"):
        raise ApiError(400, "invalid_status", "`status` may only be `active`")
    tasks = task_store.list_tasks(runtime().db, conv.id, active_only=status == "active")
    return jsonify({"success": True, "data": [task_json(t) for t in tasks]})


@bp.get("/<task_id>")
def get_task(task_id: str):
    task = _owned_task(task_id, current_user_id())
    raw = request.args.get("from", "0")
    try:
        offset = int(raw)
    except ValueError:
        raise ApiError(400, "invalid_offset", "`from` must be a non-negative integer") from None
    if not 0 <= offset <= MAX_OFFSET:
        raise ApiError(400, "invalid_offset", f"`from` must be an integer from 0 to {MAX_OFFSET}")
    events = task_store.list_events(runtime().db, task.id, offset, MAX_EVENTS_PER_PAGE)
    next_offset = events[-1].idx + 1 if events else offset
    return jsonify({"success": True, **task_json(task), "events": [event_json(e) for e in events],
                    "next_offset": next_offset})


@bp.post("/<task_id>/cancel")
def cancel_task(task_id: str):
    task = _owned_task(task_id, current_user_id())
    if not runtime().tasks.stop(task.id):
        raise ApiError(409, "task_not_running", f"task {task.id} is already {task.status}")
    return jsonify({"success": True, "task_id": task.id, "stopping": True})
