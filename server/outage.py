"""What clients see while the database is away: a 503 with a code at once, and a socket event each way.

The database's prober (modules/storage/health.py) decides whether it answers;
while it does not, API calls answer 503 `database_unavailable` without waiting
out a timeout each, and every socket client hears `server_degraded`, then
`server_recovered` once it answers again. Nothing needs a restart: the pool
reconnects, and stuck work is retried or ended (server/turns/).
"""

from __future__ import annotations

import logging
from typing import Any, Final

from flask import Flask, Response, jsonify, request
from flask_socketio import SocketIO
from sqlalchemy.exc import InterfaceError, OperationalError

from modules.event_catalogue import Event, ServerDegradedEvent, ServerRecoveredEvent
from modules.storage.db import Database
from modules.storage.health import HealthChange

log = logging.getLogger(__name__)

DATABASE_UNAVAILABLE: Final = "database_unavailable"


def unavailable_body() -> dict[str, Any]:
    return {"success": False, "error": "the database is unavailable; try again shortly", "code": DATABASE_UNAVAILABLE}


def status_event(db: Database) -> tuple[str, dict[str, Any]]:
    """The event that tells a socket client the server's current state."""
    health = db.health
    event: Event = ServerRecoveredEvent(database="available", since=health.since) if health.available else \
        ServerDegradedEvent(code=DATABASE_UNAVAILABLE, database="unavailable", since=health.since,
                            message="the database is unavailable: messages cannot be stored until it is back")
    return event.TYPE, event.data()


def install(app: Flask, socketio: SocketIO, db: Database) -> None:
    """Wire the 503s and the socket events; the database's prober (`db.health.run`) starts with the server."""

    @app.before_request
    def _fail_fast() -> tuple[Response, int] | None:
        if request.path.startswith("/api/") and not db.health.available:
            return jsonify(unavailable_body()), 503
        return None

    def _unavailable(err: Exception) -> tuple[Response, int]:
        log.warning("%s %s: the database is unavailable (%s)", request.method, request.path,
                    str(err).splitlines()[0] if str(err) else type(err).__name__)
        return jsonify(unavailable_body()), 503

    app.register_error_handler(OperationalError, _unavailable)
    app.register_error_handler(InterfaceError, _unavailable)

    def _broadcast(_change: HealthChange) -> None:
        name, data = status_event(db)
        socketio.emit(name, data)

    db.health.subscribe(_broadcast)
