"""OpenTelemetry traces (TRACES; modules/tracing.py) with an in-memory exporter: a model request is a
`chat` client span with the GenAI attributes and its usage, nested in the span that was current (the
turn's); a failed one is an error span; off, nothing is recorded."""

from __future__ import annotations

import pytest
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from modules.llm import ModelError, ModelReply, Usage
from modules.storage.db import Database
from modules.storage.group_commit import GroupCommit
from modules.tracing import Tracing, build_tracing
from modules.usage.ledger import UsageLedger
from modules.usage.metered_model import MeteredChatModel
from modules.usage.prices import PriceTable
from modules.usage.records import AGENT, CallContext


class Model:
    label = "scripted"

    def __init__(self, reply):
        self.reply = reply

    def stream_chat(self, *, messages, tools=None, model=None, on_text, should_stop, on_reasoning, on_failed_attempt):
        if isinstance(self.reply, Exception):
            raise self.reply
        return self.reply


@pytest.fixture
def traced(tmp_path):
    db = Database(f"sqlite:///{tmp_path / 'app.db'}")
    db.migrate()
    exporter = InMemorySpanExporter()
    tracing = Tracing(SimpleSpanProcessor(exporter))
    yield db, tracing, exporter
    tracing.shutdown()
    db.dispose()


def _meter(db, tracing, reply):
    return MeteredChatModel(Model(reply), UsageLedger(db, GroupCommit(db), grace_s=60), PriceTable({}), "m-default",
                            tracing)


def test_a_model_request_is_a_chat_span_inside_the_turns_span(traced):
    db, tracing, exporter = traced
    reply = ModelReply("hi", [], "stop", usage=Usage(120, 30), model="m-answered")
    ctx = CallContext(AGENT, "conv-1", agent="MasterAgent", task_id="task-1")
    with tracing.span("invoke_agent MasterAgent", {"gen_ai.operation.name": "invoke_agent"}):
        _meter(db, tracing, reply).bound(ctx).stream_chat(messages=[], model="m-asked")
    chat, turn = exporter.get_finished_spans()
    assert chat.name == "chat m-asked" and chat.kind == SpanKind.CLIENT
    assert chat.parent is not None and chat.parent.span_id == turn.context.span_id
    assert {k: chat.attributes[k] for k in ("gen_ai.operation.name", "gen_ai.request.model", "gen_ai.response.model",
                                            "gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens",
                                            "gen_ai.agent.name", "gen_ai.conversation.id", "chat.purpose")} == {
        "gen_ai.operation.name": "chat", "gen_ai.request.model": "m-asked", "gen_ai.response.model": "m-answered",
        "gen_ai.usage.input_tokens": 120, "gen_ai.usage.output_tokens": 30, "gen_ai.agent.name": "MasterAgent",
        "gen_ai.conversation.id": "conv-1", "chat.purpose": AGENT}
    assert tuple(chat.attributes["gen_ai.response.finish_reasons"]) == ("stop",)
    assert chat.attributes["chat.usage.estimated"] is False


def test_a_failed_request_is_an_error_span(traced):
    db, tracing, exporter = traced
    with pytest.raises(ModelError):
        _meter(db, tracing, ModelError("rate_limited", "slow down")).bound(CallContext(AGENT)).stream_chat(messages=[])
    [span] = exporter.get_finished_spans()
    assert span.status.status_code == StatusCode.ERROR and span.attributes["error.type"] == "rate_limited"


def test_off_records_nothing():
    tracing = build_tracing("off")
    assert not tracing.active
    with tracing.span("anything", {"a": 1}) as span:
        assert span is None
    exporter = InMemorySpanExporter()
    on = build_tracing("off", exporter)  # an exporter given: on (the OTLP one is replaced)
    with on.span("turn", {"a": 1}):
        pass
    on.shutdown()
    assert [s.name for s in exporter.get_finished_spans()] == ["turn"]
