"""Streaming chat through any OpenAI-compatible endpoint with the official `openai` client.

The client's own retries are switched off: we retry here so every retry can be reported
(`on_retry`) and so a call that already streamed text is never silently replayed.
"""

from __future__ import annotations

import contextlib
import random
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from typing import Any

import openai
from openai.types.chat import ChatCompletion, ChatCompletionChunk

from .types import ModelError, ModelReply, ToolCall, ignore_text, never_stop

FALLBACK_MODEL = "gpt-4o-mini"
_STOP_POLL_S = 0.1  # how often a retry backoff looks at should_stop


class _AttemptFailed(Exception):
    """One attempt failed; carries the error to report and the server's Retry-After."""

    def __init__(self, error: ModelError, retry_after: float | None) -> None:
        super().__init__(error.message)
        self.error = error
        self.retry_after = retry_after


@dataclass
class _PendingCall:
    id: str = ""
    name: str = ""
    arguments: str = ""


class _Accumulator:
    """Folds streamed chunks into a ModelReply, passing text deltas on as they arrive."""

    def __init__(self, on_text: Callable[[str], None]) -> None:
        self._on_text = on_text
        self._text: list[str] = []
        self._calls: dict[int, _PendingCall] = {}
        self._last_index: int | None = None
        self._finish_reason: str | None = None
        self._silenced = False
        self._lock = threading.Lock()

    @property
    def delivered(self) -> bool:
        return bool(self._text)

    def add(self, chunk: Mapping[str, Any]) -> None:
        choices = chunk.get("choices") or []
        if not choices:
            return  # e.g. a usage-only chunk
        choice = choices[0]
        delta = choice.get("delta") or {}
        for call_delta in delta.get("tool_calls") or []:
            self._add_call_delta(call_delta)
        if choice.get("finish_reason"):
            self._finish_reason = choice["finish_reason"]
        content = delta.get("content")
        if isinstance(content, str) and content:
            with self._lock:  # never interleaved with silence(): nothing is passed on after it
                if not self._silenced:
                    self._text.append(content)
                    self._on_text(content)

    def silence(self) -> None:
        """The caller stopped waiting: what still arrives is dropped, never passed on."""
        with self._lock:
            self._silenced = True

    def _add_call_delta(self, delta: Mapping[str, Any]) -> None:
        index = delta.get("index")
        call_id = delta.get("id") or ""
        if not isinstance(index, int):
            # Some compatible servers omit the index: a new id starts a new call.
            last = self._calls.get(self._last_index) if self._last_index is not None else None
            index = self._last_index if last and call_id in ("", last.id) else max(self._calls, default=-1) + 1
        self._last_index = index
        call = self._calls.setdefault(index, _PendingCall())
        function = delta.get("function") or {}
        call.id = call.id or call_id
        call.name = call.name or function.get("name") or ""
        call.arguments += function.get("arguments") or ""

    def reply(self) -> ModelReply:
        calls = [
            ToolCall(id=c.id or f"call_{uuid.uuid4().hex[:24]}", name=c.name, arguments=c.arguments)
            for _, c in sorted(self._calls.items())
            if c.name
        ]
        return ModelReply("".join(self._text), calls, self._finish_reason)

    def stopped(self) -> ModelReply:
        # Tool calls may be cut off mid-arguments, and the user asked to stop anyway.
        return ModelReply("".join(self._text), [], "stopped")


class OpenAIChatModel:
    """A ChatModel backed by an OpenAI-compatible HTTP endpoint."""

    def __init__(
        self,
        *,
        base_url: str | None,
        api_key: str,
        default_model: str,
        timeout_s: float = 60,
        max_retries: int = 4,
        backoff_base_s: float = 0.5,
        backoff_max_s: float = 8.0,
        max_retry_after_s: float = 60.0,
        on_retry: Callable[[int, ModelError, float], None] | None = None,
    ) -> None:
        # timeout_s bounds each connect/read, so a slow but live stream is never cut off.
        self._client = openai.OpenAI(api_key=api_key, base_url=base_url, timeout=timeout_s, max_retries=0)
        self.label = str(self._client.base_url).rstrip("/")
        self._default_model = default_model or FALLBACK_MODEL
        self._timeout_s = timeout_s
        self._max_retries = max_retries
        self._backoff_base_s = backoff_base_s
        self._backoff_max_s = backoff_max_s
        self._max_retry_after_s = max_retry_after_s
        self._on_retry = on_retry

    def stream_chat(
        self,
        *,
        messages: list[dict],
        tools: list[dict] | None = None,
        model: str | None = None,
        on_text: Callable[[str], None] = ignore_text,
        should_stop: Callable[[], bool] = never_stop,
    ) -> ModelReply:
        request: dict[str, Any] = {"model": model or self._default_model, "messages": messages, "stream": True}
        if tools:
            request["tools"] = tools
        attempt = 0
        while True:
            if should_stop():
                return ModelReply("", [], "stopped")
            reply = _Accumulator(on_text)
            try:
                return self._attempt(request, reply, should_stop)
            except _AttemptFailed as failed:
                err = failed.error
                if reply.delivered:  # a retry would repeat text the user has already seen
                    raise _annotated(err, "after partial output", partial=reply.reply().content) from failed
                if not err.retryable or attempt >= self._max_retries:
                    raise (_annotated(err, f"gave up after {attempt + 1} attempts") if attempt else err) from failed
                if failed.retry_after is not None and failed.retry_after > self._max_retry_after_s:
                    # Asking again sooner than the endpoint said would only be refused again.
                    raise _annotated(err, f"the endpoint asked to retry after {failed.retry_after:g} s, longer "
                                          f"than the {self._max_retry_after_s:g} s this server waits") from failed
                attempt += 1
                delay = self._delay(attempt, failed.retry_after)
                if self._on_retry is not None:
                    self._on_retry(attempt, err, delay)
                if _sleep_unless_stopped(delay, should_stop):
                    return ModelReply("", [], "stopped")

    def _attempt(self, request: dict[str, Any], reply: _Accumulator, should_stop: Callable[[], bool]) -> ModelReply:
        """One request, run on a worker so that a stop is honoured at once, even while the endpoint has
        not answered or pauses mid-stream: the caller then returns what it has, and the abandoned worker
        closes the stream (or times out) on its own with its output silenced."""
        outcome: dict[str, Any] = {}
        done = threading.Event()
        opened: list[Any] = []

        def work() -> None:
            try:
                outcome["reply"] = self._attempt_blocking(request, reply, should_stop, opened)
            except BaseException as exc:  # handed to the caller below
                outcome["error"] = exc
            finally:
                done.set()

        threading.Thread(target=work, name="model-request", daemon=True).start()
        while not done.wait(_STOP_POLL_S):
            if should_stop():
                reply.silence()
                for stream in opened:
                    with contextlib.suppress(Exception):
                        stream.close()
                return reply.stopped()
        if "error" in outcome:
            raise outcome["error"]
        return outcome["reply"]

    def _attempt_blocking(self, request: dict[str, Any], reply: _Accumulator, should_stop: Callable[[], bool],
                          opened: list[Any]) -> ModelReply:
        try:
            # The client's own POST, not `chat.completions.create`: that one walks every message through the
            # SDK's typed-params transform (about 50 ms for 300 messages, on the server's event loop) to
            # produce the JSON our plain-dict messages already are.
            stream = self._client.post("/chat/completions", body=request, cast_to=ChatCompletion, stream=True,
                                       stream_cls=openai.Stream[ChatCompletionChunk])
        except openai.OpenAIError as exc:
            raise self._failure(exc) from exc
        opened.append(stream)
        with stream:  # closing it drops the connection, which is how the endpoint learns we stopped
            chunks = iter(stream)
            while not should_stop():
                # ValueError: an unparsable SSE payload.
                try:
                    chunk = next(chunks, None)
                except (openai.OpenAIError, ValueError) as exc:
                    raise self._failure(exc) from exc
                if chunk is None:
                    return reply.reply()
                reply.add(chunk.to_dict())  # on_text runs here, outside the error mapping
            return reply.stopped()

    def _failure(self, exc: Exception) -> _AttemptFailed:
        if isinstance(exc, openai.APIStatusError):
            status = exc.status_code
            body = exc.body
            detail = body.get("message") if isinstance(body, dict) else None
            message = f"model endpoint answered {status}: {detail or str(body or '')[:200] or exc.message}"
            retry_after = _retry_after(exc.response.headers)
            if status == 429:
                return _AttemptFailed(ModelError("rate_limited", message, retryable=True, status=status), retry_after)
            if status >= 500:
                return _AttemptFailed(ModelError("server_error", message, retryable=True, status=status), retry_after)
            code = "auth_error" if status in {401, 403} else "bad_request" if 400 <= status < 500 else "model_error"
            return _AttemptFailed(ModelError(code, message, status=status), None)
        if isinstance(exc, openai.APITimeoutError):
            message = f"model endpoint {self.label} did not answer within {self._timeout_s:g} s"
            return _AttemptFailed(ModelError("timeout", message, retryable=True), None)
        if isinstance(exc, openai.APIConnectionError):
            cause = exc.__cause__ or exc
            message = f"could not reach model endpoint {self.label}: {cause}"
            return _AttemptFailed(ModelError("connection_error", message, retryable=True), None)
        return _AttemptFailed(ModelError("model_error", f"model endpoint error: {exc}"), None)

    def _delay(self, attempt: int, retry_after: float | None) -> float:
        if retry_after is not None:  # honoured as asked (a longer ask gave up before this)
            return max(retry_after, 0.0)
        backoff = min(self._backoff_max_s, self._backoff_base_s * 2 ** (attempt - 1))
        return backoff * random.uniform(0.75, 1.0)  # jitter spreads out agents that failed together


def _annotated(err: ModelError, note: str, *, partial: str = "") -> ModelError:
    return ModelError(err.code, f"{err.message} ({note})", retryable=err.retryable, status=err.status,
                      partial=partial)


def _retry_after(headers: Mapping[str, str]) -> float | None:
    """Seconds the server asked us to wait (`retry-after-ms`, or `Retry-After` in seconds or as a date)."""
    try:
        if ms := headers.get("retry-after-ms"):
            return float(ms) / 1000
        value = headers.get("retry-after")
        if not value:
            return None
        try:
            return float(value)
        except ValueError:
            return parsedate_to_datetime(value).timestamp() - time.time()
    except (TypeError, ValueError):
        return None


def _sleep_unless_stopped(delay: float, should_stop: Callable[[], bool]) -> bool:
    """Sleep `delay` seconds in small slices; True if should_stop fired meanwhile."""
    deadline = time.monotonic() + delay
    while (remaining := deadline - time.monotonic()) > 0:
        time.sleep(min(remaining, _STOP_POLL_S))
        if should_stop():
            return True
    return False
