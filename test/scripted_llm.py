"""A scripted OpenAI-compatible HTTP server for tests and benchmarks.

It speaks the real wire format (SSE streaming, tool-call deltas, OpenAI error bodies)
so the production client code runs unchanged against it. It uses stdlib threads, not
eventlet, because it lives in the pytest process while the server under test runs in
another process.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self

from test.scripted_steps import (  # re-exported: tests import the script's builders from here
    MAX_WAIT_S,
    STAGE_MARKERS,
    DynamicStep,
    ErrorStep,
    HangStep,
    JsonBodyStep,
    Match,
    RawChunksStep,
    Step,
    StepUsage,
    TextStep,
    ToolCallsStep,
    broken_stream,
    dynamic,
    error,
    hang,
    is_stage_request,
    match_last_user,
    match_model,
    match_system,
    stage_default,
    text,
    text_of,
    tool_calls,
)

__all__ = [
    "ScriptedLLMServer", "RecordedRequest", "MAX_WAIT_S", "TextStep", "ToolCallsStep", "ErrorStep",
    "HangStep", "DynamicStep", "Step", "StepUsage", "Match", "text", "broken_stream", "tool_calls", "error", "hang",
    "dynamic", "STAGE_MARKERS", "is_stage_request", "stage_default", "match_system", "match_last_user",
    "match_model", "RawChunksStep", "JsonBodyStep",
]

@dataclass
class RecordedRequest:
    body: dict
    headers: dict[str, str]  # lower-cased names
    received_at: float  # time.monotonic()
    step: Step
    tool_call_ids: list[str] = field(default_factory=list)  # ids served for a ToolCallsStep
    received_wall: float = field(default_factory=time.time)  # time.time() at receipt (set at construction)


_ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error", 429: "rate_limit_error"}


class _Listener(ThreadingHTTPServer):
    """A listen backlog for hundreds of streams opened at once (bench/load), not the default 5."""

    request_queue_size = 1024


class ScriptedLLMServer:
    """Serves `POST /v1/chat/completions` (streaming or not) and `GET /v1/models` from a script."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        self._address = (host, port)
        self._lock = threading.Condition()
        self._queue: list[tuple[Step, Match | None]] = []
        self._default: Step = text("done.")
        self._requests: list[RecordedRequest] = []
        self._call_ids = itertools.count(1)
        self._connections = 0  # TCP connections accepted since the last reset
        self._stopping = threading.Event()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle -------------------------------------------------------------------

    def start(self) -> Self:
        handler = type("Handler", (_Handler,), {"scripted": self})
        self._httpd = _Listener(self._address, handler)
        self._httpd.daemon_threads = True
        self._stopping.clear()
        # A short poll interval keeps stop() fast.
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, args=(0.05,), name="scripted-llm", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()  # releases hanging and waiting steps
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def base_url(self) -> str:
        if self._httpd is None:
            raise RuntimeError("ScriptedLLMServer is not started")
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}/v1"

    # -- scripting -------------------------------------------------------------------

    def script(self, *steps: Step, match: Match | None = None) -> None:
        """Queue steps; a request takes the first queued step whose `match(body)` is true (None matches any)."""
        with self._lock:
            self._queue.extend((step, match) for step in steps)

    def set_default(self, step: Step) -> None:
        """What a request gets when no queued step matches."""
        with self._lock:
            self._default = step

    def reset(self) -> None:
        with self._lock:
            self._queue.clear()
            self._requests.clear()
            self._default = text("done.")
            self._call_ids = itertools.count(1)
            self._connections = 0

    def pending_steps(self) -> int:
        with self._lock:
            return len(self._queue)

    @property
    def connections(self) -> int:
        """TCP connections clients opened since the last reset: requests on kept-alive ones do not count."""
        with self._lock:
            return self._connections

    def _connected(self) -> None:
        with self._lock:
            self._connections += 1

    @property
    def requests(self) -> list[RecordedRequest]:
        with self._lock:
            return list(self._requests)

    @property
    def agent_requests(self) -> list[RecordedRequest]:
        """Requests of agents' turns, without pipeline stages and suggestions."""
        return [r for r in self.requests if not is_stage_request(r.body)]

    def wait_for_requests(self, n: int, timeout: float = 10, *, include_stages: bool = False
                          ) -> list[RecordedRequest]:
        """Block until at least `n` requests of agents' turns (or of any kind) were recorded; return those."""

        def chosen() -> list[RecordedRequest]:
            return [r for r in self._requests if include_stages or not is_stage_request(r.body)]

        with self._lock:
            if not self._lock.wait_for(lambda: len(chosen()) >= n, timeout):
                seen = [_describe(r.body) for r in chosen()]
                raise TimeoutError(
                    f"expected {n} model requests within {timeout:g} s, got {len(seen)}: {seen}; "
                    f"{len(self._queue)} scripted steps still pending"
                )
            return chosen()

    def _take(self, body: dict, headers: dict[str, str], step: Step | None = None) -> RecordedRequest:
        """Record the request and pick its step (`step` forces one, e.g. for an unreadable body)."""
        received_at, received_wall = time.monotonic(), time.time()
        with self._lock:
            if step is None:
                stage = is_stage_request(body)
                step = DynamicStep(stage_default) if stage else self._default
                for i, (candidate, match) in enumerate(self._queue):
                    # Unmatched steps script agent turns; a stage takes only a step that names it.
                    if (match is None and not stage) or (match is not None and _safe_match(match, body)):
                        step = candidate
                        del self._queue[i]
                        break
        if isinstance(step, DynamicStep):
            step = step.build(body)  # outside the lock: a slow builder must not hold up other requests
        with self._lock:
            ids = [f"call_{next(self._call_ids)}" for _ in step.calls] if isinstance(step, ToolCallsStep) else []
            record = RecordedRequest(body, headers, received_at, step, ids, received_wall=received_wall)
            self._requests.append(record)
            self._lock.notify_all()
            return record


def _safe_match(match: Match, body: dict) -> bool:
    try:
        return bool(match(body))
    except (AttributeError, KeyError, IndexError, TypeError, ValueError):  # an odd body simply does not match
        return False


def _describe(body: dict) -> str:
    messages = body.get("messages") or [{}]
    last = messages[-1] if isinstance(messages[-1], dict) else {}
    return f"{body.get('model')}: {last.get('role')} {text_of(last)[:60]!r}"


class _Handler(BaseHTTPRequestHandler):
    scripted: ScriptedLLMServer
    protocol_version = "HTTP/1.1"  # keep-alive and chunked streaming, like the real API

    def handle(self) -> None:
        self.scripted._connected()  # one call per connection: it serves every request the connection carries
        with contextlib.suppress(ConnectionError):  # the client went away (stop button, timeout)
            super().handle()

    def log_message(self, format: str, *args: Any) -> None:
        pass  # keep test output clean

    def do_GET(self) -> None:
        if self.path.rstrip("/") == "/v1/models":
            models = [{"id": "scripted", "object": "model", "owned_by": "test"}]
            self._send_json(200, {"object": "list", "data": models})
        else:
            self._send_json(404, _error_body(404, f"no route {self.path}"))

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.path.rstrip("/") != "/v1/chat/completions":
            self._send_json(404, _error_body(404, f"no route {self.path}"))
            return
        try:
            body = json.loads(raw)
        except ValueError:
            body = None
        headers = {name.lower(): value for name, value in self.headers.items()}
        if not isinstance(body, dict):
            record = self.scripted._take({}, headers, error(400, "request body is not a JSON object"))
        else:
            record = self.scripted._take(body, headers)
        self._serve(record)

    def _serve(self, record: RecordedRequest) -> None:
        step, body = record.step, record.body
        if isinstance(step, HangStep):
            self.scripted._stopping.wait(step.seconds)
            self.close_connection = True
            return
        if isinstance(step, ErrorStep):
            headers = {} if step.retry_after is None else {"Retry-After": f"{step.retry_after:g}"}
            self._send_json(step.status, _error_body(step.status, step.message, step.code), headers)
            return
        if isinstance(step, JsonBodyStep):
            self._send_json(200, step.body)
            return
        if isinstance(step, RawChunksStep):
            self._stream_raw(step, str(body.get("model") or "scripted"))
            return
        if step.wait is not None:
            deadline = time.monotonic() + MAX_WAIT_S
            while not step.wait.wait(0.05) and not self.scripted._stopping.is_set() and time.monotonic() < deadline:
                pass
        model = str(body.get("model") or "scripted")
        if body.get("stream"):
            drop = isinstance(step, TextStep) and step.drop
            wants_usage = isinstance(body.get("stream_options"), dict) and body["stream_options"].get("include_usage")
            usage = step.usage.body() if step.usage is not None and wants_usage else None
            self._stream(_stream_deltas(step, record.tool_call_ids), step.delay_s, model, drop=drop, usage=usage)
        else:
            self._send_json(200, _completion(step, record.tool_call_ids, model))

    def _send_json(self, status: int, payload: dict, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def _stream(self, deltas: Iterator[tuple[dict, str | None]], delay_s: float, model: str, *, drop: bool,
                usage: dict | None = None) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        chunk_id = f"chatcmpl-scripted-{time.monotonic_ns()}"
        for i, (delta, finish_reason) in enumerate(deltas):
            if i and delay_s and self.scripted._stopping.wait(delay_s):
                break
            if finish_reason and drop:
                self.close_connection = True
                return
            chunk = {
                "id": chunk_id,
                "object": "chat.completion.chunk",
                "created": int(time.time()),
                "model": model,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
            }
            self._write_chunk(f"data: {json.dumps(chunk)}\n\n".encode())
        if usage is not None:  # the real API's last chunk with `include_usage`: no choices, the counts
            last = {"id": chunk_id, "object": "chat.completion.chunk", "created": int(time.time()), "model": model,
                    "choices": [], "usage": usage}
            self._write_chunk(f"data: {json.dumps(last)}\n\n".encode())
        self._write_chunk(b"data: [DONE]\n\n")
        self.wfile.write(b"0\r\n\r\n")

    def _stream_raw(self, step: RawChunksStep, model: str) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        frame = {"id": f"chatcmpl-scripted-{time.monotonic_ns()}", "object": "chat.completion.chunk",
                 "created": int(time.time()), "model": model}
        for chunk in step.chunks:
            line = chunk if isinstance(chunk, str) else f"data: {json.dumps(frame | chunk)}\n\n"
            self._write_chunk(line.encode())
        if step.done:
            self._write_chunk(b"data: [DONE]\n\n")
        self.scripted._stopping.wait(step.end_after_s)
        self.wfile.write(b"0\r\n\r\n")

    def _write_chunk(self, data: bytes) -> None:
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()


def _stream_deltas(step: TextStep | ToolCallsStep, ids: list[str]) -> Iterator[tuple[dict, str | None]]:
    """The (delta, finish_reason) sequence the real API streams for this step."""
    yield {"role": "assistant", "content": ""}, None
    if isinstance(step, TextStep):
        for i in range(0, len(step.content), step.chunk_size):
            yield {"content": step.content[i : i + step.chunk_size]}, None
        yield {}, "stop"
        return
    for i in range(0, len(step.text), 4):
        yield {"content": step.text[i : i + 4]}, None
    for index, ((name, args), call_id) in enumerate(zip(step.calls, ids, strict=True)):
        head = {
            "index": index,
            "id": call_id,
            "type": "function",
            "function": {"name": name, "arguments": ""},
        }
        yield {"tool_calls": [head]}, None
        piece = max(1, len(args) // 3)
        for i in range(0, len(args), piece):
            yield (
                {"tool_calls": [{"index": index, "function": {"arguments": args[i : i + piece]}}]},
                None,
            )
    yield {}, "tool_calls"


def _completion(step: TextStep | ToolCallsStep, ids: list[str], model: str) -> dict:
    message: dict[str, Any] = {"role": "assistant"}
    if isinstance(step, TextStep):
        message["content"], finish_reason = step.content, "stop"
    else:
        message["content"], finish_reason = step.text or None, "tool_calls"
        message["tool_calls"] = [
            {"id": call_id, "type": "function", "function": {"name": name, "arguments": args}}
            for (name, args), call_id in zip(step.calls, ids, strict=True)
        ]
    return {
        "id": f"chatcmpl-scripted-{time.monotonic_ns()}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish_reason}],
        "usage": step.usage.body() if step.usage is not None else
        {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
    }


def _error_body(status: int, message: str, code: str | None = None) -> dict:
    kind = _ERROR_TYPES.get(status, "server_error" if status >= 500 else "invalid_request_error")
    return {"error": {"message": message, "type": kind, "param": None, "code": code}}
