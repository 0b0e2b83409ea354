"""Per-user budgets through real servers (README, "Configuration": BUDGET_*; docs/API.md, "Usage and
budgets"): a send over budget answers 429 `budget_exceeded` with when it resets, over REST and over the
socket, while another user is unaffected, across two processes on one database; a turn that crosses the
budget ends after its current round with an `error` event, its history whole."""

from __future__ import annotations

import json
import threading
from datetime import UTC, datetime, timedelta

import socketio

from modules.event_catalogue import ErrorEvent, ToolResultEvent
from modules.statuses import QueueStatus, TaskStatus
from test.conftest import TWO_USERS, event_types, wait_until
from test.db_urls import fresh_database
from test.scripted_llm import StepUsage, text, tool_calls

# Each user may use 1,000 tokens a day; the scripted agent's first reply reports 1,200.
BUDGET = {"AUTH_TOKENS": TWO_USERS, "BUDGET_TOKENS_PER_DAY": "1000"}


def _tomorrow_midnight() -> float:
    today = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    return (today + timedelta(days=1)).timestamp()


def _send(server, message: str, token: str):
    return server.post("/api/tasks", {"message": message}, token=token)


def test_a_user_over_budget_gets_429_on_every_process_while_another_user_is_unaffected(make_server, llm, tmp_path):
    with fresh_database("postgresql", tmp_path) as url:
        a = make_server(database_url=url, env=BUDGET)
        b = make_server(database_url=url, env=BUDGET)
        a.token = b.token = "tok-alice"
        llm.script(text("A long answer.", usage=StepUsage(1100, 100)))
        first = _send(a, "spend it", "tok-alice")
        assert first.status_code == 202
        task_id = a.routed(first.json())["task_id"]
        task = a.wait_task(task_id)
        assert task["status"] == TaskStatus.SUCCEEDED

        for server in (a, b):  # the database holds the ledger: the other process knows too
            refused = _send(server, "more", "tok-alice")
            assert refused.status_code == 429, refused.text
            body = refused.json()
            assert body["code"] == "budget_exceeded" and body["resets_at"] == _tomorrow_midnight()
            budget = body["budget"]  # used: the agent's 1,200 and the routing (and suggestion) estimates
            assert (budget["kind"], budget["period"], budget["limit"]) == ("tokens", "day", 1000.0)
            assert budget["used"] > 1200
        assert b.get("/api/conversations").json()["data"][0]["conversation_id"] == \
            task["conversation_id"]  # the refused sends stored nothing: no new conversation

        llm.script(text("Bob's answer."))
        assert _send(b, "hello", "tok-bob").status_code == 202

        client = socketio.Client(reconnection=False)
        client.connect(b.url, auth={"token": "tok-alice"}, wait_timeout=10)
        try:
            ack = client.call("send_message", {"message": "over the socket"}, timeout=10)
        finally:
            client.disconnect()
        assert ack["success"] is False and ack["code"] == "budget_exceeded" and ack["status"] == 429
        assert ack["resets_at"] == _tomorrow_midnight()
        again = a.post(f"/api/conversations/{task['conversation_id']}/regenerate")
        assert again.status_code == 429 and again.json()["code"] == "budget_exceeded"


def test_a_turn_that_crosses_the_budget_ends_after_its_round_with_a_clear_error(make_server, llm):
    server = make_server(env=BUDGET)
    server.token = "tok-alice"
    llm.script(tool_calls(("run_command", {"command": "echo one"}), usage=StepUsage(1100, 100)),
               text("never asked"))
    sent = server.send("work on it")
    task = server.wait_task(sent["task_id"])
    assert task["status"] == TaskStatus.FAILED and task["error"]["code"] == "budget_exceeded"
    types = event_types(task)
    # The round ended: its tool ran, its result is kept.
    assert types[-1] == ErrorEvent.TYPE and ToolResultEvent.TYPE in types
    error = task["events"][-1]["data"]
    assert error["code"] == "budget_exceeded" and error["resets_at"] == _tomorrow_midnight()
    assert "resets at" in error["message"]
    assert len(llm.agent_requests) == 1  # no model request after the budget was used up
    history = server.get(f"/api/conversations/{sent['conversation_id']}/messages").json()["data"]
    assert [m["role"] for m in history] == ["user", "assistant", "tool"]


def test_a_message_queued_while_a_turn_crosses_the_budget_stays_queued(make_server, llm):
    server = make_server(env=BUDGET)
    server.token = "tok-alice"
    hold = threading.Event()
    llm.script(tool_calls(("run_command", {"command": "echo one"}), usage=StepUsage(1100, 100), wait=hold),
               text("never asked"))
    first = server.send("work on it")
    cid = first["conversation_id"]
    wait_until(lambda: len(llm.agent_requests) == 1, what="the round that crosses the budget asked")
    server.send("and this too", conversation_id=cid)  # accepted: the round's usage is not in yet
    hold.set()
    task = server.wait_task(first["task_id"])
    assert task["status"] == TaskStatus.FAILED and task["error"]["code"] == "budget_exceeded"

    queued = server.get(f"/api/conversations/{cid}/queued").json()["data"]
    assert [(m["content"], m["status"]) for m in queued] == [("and this too", QueueStatus.QUEUED)]
    history = server.get(f"/api/conversations/{cid}/messages").json()["data"]
    assert "and this too" not in [m["content"] for m in history]
    assert len(llm.agent_requests) == 1


def test_a_reply_that_crossed_the_budget_gets_no_suggestions(make_server, llm):
    server = make_server(env={**BUDGET, "BUDGET_TOKENS_PER_DAY": "100000"})  # Bob's estimates stay well within it
    llm.script(text("A long answer.", usage=StepUsage(150_000, 100)))
    server.token = "tok-alice"
    alice = server.send("spend it all")
    assert server.wait_task(alice["task_id"])["status"] == TaskStatus.SUCCEEDED

    llm.script(text("Bob's answer."))
    server.token = "tok-bob"
    bob = server.send("hello from bob")
    server.wait_task(bob["task_id"])
    # Bob's suggestions, asked after his reply, come after any of Alice's (asked after hers, earlier).
    asked = wait_until(lambda: [r for r in llm.requests if "You suggest" in json.dumps(r.body)] or None,
                       what="Bob's suggestions asked")
    assert ["hello from bob" in json.dumps(r.body) for r in asked] == [True]  # none for a user over budget
