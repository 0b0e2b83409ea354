"""What the agents cost, through the real server (docs/API.md, "Usage and budgets"; "Metrics"): the tokens
the scripted model reports reach the conversation's usage, the task's `task_complete` and `/metrics`
exactly; a provider that reports none gives estimates marked so; prices turn tokens into cost."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime

import socketio

from modules.event_catalogue import TaskCompleteEvent
from modules.statuses import Route, TaskStatus
from test.conftest import TWO_USERS, wait_until
from test.provider_replies import ended_early
from test.scripted_llm import StepUsage, match_system, text, tool_calls

SUMS = ("prompt_tokens", "completion_tokens", "cached_tokens", "reasoning_tokens", "requests", "estimated")
PRICES = """
[models."scripted-model"]
input = 2.0
cached_input = 0.5
output = 8.0
"""


def _sums(data: dict) -> dict:
    return {k: data[k] for k in SUMS}


def _metric(text_body: str, name: str, **labels: str) -> float:
    """The value of one sample of the exposition (labels in any order)."""
    for line in text_body.splitlines():
        match = re.match(rf"^{name}\{{(.*)\}} (\S+)$", line)
        if match and all(f'{k}="{v}"' in match.group(1) for k, v in labels.items()):
            return float(match.group(2))
    raise AssertionError(f"no sample {name} {labels} in:\n{text_body}")


def test_reported_usage_reaches_the_ledger_task_complete_and_metrics_exactly(make_server, llm, tmp_path):
    prices = tmp_path / "prices.toml"
    prices.write_text(PRICES)
    server = make_server(env={"MODEL_PRICES": str(prices)})
    llm.script(text(json.dumps({"query": "list files", "agent": "MasterAgent"}), usage=StepUsage(50, 7)),
               match=match_system("You are RoutingAgent"))
    llm.script(tool_calls(("run_command", {"command": "echo hi"}), usage=StepUsage(100, 20, 40, 5)),
               text("Done.", usage=StepUsage(150, 10, 100)))
    llm.script(text('{"questions": ["ok"]}', usage=StepUsage(30, 4)), match=match_system("You suggest"))
    sent = server.send("list files")
    cid = sent["conversation_id"]
    complete = server.wait_event(sent["task_id"], TaskCompleteEvent.TYPE)
    agent = {"prompt_tokens": 250, "completion_tokens": 30, "cached_tokens": 140, "reasoning_tokens": 5,
             "requests": 2, "estimated": 0}
    assert _sums(complete["usage"]) == agent
    assert complete["usage"]["cost"] == round(((250 - 140) * 2.0 + 140 * 0.5 + 30 * 8.0) / 1e6, 8)

    usage = wait_until(lambda: (u := server.get(f"/api/conversations/{cid}/usage").json())
                       and "suggestions" in u["by_purpose"] and u, what="the suggestions' usage")
    assert _sums(usage["by_purpose"]["agent"]) == agent
    assert _sums(usage["by_purpose"]["routing"]) == {"prompt_tokens": 50, "completion_tokens": 7, "cached_tokens": 0,
                                                     "reasoning_tokens": 0, "requests": 1, "estimated": 0}
    assert _sums(usage["by_purpose"]["suggestions"])["prompt_tokens"] == 30
    assert _sums(usage["by_agent"]["MasterAgent"]) == agent
    assert _sums(usage["by_agent"]["RoutingAgent"])["prompt_tokens"] == 50
    assert _sums(usage["totals"]) == {"prompt_tokens": 330, "completion_tokens": 41,
                                      "cached_tokens": 140, "reasoning_tokens": 5, "requests": 4, "estimated": 0}
    assert _sums(usage["by_model"]["scripted-model"]) == _sums(usage["totals"])
    assert {k: _sums(v) for k, v in usage["by_task"].items()} == {sent["task_id"]: agent}

    today = datetime.now(UTC).date().isoformat()
    days = server.get(f"/api/usage?from={today}&to={today}").json()
    assert [d["day"] for d in days["days"]] == [today] and _sums(days["totals"]) == _sums(usage["totals"])

    metrics = server.get("/metrics")
    assert metrics.status_code == 200 and metrics.headers["content-type"].startswith("text/plain")
    body = metrics.text
    for kind, count in (("prompt", 250), ("completion", 30), ("cached", 140), ("reasoning", 5)):
        assert _metric(body, "chat_model_tokens_total", model="scripted-model", purpose="agent", kind=kind) == count
    assert _metric(body, "chat_model_requests_total", model="scripted-model", purpose="agent", status="ok") == 2
    assert _metric(body, "chat_model_request_seconds_count", model="scripted-model", purpose="agent") == 2
    assert _metric(body, "chat_routing_decisions_total", route=Route.PIPELINE) == 1
    assert _metric(body, "chat_turns_ended_total", status=TaskStatus.SUCCEEDED) == 1
    assert "chat_turns_started_total 1.0" in body
    assert _metric(body, "chat_sandbox_commands_total", status="ok") == 1
    assert "chat_sandbox_command_seconds_count 1.0" in body


def test_a_provider_that_reports_no_usage_gives_estimates_marked_as_such(server, llm):
    llm.script(text("A reply of a few words, with no usage reported."))
    sent = server.send("hello there")
    complete = server.wait_event(sent["task_id"], TaskCompleteEvent.TYPE)
    usage = complete["usage"]
    assert usage["requests"] == 1 and usage["estimated"] == 1
    assert usage["prompt_tokens"] > 0 and usage["completion_tokens"] > 0 and usage["cost"] is None
    conv = server.get(f"/api/conversations/{sent['conversation_id']}/usage").json()
    assert conv["by_purpose"]["agent"]["estimated"] == 1
    assert conv["by_purpose"]["routing"]["estimated"] == conv["by_purpose"]["routing"]["requests"] == 1


def test_an_attempt_retried_after_the_provider_began_to_answer_is_a_failed_request_of_its_own(server, llm):
    """Its stream ended mid-call and was asked again: the provider may bill the cut attempt, so the ledger has a
    failed, estimated row for it beside the answer's own, reported row."""
    llm.script(ended_early(call_arguments='{"command": "ech'), text("Done.", usage=StepUsage(100, 10)))
    sent = server.send("hello again")
    complete = server.wait_event(sent["task_id"], TaskCompleteEvent.TYPE)
    assert len(llm.agent_requests) == 2
    assert (complete["usage"]["requests"], complete["usage"]["estimated"]) == (2, 1)
    assert complete["usage"]["prompt_tokens"] > 100 and complete["usage"]["completion_tokens"] > 10
    body = server.get("/metrics").text
    for status in ("failed", "ok"):
        assert _metric(body, "chat_model_requests_total", model="scripted-model", purpose="agent", status=status) == 1


def test_usage_is_the_callers_own(make_server, llm):
    server = make_server(env={"AUTH_TOKENS": TWO_USERS})
    server.token = "tok-alice"
    sent = server.send("hello")
    server.wait_event(sent["task_id"], TaskCompleteEvent.TYPE)
    assert server.get(f"/api/conversations/{sent['conversation_id']}/usage", token="tok-bob").status_code == 404
    assert server.get("/api/usage", token="tok-bob").json()["days"] == []
    assert server.get("/api/usage").json()["totals"]["requests"] >= 2
    assert server.get("/api/usage?from=2026-02-01&to=2026-01-01").json()["code"] == "invalid_range"
    assert server.get("/api/usage?from=yesterday").json()["code"] == "invalid_range"
    # the operator's metrics want their own token once users have tokens
    assert server.get("/metrics").status_code == 401


def test_metrics_count_connected_sockets_and_show_the_queue_depth(server):
    client = socketio.Client(reconnection=False)
    client.connect(server.url, wait_timeout=10)
    try:
        body = wait_until(lambda: (t := server.get("/metrics").text) and "chat_connected_sockets 1.0" in t and t,
                          what="the socket counted")
        assert "chat_queued_messages 0.0" in body
    finally:
        client.disconnect()
    wait_until(lambda: "chat_connected_sockets 0.0" in server.get("/metrics").text, what="the socket gone")


def test_metrics_want_the_metrics_token_when_auth_tokens_are_set(make_server, llm):
    server = make_server(env={"AUTH_TOKENS": TWO_USERS, "METRICS_TOKEN": "scrape-me"})
    assert server.get("/metrics", token="tok-alice").status_code == 401
    answer = server.get("/metrics", token="scrape-me")
    assert answer.status_code == 200 and "chat_turns_started_total" in answer.text


def test_the_usage_answers_are_in_the_openapi_document(server):
    paths = server.get("/openapi.json").json()["paths"]
    assert "/api/usage" in paths and "/api/conversations/{conversation_id}/usage" in paths
    assert "429" in paths["/api/tasks"]["post"]["responses"]
