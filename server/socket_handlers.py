"""Socket.IO surface (API.md): connect with a token, join a conversation's room, send, stop.

Acknowledgements carry the same answers as the REST calls, errors included.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, TypeVar

from flask import request
from flask_socketio import SocketIO, join_room
from sqlalchemy.exc import InterfaceError, OperationalError

from modules.domain_errors import DomainError
from modules.storage import agents as agent_store
from server import rate_limits, work_control
from server.api.context import owned_conversation
from server.api.request_models import SendMessageBody, validation_context
from server.api.validation import validated, wire
from server.auth import Authenticator, bearer_token
from server.chat_service import ChatService
from server.errors import ApiError, api_error
from server.outage import status_event, unavailable_body
from server.runtime import Runtime
from server.socket_packets import UNDECODABLE_EVENT

log = logging.getLogger(__name__)

Handler = TypeVar("Handler", bound=Callable[..., Any])
Ack = dict[str, Any]  # an acknowledgement: a REST call's answer, or its error body with `status`


def _on(socketio: SocketIO, event: str) -> Callable[[Handler], Handler]:
    """`socketio.on(event)`, typed: Flask-SocketIO ships no type information."""
    register: Callable[[Handler], Handler] = socketio.on(event)
    return register


def _sid() -> str:
    """The Socket.IO session of the event being handled, which Flask-SocketIO sets on Flask's request."""
    sid: str = request.sid  # type: ignore[attr-defined]  # not in Flask's Request type
    return sid


def register_socket_handlers(socketio: SocketIO, rt: Runtime, auth: Authenticator, chat: ChatService) -> None:
    users: dict[str, int] = {}

    def user_id() -> int:
        uid = users.get(_sid())
        if uid is None:
            raise ApiError(401, "unauthorized", "connect with a valid token first")
        return uid

    def acked(fn: Callable[[Any], Ack]) -> Callable[..., Ack]:
        """Run a handler on the event's one argument and turn an ApiError into an error acknowledgement.

        Every call is acknowledged: an event sent with several arguments (python-socketio sends a tuple
        as several) answers `invalid_json` rather than failing before the handler runs, unanswered."""
        def wrapper(*args: Any) -> Ack:
            try:
                if len(args) > 1:
                    raise ApiError(400, "invalid_json", f"expected one JSON object argument, got {len(args)}")
                if not rt.db.health.available:
                    return {**unavailable_body(), "status": 503}
                uid = users.get(_sid())
                if uid is not None:
                    rate_limits.check(rt.rate_limiter, rt.settings, rate_limits.SOCKET_EVENTS, uid)
                data = args[0] if args else None
                return fn(data if data is not None else {})
            except ApiError as err:
                return {**err.body(), "status": err.status}
            except DomainError as err:
                refusal = api_error(err)
                return {**refusal.body(), "status": refusal.status}
            except (OperationalError, InterfaceError):
                return {**unavailable_body(), "status": 503}
            except Exception:
                log.exception("socket handler %s failed", fn.__name__)
                return {"success": False, "error": "internal server error", "code": "internal_error", "status": 500}
        wrapper.__name__ = fn.__name__
        return wrapper

    @_on(socketio, "connect")
    def on_connect(auth_data: Any = None) -> None:
        token = auth_data.get("token") if isinstance(auth_data, dict) else None
        token = token or bearer_token(request.headers.get("Authorization"))
        try:
            users[_sid()] = auth.user_id_for(token)
        except ApiError as err:
            raise ConnectionRefusedError(err.message) from None
        rt.metrics.sockets.set(len(users))
        if not rt.db.health.available:  # it joined during an outage: it hears of it as the others did
            socketio.emit(*status_event(rt.db), to=_sid())

    @_on(socketio, "disconnect")
    def on_disconnect(*_args: Any) -> None:
        users.pop(_sid(), None)
        rt.metrics.sockets.set(len(users))

    @_on(socketio, "join_conversation")
    @acked
    def on_join(data: Any) -> Ack:
        if not isinstance(data, dict):
            raise ApiError(400, "invalid_json", "expected an object with `conversation_id`")
        conv = owned_conversation(data.get("conversation_id"), user_id())
        join_room(conv.id)
        master = agent_store.get_master(rt.db, conv.id)
        return {"success": True, "conversation_id": conv.id, "main_task_id": rt.tasks.active_task_of_agent(master.id)}

    @_on(socketio, "send_message")
    @acked
    def on_send(data: Any) -> Ack:
        sid = _sid()
        uid = user_id()
        req = validated(SendMessageBody, data, context=validation_context(rt.settings))
        return wire(chat.send(uid, req, on_conversation=lambda cid: join_room(cid, sid=sid)))

    @_on(socketio, "stop_task")
    @acked
    def on_stop(data: Any) -> Ack:
        task = work_control.stop_task(data.get("task_id") if isinstance(data, dict) else None, user_id())
        return {"success": True, "task_id": task.id, "stopping": True}

    @_on(socketio, UNDECODABLE_EVENT)
    @acked
    def on_undecodable(_data: Any) -> Ack:
        raise ApiError(400, "invalid_json", "the event's arguments nest too deeply to decode")
