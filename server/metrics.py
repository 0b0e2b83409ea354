"""The operator's metrics, in Prometheus' text format at `/metrics` (docs/API.md, "Metrics").

One registry per process (each process of a deployment exposes its own; Prometheus sums them). The
model request metrics come from the usage ledger's listener, so they count exactly what the ledger
records; turns, routes, sockets and outages are counted where they happen.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily
from prometheus_client.registry import Collector

from modules.usage.records import UsageRecord

_LATENCY_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120)
_COMMAND_BUCKETS = (0.01, 0.05, 0.1, 0.5, 1, 5, 30, 120, 600)


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.turns_started = Counter("chat_turns_started", "Turns started", registry=r)
        self.turns_ended = Counter("chat_turns_ended", "Turns ended, by final status", ["status"], registry=r)
        self.model_requests = Counter("chat_model_requests", "Model requests, by model, purpose and outcome",
                                      ["model", "purpose", "status"], registry=r)
        self.model_latency = Histogram("chat_model_request_seconds", "Model request latency (sent to done)",
                                       ["model", "purpose"], buckets=_LATENCY_BUCKETS, registry=r)
        self.first_token = Histogram("chat_model_first_token_seconds", "Time from request to first token",
                                     ["model", "purpose"], buckets=_LATENCY_BUCKETS, registry=r)
        self.tokens = Counter("chat_model_tokens", "Tokens by model, purpose and kind (prompt, completion, "
                              "cached, reasoning); estimated ones included", ["model", "purpose", "kind"], registry=r)
        self.cost = Counter("chat_model_cost", "Cost by the price table (MODEL_PRICES)", ["model", "purpose"],
                            registry=r)
        self.routes = Counter("chat_routing_decisions", "User messages routed, by route", ["route"], registry=r)
        self.sockets = Gauge("chat_connected_sockets", "Socket.IO connections to this process", registry=r)
        self.outages = Counter("chat_database_outages", "Times the database stopped answering", registry=r)
        self.commands = Counter("chat_sandbox_commands", "Commands run, by how they ended", ["status"], registry=r)
        self.command_seconds = Histogram("chat_sandbox_command_seconds", "Command durations",
                                         buckets=_COMMAND_BUCKETS, registry=r)
        self.queue_depth = Gauge("chat_queued_messages", "Messages waiting in agents' queues (all processes)",
                                 registry=r)

        self.chunk_wait = Gauge("chat_stream_chunk_wait_seconds", "How long a message's later text chunks wait "
                                "to be sent as one event now: STREAM_FLUSH_MS, longer with many streams "
                                "(STREAM_EVENTS_PER_S)", registry=r)

    def watch_queue_depth(self, read: Callable[[], float]) -> None:
        """Read at each scrape (a count from the database)."""
        self.queue_depth.set_function(read)

    def watch_chunk_wait(self, read: Callable[[], float]) -> None:
        """Read at each scrape (the event log's window)."""
        self.chunk_wait.set_function(read)

    def watch_database(self, statements: Callable[[], dict[str, int]], commits: Callable[[], int]) -> None:
        """The database's statements by verb and its committed write transactions, read at each scrape."""
        self.registry.register(_DatabaseCounts(statements, commits))

    def command_ended(self, status: str, duration_s: float) -> None:
        self.commands.labels(status).inc()
        self.command_seconds.observe(duration_s)

    def model_request(self, record: UsageRecord) -> None:
        model, purpose = record.model, record.context.purpose
        self.model_requests.labels(model, purpose, record.status).inc()
        self.model_latency.labels(model, purpose).observe(record.latency_s)
        if record.first_token_s is not None:
            self.first_token.labels(model, purpose).observe(record.first_token_s)
        for kind, count in (("prompt", record.prompt_tokens), ("completion", record.completion_tokens),
                            ("cached", record.cached_tokens), ("reasoning", record.reasoning_tokens)):
            self.tokens.labels(model, purpose, kind).inc(count)
        if record.cost is not None:
            self.cost.labels(model, purpose).inc(record.cost)

    def exposition(self) -> bytes:
        return generate_latest(self.registry)


class _DatabaseCounts(Collector):
    """Counters the database layer keeps itself (modules/storage/statement_counts.py), exposed as they stand."""

    def __init__(self, statements: Callable[[], dict[str, int]], commits: Callable[[], int]):
        self._statements, self._commits = statements, commits

    def collect(self) -> Iterator[CounterMetricFamily]:
        statements = CounterMetricFamily("chat_database_statements", "Statements sent to the database, by verb",
                                         labels=["verb"])
        for verb, count in self._statements().items():
            statements.add_metric([verb], count)
        yield statements
        yield CounterMetricFamily("chat_database_commits", "Write transactions committed", value=self._commits())
