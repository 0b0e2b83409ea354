"""OpenTelemetry traces through the real server (TRACES=otlp; README, "Usage, budgets and metrics"): an
OTLP/HTTP receiver here gets the turn's `invoke_agent` span with its `chat` and `execute_tool` spans
inside, and the routing of the message with its own `chat` span."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from modules.statuses import TaskStatus
from test.conftest import wait_until
from test.scripted_llm import StepUsage, text, tool_calls


class _Receiver(BaseHTTPRequestHandler):
    spans: list
    lock: threading.Lock

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        request = ExportTraceServiceRequest()
        request.ParseFromString(body)
        with self.lock:
            for resource in request.resource_spans:
                for scope in resource.scope_spans:
                    self.spans.extend(scope.spans)
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format, *args) -> None:
        pass


def _attributes(span) -> dict:
    out = {}
    for kv in span.attributes:
        value = kv.value
        out[kv.key] = value.string_value or value.int_value or value.bool_value
    return out


def test_a_turn_is_traced_with_its_model_requests_and_tool_calls(make_server, llm):
    handler = type("Receiver", (_Receiver,), {"spans": [], "lock": threading.Lock()})
    receiver = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=receiver.serve_forever, args=(0.05,), daemon=True).start()
    try:
        endpoint = f"http://127.0.0.1:{receiver.server_address[1]}/v1/traces"
        server = make_server(env={"TRACES": "otlp", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": endpoint,
                                  "OTEL_BSP_SCHEDULE_DELAY": "50"})
        llm.script(tool_calls(("run_command", {"command": "echo traced"}), usage=StepUsage(80, 9)),
                   text("Traced."))
        sent = server.send("trace this")
        assert server.wait_task(sent["task_id"])["status"] == TaskStatus.SUCCEEDED

        def names():
            with handler.lock:
                return [s.name for s in handler.spans]

        wait_until(lambda: names().count("chat scripted-model") >= 3 and "invoke_agent MasterAgent" in names(),
                   what="the turn's spans")
        with handler.lock:
            spans = list(handler.spans)
    finally:
        receiver.shutdown()
        receiver.server_close()
    turn = next(s for s in spans if s.name == "invoke_agent MasterAgent")
    inside = [s for s in spans if s.parent_span_id == turn.span_id]
    assert sorted(s.name for s in inside) == ["chat scripted-model", "chat scripted-model", "execute_tool run_command"]
    first = next(s for s in inside if _attributes(s).get("gen_ai.usage.input_tokens") == 80)
    assert _attributes(first)["gen_ai.usage.output_tokens"] == 9 and _attributes(first)["chat.purpose"] == "agent"
    assert _attributes(turn)["gen_ai.agent.name"] == "MasterAgent"
    assert _attributes(turn)["chat.task_id"] == sent["task_id"]
    route = next(s for s in spans if s.name == "route message")
    routing_chat = [s for s in spans if s.parent_span_id == route.span_id]
    assert [_attributes(s)["chat.purpose"] for s in routing_chat] == ["routing"]
    assert _attributes(route)["chat.route"] == "pipeline"
