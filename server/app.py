"""The app factory: builds the runtime once and wires REST, Socket.IO and the static front end; building starts
no thread, `ChatServer.start` starts the process's background work (docs/ARCHITECTURE.md, "Layers")."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from flask import Flask
from flask.json.provider import DefaultJSONProvider
from flask_socketio import SocketIO

from modules.agents.profiles import load_profiles
from modules.config import Settings
from modules.llm import build_chat_model
from modules.multi_agent.fast_path import load_routing_signals
from modules.peer_signals import CANCEL_COMMAND, QUEUED, STOP, scoped_channel
from modules.storage.db import Database
from modules.storage.health import HealthChange
from modules.tools.agent_tools import AGENT_TOOLS
from modules.tools.registry import ToolRegistry
from modules.tools.run_command import RUN_COMMAND
from modules.tools.sandbox import build_sandbox
from server import outage
from server.api import (
    background,
    conversation_admin,
    conversations,
    export,
    health,
    messages,
    metrics,
    openapi,
    queued,
    tasks,
    turn_versions,
    usage,
    workspace_files,
)
from server.auth import Authenticator
from server.chat_service import ChatService
from server.errors import register_error_handlers
from server.host_guard import HostGuard, own_names
from server.runtime import Runtime
from server.security_headers import SecurityHeaders
from server.sender import SocketIOTransport
from server.socket_compression import DeclineWebSocketCompression
from server.socket_handlers import ChatNamespace
from server.socket_packets import TolerantPacket
from server.socket_queue import BatchedRedisManager
from server.static_files import register_frontend

log = logging.getLogger(__name__)


def build_tools() -> ToolRegistry:
    return ToolRegistry([RUN_COMMAND, *AGENT_TOOLS])


@dataclass(frozen=True)
class ChatServer:
    """A built server process: its Flask app, its Socket.IO server and the runtime under them, no thread
    started yet; `start` starts its background work (run.py does, before serving). Tests build one and use
    Flask's and Flask-SocketIO's test clients on it without anything running behind their backs."""

    app: Flask
    socketio: SocketIO
    runtime: Runtime
    chat: ChatService

    def start(self) -> None:
        """The process's background work: peer signals, the database prober, the recovery of what a stopped
        process left (its tasks, its held messages) and the membership loop."""
        rt, spawn = self.runtime, self.runtime.spawn
        rt.peers.start(spawn)
        spawn(rt.db.health.run)
        recovered = rt.membership.take_over(rt.tasks)
        if recovered:
            log.warning("marked %d task(s) of a stopped server process as failed", recovered)
        spawn(rt.membership.run, rt.tasks, rt.commands)
        self.chat.inbox.resume()


def create_app(settings: Settings, *, async_mode: str | None = None) -> ChatServer:
    """Build the process (migrating its database first); nothing runs until `ChatServer.start`."""
    logging.getLogger("alembic").setLevel(logging.WARNING)
    db = Database(settings.database_url, timeout_s=settings.db_timeout_s, pool_size=settings.db_pool_size,
                  pool_overflow=settings.db_pool_overflow)
    db.migrate()
    # Several processes share their emits through Redis, in batches (server/socket_queue.py).
    queue = ({"client_manager": BatchedRedisManager(settings.redis_url,
                                                    scoped_channel("flask-socketio", settings.redis_url))}
             if settings.redis_url else {})
    socketio = SocketIO(async_mode=async_mode, json=None, serializer=TolerantPacket, **queue)
    model = build_chat_model(
        api_key=settings.openai_api_key, base_url=settings.openai_base_url, default_model=settings.llm_model,
        timeout_s=settings.llm_timeout_s, demo_chunk_delay_s=settings.demo_chunk_delay_s,
        max_retries=settings.llm_max_retries, backoff_base_s=settings.llm_backoff_base_s,
        max_connections=settings.llm_max_connections,
        on_retry=lambda attempt, err, delay: log.warning(
            "model call failed (%s: %s); retry %d in %.2f s", err.code, err, attempt, delay),
    )
    tools = build_tools()
    profiles = load_profiles(settings.agent_profiles_path, set(tools.names()))
    spawn = socketio.start_background_task
    sandbox = build_sandbox(settings)
    (log.info if sandbox.active else log.warning)(sandbox.status_line())
    rt = Runtime(settings=settings, db=db, model=model, tools=tools, profiles=profiles, sandbox=sandbox,
                 transport=SocketIOTransport(socketio), spawn=spawn,
                 signals=load_routing_signals(settings.routing_signals_path))
    peers = rt.peers
    peers.subscribe(QUEUED, rt.router.on_peer_queued)
    peers.subscribe(STOP, lambda task_id: rt.tasks.apply_stop_requests())
    peers.subscribe(CANCEL_COMMAND, lambda command_id: rt.commands.apply_cancel_requests())
    # The database is back: end what died meanwhile and start the turns of what queued up, now.
    def sweep_when_back(change: HealthChange) -> None:
        if change.available:
            spawn(_sweep, rt)
        else:
            rt.metrics.outages.inc()

    db.health.subscribe(sweep_when_back)

    app = Flask(__name__, static_folder=None)
    app.config["MAX_CONTENT_LENGTH"] = settings.max_request_bytes
    if isinstance(app.json, DefaultJSONProvider):  # Flask's own, unless an extension replaced it
        app.json.sort_keys = False
    auth = Authenticator(settings, db)
    chat = ChatService(rt)
    app.extensions.update(chat_runtime=rt, chat_auth=auth, chat_service=chat)
    register_error_handlers(app)
    outage.install(app, socketio, db)
    for bp in (conversations.bp, conversation_admin.bp, workspace_files.bp, export.bp, tasks.bp, background.bp,
               queued.bp, health.bp, messages.bp, usage.bp, metrics.bp, turn_versions.bp,
               openapi.bp):
        app.register_blueprint(bp)
    register_frontend(app, settings.frontend_dir)
    socketio.init_app(app)
    socketio.on_namespace(ChatNamespace(rt, auth, chat))
    if not settings.auth_required:
        # Flask's documented way to wrap its WSGI app in middleware; its typing declares wsgi_app a method.
        guarded = HostGuard(app.wsgi_app, own_names(settings.host, settings.allowed_hosts))
        app.wsgi_app = guarded  # type: ignore[method-assign]
    app.wsgi_app = DeclineWebSocketCompression(app.wsgi_app)  # type: ignore[method-assign]
    app.wsgi_app = SecurityHeaders(app.wsgi_app)  # type: ignore[method-assign]
    db.health.subscribe(lambda _change: chat.inbox.resume() if db.health.available else None)
    # First: it never raises, so a take-over step failing after it cannot skip it.
    rt.membership.on_take_over(rt.services.foreground.delete_leftovers)
    rt.membership.on_take_over(chat.inbox.take_over)
    return ChatServer(app, socketio, rt, chat)


def _sweep(rt: Runtime) -> None:
    try:
        rt.membership.take_over(rt.tasks)
    except Exception:
        log.exception("the sweep after the database came back failed; the membership loop retries")
