"""Per-request access to the runtime and the caller, JSON body parsing, and the one way a client's id
reaches the database (REST and Socket.IO alike)."""

from __future__ import annotations

from typing import Any

from flask import current_app, request

from modules.storage import agents as agent_store
from modules.storage import conversations as conversation_store
from modules.storage import tasks as task_store
from modules.storage.models import Agent, BackgroundCommand, Conversation, Task
from server.api.validation import storable
from server.auth import Authenticator, bearer_token
from server.errors import ApiError, not_found
from server.runtime import Runtime


def runtime() -> Runtime:
    rt: Runtime = current_app.extensions["chat_runtime"]
    return rt


def current_user_id() -> int:
    auth: Authenticator = current_app.extensions["chat_auth"]
    return auth.user_id_for(bearer_token(request.headers.get("Authorization")))


def lookup_id(value: Any) -> str | None:
    """The client's id when a row could have it, else None, which the caller answers like a missing row.

    Ids are the server's UUIDs; a NUL byte or a lone surrogate is in none of them, and asking the database
    anyway fails on PostgreSQL ("cannot contain NUL", a 500) where SQLite just finds nothing."""
    return value if isinstance(value, str) and storable(value) else None


def owned_conversation(conversation_id: Any, user_id: int) -> Conversation:
    """The caller's conversation; another user's answers 404 like a missing one."""
    cid = lookup_id(conversation_id)
    conv = conversation_store.get_conversation(runtime().db, cid, user_id) if cid else None
    if conv is None:
        raise not_found("conversation")
    return conv


def owned_task(task_id: Any, user_id: int) -> Task:
    tid = lookup_id(task_id)
    task = task_store.get_task(runtime().db, tid) if tid else None
    if task is None:
        raise not_found("task")
    owned_conversation(task.conversation_id, user_id)
    return task


def owned_sub_agent(agent_id: Any, user_id: int) -> Agent:
    aid = lookup_id(agent_id)
    agent = agent_store.get_agent(runtime().db, aid) if aid else None
    if agent is None or agent.kind != "sub_agent":
        raise not_found("sub-agent")
    owned_conversation(agent.conversation_id, user_id)
    return agent


def owned_command(command_id: Any, user_id: int) -> BackgroundCommand:
    cid = lookup_id(command_id)
    cmd = runtime().commands.get(cid) if cid else None
    if cmd is None:
        raise not_found("background command")
    owned_conversation(cmd.conversation_id, user_id)
    return cmd


def conversation_agent(conv: Conversation, ref: str | None) -> Agent:
    """An agent of the conversation by id or display name; no `ref`: its master."""
    db = runtime().db
    if not ref:
        return agent_store.get_master(db, conv.id)
    found = lookup_id(ref)
    agent = agent_store.find_agent(db, conv.id, found) if found else None
    if agent is None:
        raise not_found("agent")
    return agent


def json_body(*, required: bool = True) -> Any:
    if not request.get_data(cache=True):
        if required:
            raise ApiError(400, "invalid_json", "the body must be a JSON object")
        return {}
    try:
        payload = request.get_json(silent=True)
    except RecursionError:
        raise ApiError(400, "invalid_json", "the body nests too deeply") from None
    if payload is None:
        raise ApiError(400, "invalid_json", "the body is not valid JSON")
    return payload
