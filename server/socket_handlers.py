"""Socket.IO surface (API.md): connect with a token, join a conversation's room, send, stop.

One Flask-SocketIO `Namespace` class, `ChatNamespace`: each `on_<event>` method handles that event.
Acknowledgements carry the same answers as the REST calls, errors included.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import Any

from flask import request
from flask_socketio import Namespace, join_room
from sqlalchemy.exc import InterfaceError, OperationalError

from modules.domain_errors import DomainError, Unauthorized
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

log = logging.getLogger(__name__)

Ack = dict[str, Any]  # an acknowledgement: a REST call's answer, or its error body with `status`
EventHandler = Callable[["ChatNamespace", Any], Ack]


def _sid() -> str:
    """The Socket.IO session of the event being handled, which Flask-SocketIO sets on Flask's request."""
    sid: str = request.sid  # type: ignore[attr-defined]  # not in Flask's Request type
    return sid


def acked(fn: EventHandler) -> Callable[..., Ack]:
    """Run a handler on the event's one argument and turn a refusal into an error acknowledgement.

    Every call is acknowledged: an event sent with several arguments (python-socketio sends a tuple
    as several) answers `invalid_json` rather than failing before the handler runs, unanswered."""
    @functools.wraps(fn)
    def wrapper(self: ChatNamespace, *args: Any) -> Ack:
        rt = self.rt
        try:
            if len(args) > 1:
                raise ApiError(400, "invalid_json", f"expected one JSON object argument, got {len(args)}")
            if not rt.db.health.available:
                return {**unavailable_body(), "status": 503}
            rate_limits.check(rt.rate_limiter, rt.settings, rate_limits.SOCKET_EVENTS, self._user_id())
            data = args[0] if args else None
            return fn(self, data if data is not None else {})
        except (ApiError, DomainError) as err:
            refusal = api_error(err) if isinstance(err, DomainError) else err
            return {**refusal.body(), "status": refusal.status}
        except (OperationalError, InterfaceError):
            return {**unavailable_body(), "status": 503}
        except Exception:
            log.exception("socket handler %s failed", fn.__name__)
            return {"success": False, "error": "internal server error", "code": "internal_error", "status": 500}
    return wrapper


class ChatNamespace(Namespace):  # type: ignore[misc]  # Flask-SocketIO ships no type information
    """The default namespace, `/`: the user of each connected socket, and one method per event."""

    def __init__(self, rt: Runtime, auth: Authenticator, chat: ChatService):
        super().__init__("/")
        self.rt, self._auth, self._chat = rt, auth, chat
        self.users: dict[str, int] = {}
        # Sockets that connected while the database was away: their user's id is read at their first event.
        self._unread: dict[str, str] = {}

    def _user_id(self) -> int:
        sid = _sid()
        uid = self.users.get(sid)
        if uid is None:
            name = self._unread.get(sid)
            if name is None:
                raise ApiError(401, "unauthorized", "connect with a valid token first")
            uid = self.users[sid] = self._auth.user_id_of(name)  # the database away: 503 (`acked`)
            self._unread.pop(sid, None)
        return uid

    def on_connect(self, auth_data: Any = None) -> None:
        """The token is checked without the database, so a socket that connects while it is away is let in and
        told so (`server_degraded`, README "During an outage"); its user's id is read once it is back."""
        rt = self.rt
        token = auth_data.get("token") if isinstance(auth_data, dict) else None
        token = token or bearer_token(request.headers.get("Authorization"))
        try:
            name = self._auth.user_name_for(token)
        except Unauthorized as err:
            raise ConnectionRefusedError(err.message) from None
        try:
            self.users[_sid()] = self._auth.user_id_of(name)
        except (OperationalError, InterfaceError):
            self._unread[_sid()] = name
        rt.metrics.sockets.set(len(self.users) + len(self._unread))
        if not rt.db.health.available:  # it joined during an outage: it hears of it as the others did
            self.socketio.emit(*status_event(rt.db), to=_sid())

    def on_disconnect(self, *_args: Any) -> None:
        self.users.pop(_sid(), None)
        self._unread.pop(_sid(), None)
        self.rt.metrics.sockets.set(len(self.users) + len(self._unread))

    @acked
    def on_join_conversation(self, data: Any) -> Ack:
        rt = self.rt
        if not isinstance(data, dict):
            raise ApiError(400, "invalid_json", "expected an object with `conversation_id`")
        conv = owned_conversation(data.get("conversation_id"), self._user_id())
        join_room(conv.id)
        master = agent_store.get_master(rt.db, conv.id)
        return {"success": True, "conversation_id": conv.id, "main_task_id": rt.tasks.active_task_of_agent(master.id)}

    @acked
    def on_send_message(self, data: Any) -> Ack:
        sid = _sid()
        uid = self._user_id()
        req = validated(SendMessageBody, data, context=validation_context(self.rt.settings))
        return wire(self._chat.send(uid, req, on_conversation=lambda cid: join_room(cid, sid=sid)))

    @acked
    def on_stop_task(self, data: Any) -> Ack:
        if not isinstance(data, dict):
            raise ApiError(400, "invalid_json", "expected an object with `task_id`")
        task = work_control.stop_task(data.get("task_id"), self._user_id())
        return {"success": True, "task_id": task.id, "stopping": True}

    @acked
    def on__undecodable_event(self, _data: Any) -> Ack:
        """`server.socket_packets.UNDECODABLE_EVENT`, `_undecodable_event`: Flask-SocketIO calls `on_` + its name."""
        raise ApiError(400, "invalid_json", "the event's arguments nest too deeply to decode")

