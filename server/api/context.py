"""Per-request access to the runtime and the caller, and JSON body parsing."""

from __future__ import annotations

from typing import Any

from flask import current_app, request

from modules.storage import conversations as conversation_store
from modules.storage.models import Conversation
from server.auth import Authenticator, bearer_token
from server.errors import ApiError, not_found
from server.runtime import Runtime


def runtime() -> Runtime:
    return current_app.extensions["chat_runtime"]


def current_user_id() -> int:
    auth: Authenticator = current_app.extensions["chat_auth"]
    return auth.user_id_for(bearer_token(request.headers.get("Authorization")))


def owned_conversation(conversation_id: str, user_id: int) -> Conversation:
    """The caller's conversation; another user's answers 404 like a missing one."""
    conv = conversation_store.get_conversation(runtime().db, conversation_id, user_id)
    if conv is None:
        raise not_found("conversation")
    return conv


def json_body(*, required: bool = True) -> Any:
    if not request.get_data(cache=True):
        if required:
            raise ApiError(400, "invalid_json", "the body must be a JSON object")
        return {}
    payload = request.get_json(silent=True)
    if payload is None:
        raise ApiError(400, "invalid_json", "the body is not valid JSON")
    if not isinstance(payload, dict):
        raise ApiError(400, "invalid_json", "the body must be a JSON object")
    return payload
