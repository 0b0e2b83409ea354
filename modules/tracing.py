"""OpenTelemetry traces of a turn (TRACES=otlp; off by default): the turn, the routing of a message, each
model request and each tool call, named and described by the GenAI semantic conventions
(`invoke_agent`, `chat`, `execute_tool`; `gen_ai.*` attributes). Spans are exported over OTLP/HTTP to
the endpoint the standard `OTEL_EXPORTER_OTLP_ENDPOINT` (or `..._TRACES_ENDPOINT`) names.

The provider is this object's own (no global state); off, every span is a no-op costing one call.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter
from opentelemetry.trace import Span, SpanKind, Status, StatusCode, Tracer

__all__ = ["Span", "Tracing", "build_tracing"]

SERVICE = "agent-team-chat"


class Tracing:
    def __init__(self, processor: SpanProcessor | None = None):
        """`processor`: where finished spans go (a BatchSpanProcessor over OTLP, or a test's in-memory
        exporter); None: tracing is off."""
        self._provider: TracerProvider | None = None
        self._tracer: Tracer | None = None
        if processor is not None:
            self._provider = TracerProvider(resource=Resource.create({"service.name": SERVICE}))
            self._provider.add_span_processor(processor)
            self._tracer = self._provider.get_tracer(SERVICE)

    @property
    def active(self) -> bool:
        return self._tracer is not None

    @contextmanager
    def span(self, name: str, attributes: dict[str, Any], *, client: bool = False) -> Iterator[Span | None]:
        """A span around the block (None when off); an exception leaving it marks the span an error."""
        if self._tracer is None:
            yield None
            return
        kind = SpanKind.CLIENT if client else SpanKind.INTERNAL
        clean = {k: v for k, v in attributes.items() if v is not None}
        with self._tracer.start_as_current_span(name, kind=kind, attributes=clean,
                                                record_exception=True, set_status_on_exception=True) as span:
            yield span

    @staticmethod
    def failed(span: Span | None, error_type: str) -> None:
        if span is not None:
            span.set_attribute("error.type", error_type)
            span.set_status(Status(StatusCode.ERROR, error_type))

    def shutdown(self) -> None:
        if self._provider is not None:
            self._provider.shutdown()


def build_tracing(mode: str, exporter: SpanExporter | None = None) -> Tracing:
    """TRACES=`off` (default) or `otlp`; `exporter` replaces the OTLP one (tests)."""
    if mode == "off" and exporter is None:
        return Tracing()
    if exporter is None:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        exporter = OTLPSpanExporter()
    return Tracing(BatchSpanProcessor(exporter))
