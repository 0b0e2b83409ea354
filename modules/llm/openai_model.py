"""Streaming chat through any OpenAI-compatible endpoint with the official `openai` client.

The client's own retries are switched off: we retry here so every retry can be reported
(`on_retry`; and to the call's `on_failed_attempt`, for its meter, when the endpoint had begun to answer) and so a
call that already streamed text is never silently replayed. Chunks are read
as the plain JSON the endpoint sent (no typed model built per chunk) and folded by `ReplyBuilder`.
"""

from __future__ import annotations

import contextlib
import json
import logging
import random
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx2
import openai

from .client_pools import ClientPools
from .errors import error_text, refuses_stream_options, retry_after, status_error, stream_error
from .reply_builder import ReplyBuilder
from .stop_watch import StopWatch
from .types import (
    FAILED_FINISH_REASONS,
    FailedAttempt,
    ModelError,
    ModelReply,
    ignore_attempt,
    ignore_text,
    never_stop,
)

FALLBACK_MODEL = "gpt-4o-mini"
_EVENTS_AFTER_DONE = 16  # what a stream may still send after `[DONE]` before its connection is given up
_STOP_POLL_S = 0.1  # how often a retry backoff looks at should_stop
log = logging.getLogger(__name__)


class _AttemptFailed(Exception):
    """One attempt failed; carries the error to report and the server's Retry-After. `answered`: the endpoint
    had begun to answer (its stream was open), so it may have billed the attempt."""

    def __init__(self, error: ModelError, retry_after: float | None, *, answered: bool = False) -> None:
        super().__init__(error.message)
        self.error = error
        self.retry_after = retry_after
        self.answered = answered


class _ReadToEnd(openai.Stream[object]):
    """The SDK's stream, read past `[DONE]` to the end of the response so its connection is kept alive.

    The SDK stops at `[DONE]` and closes the response before the body's last (empty) chunk has come, which
    drops the connection: about 400 of 500 streams opened a new one. The reply is whole at `[DONE]`, so
    `at_done` hands it over first: the read to the end waits for one more packet, which on a busy event loop
    took seconds. Real endpoints end the body right after `[DONE]`; one that goes on is given up after a few
    events (or its read timeout). A stop still closes the stream mid-body, which drops the connection as it
    should."""

    at_done: Callable[[], None] = staticmethod(lambda: None)

    def _iter_events(self) -> Iterator[Any]:
        events = super()._iter_events()
        for event in events:
            if event.data.startswith("[DONE]"):
                self.at_done()
                with contextlib.suppress(openai.OpenAIError):  # the reply is whole: a failure here changes nothing
                    for _ in zip(range(_EVENTS_AFTER_DONE), events, strict=False):
                        pass
            yield event


class OpenAIChatModel:
    """A ChatModel backed by an OpenAI-compatible HTTP endpoint.

    One set of HTTP pools per process (client_pools.py), keeping up to `max_connections` connections alive:
    hundreds of concurrent streams reuse their connections instead of opening a new one per request."""

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
        max_connections: int = 1000,
        on_retry: Callable[[int, ModelError, float], None] | None = None,
    ) -> None:
        def client(connections: int) -> openai.OpenAI:
            limits = httpx2.Limits(max_connections=connections, max_keepalive_connections=connections)
            # timeout_s bounds each connect/read, so a slow but live stream is never cut off.
            return openai.OpenAI(api_key=api_key, base_url=base_url, timeout=timeout_s, max_retries=0,
                                 http_client=openai.DefaultHttpxClient(limits=limits, timeout=timeout_s))

        self._pools = ClientPools(max_connections, client)
        self.label = str(self._pools.clients[0].base_url).rstrip("/")
        self.default_model = default_model or FALLBACK_MODEL  # what a request without a model asks for
        self._timeout_s = timeout_s
        self._max_retries = max_retries
        self._backoff_base_s = backoff_base_s
        self._backoff_max_s = backoff_max_s
        self._max_retry_after_s = max_retry_after_s
        self._on_retry = on_retry
        self._stops = StopWatch()  # the stop switches of the requests that wait: one thread looks at all
        # Usage is asked for in the stream until the endpoint refuses the option once (then never again).
        self._ask_stream_usage = True

    def stream_chat(
        self,
        *,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None = None,
        model: str | None = None,
        on_text: Callable[[str], None] = ignore_text,
        should_stop: Callable[[], bool] = never_stop,
        on_reasoning: Callable[[str], None] = ignore_text,
        on_failed_attempt: Callable[[FailedAttempt], None] = ignore_attempt,
    ) -> ModelReply:
        name = model or self.default_model
        request: dict[str, Any] = {"model": name, "messages": messages, "stream": True}
        if tools:
            request["tools"] = tools
        attempt = 0
        while True:
            if should_stop():
                return ModelReply("", [], "stopped", model=name, unsent=True)
            if self._ask_stream_usage:
                request["stream_options"] = {"include_usage": True}
            reply = ReplyBuilder(on_text, on_reasoning, name)
            try:
                return self._attempt(request, reply, should_stop)
            except _AttemptFailed as failed:
                err = failed.error
                if "stream_options" in request and refuses_stream_options(err.status, err.message):
                    log.warning("model endpoint %s refuses stream_options (%s): asking without it from now on",
                                self.label, err.message)
                    self._ask_stream_usage = False
                    del request["stream_options"]
                    continue  # not a failed attempt: the same request, without the option
                if reply.delivered:  # a retry would repeat text the user has already seen
                    shown = reply.reply()
                    raise _annotated(err, "after partial output", partial=shown.content,
                                     partial_reasoning=shown.reasoning) from failed
                if not err.retryable or attempt >= self._max_retries:
                    raise (_annotated(err, f"gave up after {attempt + 1} attempts") if attempt else err) from failed
                if failed.retry_after is not None and failed.retry_after > self._max_retry_after_s:
                    # Asking again sooner than the endpoint said would only be refused again.
                    raise _annotated(err, f"the endpoint asked to retry after {failed.retry_after:g} s, longer "
                                          f"than the {self._max_retry_after_s:g} s this server waits") from failed
                if failed.answered:  # asked again: the attempt is a request of its own for the meter
                    on_failed_attempt(reply.failed(err))
                attempt += 1
                delay = self._delay(attempt, failed.retry_after)
                if self._on_retry is not None:
                    self._on_retry(attempt, err, delay)
                if _sleep_unless_stopped(delay, should_stop):
                    return ModelReply("", [], "stopped", model=name, unsent=True)

    def _attempt(self, request: dict[str, Any], reply: ReplyBuilder, should_stop: Callable[[], bool]) -> ModelReply:
        """One request, run on a worker so that a stop is honoured at once (within the stop watch's 0.1 s), even
        while the endpoint has not answered or pauses mid-stream: the caller then returns what it has, and the
        abandoned worker closes the stream (or times out) on its own with its output silenced."""
        outcome: dict[str, Any] = {}
        done = threading.Event()
        opened: list[Any] = []

        def publish(answer: ModelReply) -> None:
            outcome.setdefault("reply", answer)  # the first wins: at `[DONE]`, before the read to the end
            done.set()

        def work() -> None:
            try:
                with self._pools.client() as client:
                    publish(self._attempt_blocking(client, request, reply, should_stop, opened, publish))
            except BaseException as exc:  # handed to the caller below
                outcome["error"] = exc
            finally:
                done.set()

        threading.Thread(target=work, name="model-request", daemon=True).start()
        watched = self._stops.watch(should_stop, done) if should_stop is not never_stop else None
        try:
            done.wait()  # the worker's end, or the stop watch's wake: no timer of this caller's own
        finally:
            if watched is not None:
                self._stops.unwatch(watched)
        if "reply" in outcome:
            answer: ModelReply = outcome["reply"]
            if answer.finish_reason in FAILED_FINISH_REASONS:
                message = f"model endpoint {self.label} ended the reply with finish_reason {answer.finish_reason!r}"
                raise _AttemptFailed(ModelError("server_error", message, retryable=True), None, answered=True)
            return answer
        if "error" in outcome:
            failure = outcome["error"]
            if isinstance(failure, _AttemptFailed) and opened:
                failure.answered = True  # its stream was open: the endpoint had begun to answer
            raise failure
        reply.silence()  # stopped while the worker still waits for the endpoint
        for stream in opened:
            with contextlib.suppress(Exception):
                stream.close()
        return reply.stopped()

    def _attempt_blocking(self, client: openai.OpenAI, request: dict[str, Any], reply: ReplyBuilder,
                          should_stop: Callable[[], bool], opened: list[Any],
                          publish: Callable[[ModelReply], None]) -> ModelReply:
        try:
            # The client's own POST, not `chat.completions.create`: that one walks every message through the
            # SDK's typed-params transform (about 50 ms for 300 messages, on the server's event loop) to
            # produce the JSON our plain-dict messages already are; `object` chunks stay the endpoint's JSON.
            stream = client.post("/chat/completions", body=request, cast_to=object, stream=True,
                                 stream_cls=_ReadToEnd)
        except openai.OpenAIError as exc:
            raise self._failure(exc) from exc
        opened.append(stream)
        whole: list[ModelReply] = []

        def at_done() -> None:
            whole.append(reply.reply())
            publish(whole[0])

        stream.at_done = at_done
        with stream:  # closing it drops the connection, which is how the endpoint learns we stopped
            if "json" in stream.response.headers.get("content-type", ""):
                return self._whole_body(stream, reply)
            chunks = iter(stream)
            while not should_stop():
                # ValueError: an unparsable SSE payload.
                try:
                    chunk = next(chunks, None)
                except (openai.OpenAIError, ValueError) as exc:
                    raise self._failure(exc) from exc
                if chunk is None:
                    if whole or reply.finished:
                        return whole[0] if whole else reply.reply()
                    # Neither `[DONE]` nor a finish_reason: a proxy or the endpoint ended the body mid-reply
                    # (the text may stop mid-sentence, a tool call's arguments mid-JSON). A retry can mend it.
                    raise _AttemptFailed(ModelError("connection_error", f"model endpoint {self.label} ended the "
                                                    "stream before the reply was complete", retryable=True), None)
                if isinstance(chunk, dict):
                    reply.add(chunk)  # on_text runs here, outside the error mapping
            return reply.stopped()

    def _whole_body(self, stream: openai.Stream[object], reply: ReplyBuilder) -> ModelReply:
        """A provider that ignored `stream: true` and answered one `chat.completion` (or error) body."""
        try:
            body = json.loads(stream.response.read())
        except (httpx2.HTTPError, ValueError) as exc:
            raise _AttemptFailed(ModelError("model_error", f"model endpoint sent an unreadable body: {exc}"),
                                 None) from exc
        if isinstance(body, dict) and body.get("error"):  # `"error": null` beside choices: no error
            raise _AttemptFailed(stream_error(error_text(body, "an error"), body), None)
        if not isinstance(body, dict) or not isinstance(body.get("choices"), list):
            raise _AttemptFailed(ModelError("model_error", f"model endpoint sent a body that is not a chat "
                                                           f"completion: {error_text(body, 'empty')}"), None)
        reply.add_completion(body)
        return reply.reply()

    def _failure(self, exc: Exception) -> _AttemptFailed:
        if isinstance(exc, openai.APIStatusError):
            err = status_error(exc.status_code, error_text(exc.body, exc.message))
            return _AttemptFailed(err, retry_after(exc.response.headers) if err.retryable else None)
        if isinstance(exc, openai.APITimeoutError):
            message = f"model endpoint {self.label} did not answer within {self._timeout_s:g} s"
            return _AttemptFailed(ModelError("timeout", message, retryable=True), None)
        if isinstance(exc, openai.APIConnectionError):
            cause = exc.__cause__ or exc
            message = f"could not reach model endpoint {self.label}: {cause}"
            return _AttemptFailed(ModelError("connection_error", message, retryable=True), None)
        if isinstance(exc, openai.APIError):  # an error event inside the stream
            return _AttemptFailed(stream_error(error_text(exc.body, exc.message), exc.body), None)
        return _AttemptFailed(ModelError("model_error", f"model endpoint error: {exc}"), None)

    def _delay(self, attempt: int, retry_after: float | None) -> float:
        if retry_after is not None:  # honoured as asked (a longer ask gave up before this)
            return max(retry_after, 0.0)
        backoff = min(self._backoff_max_s, self._backoff_base_s * 2.0 ** (attempt - 1))
        return backoff * random.uniform(0.75, 1.0)  # jitter spreads out agents that failed together


def _annotated(err: ModelError, note: str, *, partial: str = "", partial_reasoning: str = "") -> ModelError:
    return ModelError(err.code, f"{err.message} ({note})", retryable=err.retryable, status=err.status,
                      partial=partial, partial_reasoning=partial_reasoning)


def _sleep_unless_stopped(delay: float, should_stop: Callable[[], bool]) -> bool:
    """Sleep `delay` seconds in small slices; True if should_stop fired meanwhile."""
    deadline = time.monotonic() + delay
    while (remaining := deadline - time.monotonic()) > 0:
        time.sleep(min(remaining, _STOP_POLL_S))
        if should_stop():
            return True
    return False
