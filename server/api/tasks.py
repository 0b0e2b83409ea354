"""`/api/tasks`: send a message, list tasks, read a task's durable event log, cancel."""

from __future__ import annotations

from flask import Blueprint, current_app

from modules.storage import tasks as task_store
from server import work_control
from server.api import response_models as out
from server.api.context import owned_conversation, owned_task, runtime
from server.api.endpoint import endpoint
from server.api.request_models import SendMessageBody, TaskEventsQuery, TaskListQuery
from server.api.serializers import task_detail, task_out

bp = Blueprint("tasks", __name__, url_prefix="/api/tasks")

MAX_EVENTS_PER_PAGE = 5000


@bp.post("")
@endpoint({202: out.SendAccepted, 429: out.BudgetExceededBody}, errors=(404, 409), body=SendMessageBody)
def send_message(body: SendMessageBody, user_id: int) -> tuple[out.SendAccepted, int]:
    """Send a user message.

    It is committed to its receiver's queue before this answers; `route` and `delivery` say where it went."""
    return current_app.extensions["chat_service"].send(user_id, body), 202


@bp.get("")
@endpoint({200: out.TaskList}, errors=(400, 404), query=TaskListQuery)
def list_tasks(query: TaskListQuery, user_id: int) -> out.TaskList:
    """Every task of the conversation, of every agent, oldest first."""
    conv = owned_conversation(query.conversation_id, user_id)
    tasks = task_store.list_tasks(runtime().db, conv.id, active_only=query.status == "active")
    return out.TaskList(data=[task_out(t) for t in tasks])


@bp.get("/<task_id>")
@endpoint({200: out.TaskDetail}, errors=(400, 404), query=TaskEventsQuery)
def get_task(task_id: str, query: TaskEventsQuery, user_id: int) -> out.TaskDetail:
    """A task with its durable event log from offset `from`."""
    task = owned_task(task_id, user_id)
    events = task_store.list_events(runtime().db, task.id, query.offset, MAX_EVENTS_PER_PAGE)
    next_offset = events[-1].idx + 1 if events else query.offset
    return task_detail(task, events, next_offset)


@bp.post("/<task_id>/cancel")
@endpoint({200: out.TaskStopping}, errors=(404, 409))
def cancel_task(task_id: str, user_id: int) -> out.TaskStopping:
    """Stop the task; every open tool call gets a result, so the history stays valid."""
    return out.TaskStopping(task_id=work_control.stop_task(task_id, user_id).id)
