"""A bare relay: what Flask-SocketIO, eventlet and the official openai client can stream on one process.

`bench/load.py` runs it beside the product (issue 26), against the same scripted model and the same Node
driver, so the product's figures can be judged against the stack's own limit. It speaks only the subset of
the product's protocol (docs/API.md) that bench/load_driver.cjs uses:

- `POST /api/conversations` -> 201 `{conversation_id}` (an id, nothing stored beyond a set of ids);
- socket `join_conversation {conversation_id}` -> the room, ack `{success: true}`;
- socket `send_message {conversation_id, message}` -> ack, then to the room `ai_message_start`, one
  `text_chunk` per model delta, `text_end`, `task_complete`, each with `task_id`, `conversation_id`,
  `agent_id` and `idx`;
- `GET /api/tasks/<task_id>?from=N` -> the events it sent, so the driver's loss check runs unchanged.

No database, routing, history, agent states or flushing window: one green thread per message opens one
streamed request on one shared client (connection limits sized for every stream at once) and emits what
comes. The request goes through the official client's raw streaming response (`with_streaming_response`):
SSE lines parsed with `json.loads`, the cheapest path the client offers, so the figure is the stack's floor.
The events' log is a list in memory, kept only for the driver's check (a few hundred bytes per stream).

Run: `python bench/streaming/relay.py --port P` with OPENAI_BASE_URL, OPENAI_API_KEY, LLM_MODEL in the environment.
"""

from __future__ import annotations

import eventlet

eventlet.monkey_patch()

import argparse  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
import uuid  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import httpx2  # noqa: E402 (the openai client's HTTP library)
import openai  # noqa: E402
from flask import Flask, jsonify, request  # noqa: E402
from flask_socketio import SocketIO, join_room  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # `python bench/streaming/relay.py` puts bench/streaming/ first, not the project
    sys.path.insert(0, str(ROOT))

from modules.event_catalogue import (  # noqa: E402
    AiMessageStartEvent,
    ErrorEvent,
    TaskCompleteEvent,
    TextChunkEvent,
    TextEndEvent,
)
from modules.statuses import SendStatus  # noqa: E402
from run import connection_capacity, keep_pool_probes_off_the_hub  # noqa: E402

MAX_STREAMS = 2000  # connections the shared client keeps: more than any bench run streams at once


class Relay:
    """The relay's whole state: conversation ids and each task's sent events."""

    def __init__(self, client: openai.OpenAI, model: str) -> None:
        self.client = client
        self.model = model
        self.conversations: set[str] = set()
        self.logs: dict[str, list[dict[str, Any]]] = {}

    def create_app(self) -> tuple[Flask, SocketIO]:
        app = Flask(__name__)
        socketio = SocketIO(app, async_mode="eventlet")

        @app.get("/healthz")
        def healthz():
            return jsonify(status="ok")

        @app.post("/api/conversations")
        def create_conversation():
            cid = uuid.uuid4().hex
            self.conversations.add(cid)
            return jsonify(conversation_id=cid), 201

        @app.get("/api/tasks/<task_id>")
        def task_log(task_id: str):
            events = self.logs.get(task_id)
            if events is None:
                return jsonify(success=False, code="not_found", error="no such task"), 404
            start = max(0, request.args.get("from", 0, type=int))
            return jsonify(task_id=task_id, events=events[start:], next_offset=len(events))

        @socketio.on("join_conversation")
        def on_join(data: Any):
            cid = data.get("conversation_id") if isinstance(data, dict) else None
            if cid not in self.conversations:
                return {"success": False, "code": "not_found", "error": "no such conversation", "status": 404}
            join_room(cid)
            return {"success": True, "conversation_id": cid}

        @socketio.on("send_message")
        def on_send(data: Any):
            cid = data.get("conversation_id") if isinstance(data, dict) else None
            message = data.get("message") if isinstance(data, dict) else None
            if cid not in self.conversations or not isinstance(message, str):
                return {"success": False, "code": "invalid_request", "error": "conversation_id and message",
                        "status": 400}
            task_id = uuid.uuid4().hex
            self.logs[task_id] = []
            socketio.start_background_task(self.stream, socketio, cid, task_id, message)
            return {"success": True, "conversation_id": cid, "status": SendStatus.ROUTING, "task_id": task_id}

        return app, socketio

    def stream(self, socketio: SocketIO, cid: str, task_id: str, message: str) -> None:
        log = self.logs[task_id]

        def emit(kind: str, **fields: Any) -> None:
            data = {"task_id": task_id, "conversation_id": cid, "agent_id": "master", **fields}
            log.append({"idx": len(log), "type": kind, "data": data, "ts": time.time()})
            socketio.emit(kind, {**data, "idx": len(log) - 1}, to=cid)

        emit(AiMessageStartEvent.TYPE)
        text: list[str] = []
        try:
            with self.client.chat.completions.with_streaming_response.create(
                model=self.model, messages=[{"role": "user", "content": message}], stream=True,
            ) as response:
                for line in response.iter_lines():
                    if not line.startswith("data: ") or line == "data: [DONE]":
                        continue
                    choices = json.loads(line[6:]).get("choices") or [{}]
                    content = (choices[0].get("delta") or {}).get("content")
                    if content:
                        text.append(content)
                        emit(TextChunkEvent.TYPE, content=content)
        except (openai.OpenAIError, httpx2.HTTPError, ValueError) as exc:
            emit(ErrorEvent.TYPE, code="model_error", message=str(exc))
            return
        emit(TextEndEvent.TYPE, content="".join(text))
        emit(TaskCompleteEvent.TYPE, has_running_sub_agents=False, has_running_background_commands=False)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=5001)
    parser.add_argument("--database-url", help="unused: the relay stores nothing (the suite's ServerProcess passes it)")
    args = parser.parse_args(argv)
    keep_pool_probes_off_the_hub()  # as the product does (run.py): without it the relay, not the stack, is measured
    limits = httpx2.Limits(max_connections=MAX_STREAMS, max_keepalive_connections=MAX_STREAMS)
    http = openai.DefaultHttpx2Client(limits=limits, timeout=float(os.environ.get("LLM_TIMEOUT_S", "60")))
    client = openai.OpenAI(base_url=os.environ["OPENAI_BASE_URL"], api_key=os.environ.get("OPENAI_API_KEY", "x"),
                           http_client=http, max_retries=0)
    app, socketio = Relay(client, os.environ.get("LLM_MODEL", "scripted-model")).create_app()
    pool_size, _ = connection_capacity()
    socketio.run(app, host=args.host, port=args.port, log_output=False, max_size=pool_size)
    return 0


if __name__ == "__main__":
    sys.exit(main())
