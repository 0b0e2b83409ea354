"""The one place every model request is metered: a ChatModel wrapper built once in server/runtime.py.

Callers bind who a request is for (`bound(CallContext(...))`: its purpose, conversation, agent, task)
and use the bound model as any ChatModel. Each request, answered, stopped or failed, becomes one
UsageRecord in the ledger (one stopped before it was sent is none): the tokens the provider reported
(`ModelReply.usage`), or an estimate marked `estimated` (modules/llm/tokens.py) when it reported none or the
request failed. An attempt the client retried after the endpoint had begun to answer (`FailedAttempt`) is a
failed request of its own: the provider may have billed it; a stop while the client waited to ask again after one
adds no row (nothing more was sent).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from modules.llm import ChatModel, FailedAttempt, ModelError, ModelReply, Usage
from modules.llm.tokens import count_messages, count_tokens, count_tools
from modules.llm.types import ignore_attempt, ignore_text, never_stop
from modules.tracing import Span, Tracing
from modules.usage.ledger import UsageLedger
from modules.usage.prices import PriceTable
from modules.usage.records import FAILED, OK, STOPPED, UNATTRIBUTED, CallContext, UsageRecord

log = logging.getLogger(__name__)


class MeteredChatModel:
    """A ChatModel whose every request is recorded; unbound calls are recorded as `unattributed`."""

    def __init__(self, inner: ChatModel, ledger: UsageLedger, prices: PriceTable, default_model: str,
                 tracing: Tracing | None = None):
        self.inner, self.ledger, self.prices = inner, ledger, prices
        self.tracing = tracing or Tracing()
        self.label = inner.label
        # A request without a model asks for LLM_MODEL, else the client's own default (OpenAIChatModel's
        # gpt-4o-mini), never its endpoint's URL: a failed request is recorded and priced under that name.
        self._default_model = default_model or str(getattr(inner, "default_model", ""))

    def bound(self, context: CallContext) -> BoundChatModel:
        return BoundChatModel(self, context)

    def stream_chat(self, *, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None,
                    model: str | None = None, on_text: Callable[[str], None] = ignore_text,
                    should_stop: Callable[[], bool] = never_stop,
                    on_reasoning: Callable[[str], None] = ignore_text,
                    on_failed_attempt: Callable[[FailedAttempt], None] = ignore_attempt) -> ModelReply:
        return self.metered(CallContext(UNATTRIBUTED), messages=messages, tools=tools, model=model,
                            on_text=on_text, should_stop=should_stop, on_reasoning=on_reasoning,
                            on_failed_attempt=on_failed_attempt)

    def metered(self, context: CallContext, *, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None,
                model: str | None, on_text: Callable[[str], None], should_stop: Callable[[], bool],
                on_reasoning: Callable[[str], None],
                on_failed_attempt: Callable[[FailedAttempt], None] = ignore_attempt) -> ModelReply:
        started = time.monotonic()
        first: list[float] = []
        shown: list[str] = []  # what came back, should the call fail on our side (then no reply says it)

        def text(chunk: str) -> None:
            if not first:
                first.append(time.monotonic() - started)
            shown.append(chunk)
            on_text(chunk)

        def reasoning(chunk: str) -> None:
            shown.append(chunk)
            on_reasoning(chunk)

        asked = model or self._default_model or self.inner.label
        attempts: list[FailedAttempt] = []

        def attempt_failed(attempt: FailedAttempt) -> None:
            attempts.append(attempt)
            try:
                self._record(context, attempt.model or asked, asked, FAILED, attempt.usage, messages, tools,
                             attempt.output, attempt.latency_s, attempt.first_token_s, None)
            except Exception:  # the call goes on: its own row is still written
                log.exception("a failed attempt of a model request could not be metered")
            on_failed_attempt(attempt)

        if should_stop():  # stopped before the request went out (the user's Stop): nothing was sent, nothing to count
            return ModelReply("", [], "stopped", model=asked)
        with self.tracing.span(f"chat {asked}", {
                "gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai", "gen_ai.request.model": asked,
                "gen_ai.agent.name": context.agent or None, "gen_ai.conversation.id": context.conversation_id,
                "chat.purpose": context.purpose, "chat.task_id": context.task_id}, client=True) as span:
            try:
                reply = self.inner.stream_chat(messages=messages, tools=tools, model=model, on_text=text,
                                               should_stop=should_stop, on_reasoning=reasoning,
                                               on_failed_attempt=attempt_failed)
            except ModelError as exc:
                self._record(context, asked, asked, FAILED, None, messages, tools, exc.partial + exc.partial_reasoning,
                             time.monotonic() - started, first[0] if first else None, span)
                self.tracing.failed(span, exc.code)
                raise
            except Exception:  # not the model's failure (a callback's: the database went away mid-stream), but
                try:  # the request was made, and billed
                    self._record(context, asked, asked, FAILED, None, messages, tools, "".join(shown),
                                 time.monotonic() - started, first[0] if first else None, span)
                except Exception:
                    log.exception("a model request that failed on our side could not be metered")
                raise
            if reply.unsent and attempts:  # stopped before asking again: the failed attempt is the request's row
                return reply
            answered = reply.model or asked
            output = reply.content + "".join(call.name + call.arguments for call in reply.tool_calls)
            status = STOPPED if reply.finish_reason == "stopped" else OK
            first_token = reply.first_token_s if reply.first_token_s is not None else (first[0] if first else None)
            self._record(context, answered, asked, status, reply.usage, messages, tools, output + reply.reasoning,
                         reply.latency_s or time.monotonic() - started, first_token, span)
            if span is not None:
                span.set_attribute("gen_ai.response.finish_reasons", [reply.finish_reason or ""])
        return reply

    def _record(self, context: CallContext, model: str, asked: str, status: str, usage: Usage | None,
                messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None, output: str, latency_s: float,
                first_token_s: float | None, span: Span | None) -> None:
        if usage is not None:
            prompt, completion = usage.prompt_tokens, usage.completion_tokens
            cached, reasoning = usage.cached_tokens, usage.reasoning_tokens
        else:  # the provider said nothing (or the request failed): what was sent, and what came back
            prompt = count_messages(messages) + count_tools(tools)
            completion = count_tokens(output) if output else 0
            cached = reasoning = 0
        user_id = context.user_id if context.user_id is not None else self.ledger.user_of(context.conversation_id)
        self.ledger.record(UsageRecord(
            context=context, user_id=user_id, model=model, status=status, estimated=usage is None,
            prompt_tokens=prompt, completion_tokens=completion, cached_tokens=cached, reasoning_tokens=reasoning,
            cost=self.prices.cost(model, prompt, cached, completion, asked=asked), latency_s=latency_s,
            first_token_s=first_token_s, created_at=time.time()))
        if span is not None:
            span.set_attributes({"gen_ai.response.model": model, "gen_ai.usage.input_tokens": prompt,
                                 "gen_ai.usage.output_tokens": completion, "chat.usage.estimated": usage is None})


class BoundChatModel:
    """The metered model with a context bound: a ChatModel for one caller."""

    def __init__(self, meter: MeteredChatModel, context: CallContext):
        self._meter, self.context = meter, context
        self.label = meter.label

    def stream_chat(self, *, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None,
                    model: str | None = None, on_text: Callable[[str], None] = ignore_text,
                    should_stop: Callable[[], bool] = never_stop,
                    on_reasoning: Callable[[str], None] = ignore_text,
                    on_failed_attempt: Callable[[FailedAttempt], None] = ignore_attempt) -> ModelReply:
        return self._meter.metered(self.context, messages=messages, tools=tools, model=model, on_text=on_text,
                                   should_stop=should_stop, on_reasoning=on_reasoning,
                                   on_failed_attempt=on_failed_attempt)
