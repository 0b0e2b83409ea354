"""Sending a user message: the one entry shared by `POST /api/tasks` and the socket's `send_message`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from modules.storage import agents as agent_store
from modules.storage import client_requests
from modules.storage import conversations as conversation_store
from modules.storage.messages import MessageDraft
from server.errors import ApiError, not_found
from server.runtime import Runtime
from server.tasks.models import TaskConflict

DEFAULT_TITLE = "New conversation"
TITLE_CHARS = 60


@dataclass(frozen=True)
class SendRequest:
    message: str
    conversation_id: str | None
    client_message_id: str | None


def parse_send_request(payload: Any, max_chars: int) -> SendRequest:
    if not isinstance(payload, dict):
        raise ApiError(400, "invalid_json", "the body must be a JSON object")
    message = payload.get("message")
    if not isinstance(message, str) or not message.strip():
        raise ApiError(400, "invalid_message", "`message` must be a non-empty string")
    if len(message) > max_chars:
        raise ApiError(413, "message_too_large", f"`message` is longer than {max_chars} characters")
    conversation_id = payload.get("conversation_id")
    if conversation_id is not None and (not isinstance(conversation_id, str) or not conversation_id):
        raise ApiError(400, "invalid_conversation_id", "`conversation_id` must be a string")
    client_message_id = payload.get("client_message_id")
    if client_message_id is not None and (
        not isinstance(client_message_id, str) or not 0 < len(client_message_id) <= 128
    ):
        raise ApiError(400, "invalid_client_message_id", "`client_message_id` must be a string of 1 to 128 characters")
    return SendRequest(message, conversation_id, client_message_id)


def title_from(message: str) -> str:
    line = " ".join(message.split())
    return line if len(line) <= TITLE_CHARS else line[: TITLE_CHARS - 1] + "…"


class ChatService:
    def __init__(self, rt: Runtime):
        self._rt = rt

    def send(self, user_id: int, payload: Any,
             on_conversation: Callable[[str], None] | None = None) -> dict[str, Any]:
        """Store the message and start the task that will see it; answer as `POST /api/tasks` does.

        A repeated `client_message_id` returns the first answer and stores nothing twice.
        `on_conversation` hears the conversation id before the task starts (a socket
        joins its room then, so it misses no event).
        """
        req = parse_send_request(payload, self._rt.settings.max_message_chars)
        if req.client_message_id:
            previous = client_requests.reserve(self._rt.db, user_id, req.client_message_id)
            if previous == client_requests.IN_PROGRESS:
                raise ApiError(409, "duplicate_in_progress", "a send with this client_message_id is in progress")
            if previous is not None:
                return previous
        try:
            answer = self._deliver(user_id, req, on_conversation)
        except Exception:
            if req.client_message_id:
                client_requests.release(self._rt.db, user_id, req.client_message_id)
            raise
        if req.client_message_id:
            client_requests.complete(self._rt.db, user_id, req.client_message_id, answer)
        return answer

    def _deliver(self, user_id: int, req: SendRequest,
                 on_conversation: Callable[[str], None] | None) -> dict[str, Any]:
        rt = self._rt
        if req.conversation_id is None:
            conv, _ = conversation_store.create_conversation(rt.db, user_id, title_from(req.message))
        else:
            conv = conversation_store.get_conversation(rt.db, req.conversation_id, user_id)
            if conv is None:
                raise not_found("conversation")
            if conv.title == DEFAULT_TITLE:
                conversation_store.touch_conversation(rt.db, conv.id, title=title_from(req.message))
            else:
                conversation_store.touch_conversation(rt.db, conv.id)
        if on_conversation is not None:
            on_conversation(conv.id)
        master = agent_store.get_master(rt.db, conv.id)
        draft = MessageDraft(role="user", content=req.message,
                             meta={"source": "user", "visibility": "chat", "starts_work": True,
                                   "client_message_id": req.client_message_id})
        try:
            task = rt.tasks.create_chat_task(conversation_id=conv.id, agent_id=master.id, trigger=draft)
        except TaskConflict as exc:
            raise ApiError(409, "task_running", f"{exc}; wait for it or cancel it first") from exc
        return {
            "success": True, "task_id": task.id, "conversation_id": conv.id, "message_id": draft.message_id,
            "agent_id": master.id, "route": "pipeline", "delivery": "triggered_new_turn",
        }
