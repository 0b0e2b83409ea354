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
streamed request and emits what comes. Its clients are the product's pools (modules/llm/client_pools.py: the
connections for every stream at once, in pools of at most 32, so handing one out stays cheap; one pool of
hundreds cost the relay more than the stack must). The request goes through the official client's raw streaming
response (`with_streaming_response`): SSE lines parsed with `json.loads`, the cheapest path the client offers, so
the figure is the stack's floor. The events' log is a list in memory, kept only for the driver's check (a few
hundred bytes per stream).

`--stages` makes the product's model traffic on the same floor: before the reply, one routing request (as the
product's combined routing stage: a `RoutingAgent` system prompt, its JSON answer read whole and parsed; the reply
request carries the user's message, as the product's agent gets it), and after `task_complete` one suggestion
request (a `suggestions` event when it offers any). The product makes these three requests for every reply to a
new conversation, the bare relay one, so bench/load.py can show how much of the product's distance from the bare
relay its model traffic alone accounts for.

Run: `python bench/streaming/relay.py --port P [--stages]` with OPENAI_BASE_URL, OPENAI_API_KEY, LLM_MODEL in the
environment.
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
from collections.abc import Iterator  # noqa: E402
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
    SuggestionsEvent,
    TaskCompleteEvent,
    TextChunkEvent,
    TextEndEvent,
)
from modules.llm.client_pools import ClientPools  # noqa: E402
from modules.multi_agent.routing_stage import ROUTER  # noqa: E402
from modules.statuses import SendStatus  # noqa: E402
from run import connection_capacity, keep_pool_probes_off_the_hub  # noqa: E402

MAX_STREAMS = 1000  # model connections, as the product's default LLM_MAX_CONNECTIONS: more than a bench run streams
# The openings the product's stage prompts start with (modules/multi_agent/routing_stage.py, modules/suggestions.py),
# which the scripted model answers as it answers the product's; about their length, so a request costs as much.
ROUTING_PROMPT = (f"You are {ROUTER}. Do two things in one answer. First rewrite the user's latest message into one "
                  "self-contained query, resolving references from the recent conversation, in its language. Then "
                  "choose the one agent that should handle it.\nAgents:\n- MasterAgent: answers the user.\n"
                  'Answer with JSON only: {"query": "<rewritten query>", "agent": "<name>"}. Choose MasterAgent '
                  "when no specialist fits.")
SUGGESTION_PROMPT = ("You suggest what the user may want to say next, after the assistant's reply.\nGive 1 to 4 "
                     "short suggestions in the user's language, written as the user would type them.\n"
                     'Answer with JSON only: {"questions": ["...", "..."]}')


class Relay:
    """The relay's whole state: conversation ids and each task's sent events."""

    def __init__(self, pools: ClientPools[openai.OpenAI], model: str, *, stages: bool = False) -> None:
        self.pools = pools
        self.model = model
        self.stages = stages
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

    def deltas(self, messages: list[dict[str, str]]) -> Iterator[str]:
        """The text deltas of one streamed request, each SSE line parsed by `json.loads` alone."""
        with self.pools.client() as client, client.chat.completions.with_streaming_response.create(
            model=self.model, messages=messages, stream=True,  # type: ignore[arg-type]
        ) as response:
            for line in response.iter_lines():
                if not line.startswith("data: ") or line == "data: [DONE]":
                    continue
                choices = json.loads(line[6:]).get("choices") or [{}]
                content = (choices[0].get("delta") or {}).get("content")
                if content:
                    yield content

    def ask(self, system: str, user: str) -> dict[str, Any]:
        """A stage request: its whole answer, parsed as the JSON object it is asked for ({} when it is not one)."""
        answer = "".join(self.deltas([{"role": "system", "content": system}, {"role": "user", "content": user}]))
        try:
            parsed = json.loads(answer)
        except ValueError:
            return {}
        return parsed if isinstance(parsed, dict) else {}

    def stream(self, socketio: SocketIO, cid: str, task_id: str, message: str) -> None:
        log = self.logs[task_id]

        def emit(kind: str, **fields: Any) -> None:
            data = {"task_id": task_id, "conversation_id": cid, "agent_id": "master", **fields}
            log.append({"idx": len(log), "type": kind, "data": data, "ts": time.time()})
            socketio.emit(kind, {**data, "idx": len(log) - 1}, to=cid)

        text: list[str] = []
        try:
            if self.stages:  # the answer is read and parsed, as the product's; its reply request carries the message
                self.ask(ROUTING_PROMPT, f"Recent conversation:\n(none)\n\nLatest message: {message}")
            emit(AiMessageStartEvent.TYPE)
            for content in self.deltas([{"role": "user", "content": message}]):
                text.append(content)
                emit(TextChunkEvent.TYPE, content=content)
        except (openai.OpenAIError, httpx2.HTTPError, ValueError) as exc:
            emit(ErrorEvent.TYPE, code="model_error", message=str(exc))
            return
        reply = "".join(text)
        emit(TextEndEvent.TYPE, content=reply)
        emit(TaskCompleteEvent.TYPE, has_running_sub_agents=False, has_running_background_commands=False)
        if self.stages:
            try:
                questions = self.ask(SUGGESTION_PROMPT, f"User said: {message}\n\nAssistant replied: {reply}")
            except (openai.OpenAIError, httpx2.HTTPError):
                return  # as the product: a failed suggestion request offers none
            offered = [q for q in questions.get("questions") or [] if isinstance(q, str)]
            if offered:
                emit(SuggestionsEvent.TYPE, questions=offered, message_id=task_id)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=5001)
    parser.add_argument("--database-url", help="unused: the relay stores nothing (the suite's ServerProcess passes it)")
    parser.add_argument("--stages", action="store_true",
                        help="a routing request before each reply and a suggestion request after it, as the product")
    args = parser.parse_args(argv)
    keep_pool_probes_off_the_hub()  # as the product does (run.py): without it the relay, not the stack, is measured
    timeout = float(os.environ.get("LLM_TIMEOUT_S", "60"))

    def client(connections: int) -> openai.OpenAI:
        limits = httpx2.Limits(max_connections=connections, max_keepalive_connections=connections)
        return openai.OpenAI(base_url=os.environ["OPENAI_BASE_URL"], api_key=os.environ.get("OPENAI_API_KEY", "x"),
                             http_client=openai.DefaultHttpx2Client(limits=limits, timeout=timeout), max_retries=0)

    app, socketio = Relay(ClientPools(MAX_STREAMS, client), os.environ.get("LLM_MODEL", "scripted-model"),
                          stages=args.stages).create_app()
    pool_size, _ = connection_capacity()
    socketio.run(app, host=args.host, port=args.port, log_output=False, max_size=pool_size)
    return 0


if __name__ == "__main__":
    sys.exit(main())
