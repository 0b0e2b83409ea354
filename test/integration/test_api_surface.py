"""REST contract details: auth and ownership, bad input, health, start-up refusals, the demo model."""

from __future__ import annotations

import json
import os

import pytest
import requests
import socketio

from modules.event_catalogue import SuggestionsEvent, TaskCompleteEvent, TextEndEvent, ToolResultEvent, ToolStartEvent
from modules.statuses import AgentState, TaskStatus
from test.conftest import ROOT, event_types, run_refused_start
from test.scripted_llm import text, tool_calls


def test_tokens_and_ownership(auth_server, llm):
    llm.set_default(text("hi alice"))
    assert auth_server.get("/api/conversations", token="").status_code == 401
    assert auth_server.get("/api/conversations", token="wrong").json()["code"] == "unauthorized"
    sent = auth_server.send("private")
    auth_server.wait_task(sent["task_id"])
    cid, tid = sent["conversation_id"], sent["task_id"]

    for path in (
        f"/api/conversations/{cid}",
        f"/api/conversations/{cid}/messages",
        f"/api/conversations/{cid}/agents",
        f"/api/conversations/{cid}/running-status",
        f"/api/tasks/{tid}",
        f"/api/tasks?conversation_id={cid}",
    ):
        res = auth_server.get(path, token="tok-bob")
        assert res.status_code == 404, path
        assert res.json() == {"success": False, "error": res.json()["error"], "code": "not_found"}
        assert auth_server.get(path).status_code == 200, path
    assert auth_server.post(f"/api/tasks/{tid}/cancel", token="tok-bob").status_code == 404
    res = auth_server.post("/api/tasks", {"message": "intrude", "conversation_id": cid}, token="tok-bob")
    assert res.status_code == 404
    assert auth_server.get("/api/conversations", token="tok-bob").json()["data"] == []
    # ...and nothing of Bob's reached Alice's conversation: no message, no task, nothing queued, no new title.
    messages = auth_server.get(f"/api/conversations/{cid}/messages").json()["data"]
    assert [(m["role"], m["content"]) for m in messages] == [("user", "private"), ("assistant", "hi alice")]
    assert [t["task_id"] for t in auth_server.get(f"/api/tasks?conversation_id={cid}").json()["data"]] == [tid]
    assert [a["pending_count"] for a in auth_server.get(f"/api/conversations/{cid}/agents").json()["data"]] == [0]
    assert auth_server.get(f"/api/tasks/{tid}").json()["status"] == TaskStatus.SUCCEEDED
    assert auth_server.get(f"/api/conversations/{cid}").json()["title"] == "private"

    # sockets need the token too
    with pytest.raises(socketio.exceptions.ConnectionError):
        socketio.Client(reconnection=False).connect(auth_server.url, auth={"token": "wrong"}, wait_timeout=5)
    bob = socketio.Client(reconnection=False)
    bob.connect(auth_server.url, auth={"token": "tok-bob"}, wait_timeout=5)
    try:
        ack = bob.call("join_conversation", {"conversation_id": cid}, timeout=5)
        assert ack["success"] is False and ack["code"] == "not_found"
    finally:
        bob.disconnect()


def test_bad_input_gets_clear_errors(server, llm):
    def post_raw(path, data, content_type="application/json"):
        return requests.post(server.url + path, data=data, headers={"Content-Type": content_type}, timeout=10)

    cases = [
        (post_raw("/api/tasks", "{not json"), 400, "invalid_json"),
        (post_raw("/api/tasks", "[1, 2]"), 400, "invalid_json"),
        (post_raw("/api/tasks", ""), 400, "invalid_json"),
        (server.post("/api/tasks", {"message": ""}), 400, "invalid_message"),
        (server.post("/api/tasks", {"message": 42}), 400, "invalid_message"),
        (server.post("/api/tasks", {"message": "x" * 20_001}), 413, "message_too_large"),
        (post_raw("/api/tasks", json.dumps({"message": "x" * 300_000})), 413, "payload_too_large"),
        (server.post("/api/tasks", {"message": "hi", "conversation_id": "missing"}), 404, "not_found"),
        (server.post("/api/tasks", {"message": "hi", "conversation_id": 7}), 400, "invalid_conversation_id"),
        (server.post("/api/tasks", {"message": "hi", "client_message_id": ""}), 400, "invalid_client_message_id"),
        (server.post("/api/tasks", {"message": "nul \u0000 inside"}), 400, "invalid_message"),
        (post_raw("/api/tasks", '{"message": "lone \\ud800 surrogate"}'), 400, "invalid_message"),
        (post_raw("/api/tasks", '{"message": "hi", "client_message_id": "\\udfff"}'), 400,
         "invalid_client_message_id"),
        (post_raw("/api/conversations", '{"title": "\\ud800"}'), 400, "invalid_title"),
        (server.get("/api/tasks/unknown"), 404, "not_found"),
        (server.post("/api/tasks/unknown/cancel"), 404, "not_found"),
        (server.get("/api/tasks"), 400, "missing_conversation_id"),
        (server.get("/api/conversations/unknown"), 404, "not_found"),
        (server.post("/api/conversations", {"title": 5}), 400, "invalid_title"),
        (server.get("/api/nothing-here"), 404, "not_found"),
        (server.request("DELETE", "/api/tasks"), 405, "method_not_allowed"),
    ]
    for res, status, code in cases:
        assert res.status_code == status, (res.request.method, res.request.url, res.text)
        body = res.json()
        assert body["success"] is False and body["code"] == code and body["error"], body

    sent = server.send("fine")
    server.wait_task(sent["task_id"])
    assert server.get(f"/api/tasks/{sent['task_id']}?from=-1").json()["code"] == "invalid_offset"
    assert server.get(f"/api/tasks/{sent['task_id']}?from=abc").status_code == 400
    assert server.get(f"/api/tasks/{sent['task_id']}?from=99999999999999999999").json()["code"] == "invalid_offset"
    # nothing bad was stored along the way
    assert len(server.get("/api/conversations").json()["data"]) == 1


def test_conversation_listing_and_agents(server, llm):
    llm.set_default(text("ok"))
    a = server.post("/api/conversations", {"title": "First"})
    assert a.status_code == 201 and a.json()["agents"][0]["display_name"] == "MasterAgent"
    b = server.post("/api/conversations").json()
    server.wait_task(server.send("name me after this", b["conversation_id"])["task_id"])
    listed = server.get("/api/conversations").json()["data"]
    assert [c["conversation_id"] for c in listed] == [b["conversation_id"], a.json()["conversation_id"]]
    assert listed[0]["title"] == "name me after this"
    agents = server.get(f"/api/conversations/{b['conversation_id']}/agents").json()["data"]
    assert agents == [
        {
            **agents[0],
            "display_name": "MasterAgent",
            "role": "MasterAgent",
            "state": AgentState.COMPLETED,
            "parent_id": None,
            "pending_count": 0,
        }
    ]
    tasks = server.get(f"/api/tasks?conversation_id={b['conversation_id']}").json()["data"]
    assert len(tasks) == 1 and tasks[0]["status"] == TaskStatus.SUCCEEDED and tasks[0]["task_type"] == "chat"
    assert server.get(f"/api/tasks?conversation_id={b['conversation_id']}&status=active").json()["data"] == []


def test_health_reports_database_and_model(server, llm):
    body = server.get("/healthz").json()
    assert body["ok"] is True and body["database"] == "sqlite"
    assert body["model"] == llm.base_url and body["demo_model"] is False


def test_demo_model_answers_and_runs_a_command_without_a_key(make_server, llm):
    server = make_server(env={"OPENAI_API_KEY": "", "DEMO_CHUNK_DELAY_S": "0"})
    health = server.get("/healthz").json()
    assert health["model"] == "demo" and health["demo_model"] is True
    task = server.wait_task(server.send("run `echo demo-works`")["task_id"])
    assert task["status"] == TaskStatus.SUCCEEDED
    types = [t for t in event_types(task) if t != SuggestionsEvent.TYPE]  # suggestions may follow the reply
    assert ToolStartEvent.TYPE in types and ToolResultEvent.TYPE in types and types[-1] == TaskCompleteEvent.TYPE
    final = [e for e in task["events"] if e["type"] == TextEndEvent.TYPE][-1]["data"]["content"]
    assert "demo-works" in final
    assert llm.agent_requests == []


def test_the_built_ui_is_served_at_the_root(server):
    if not (ROOT / "frontend" / "dist" / "index.html").is_file():  # as the browser suite does
        if os.environ.get("CI"):
            pytest.fail("frontend/dist is missing: build the UI with `make frontend`", pytrace=False)
        pytest.skip("frontend/dist is missing: build the UI with `make frontend`")
    page = server.get("/")
    assert page.status_code == 200 and 'id="app"' in page.text


def test_refuses_a_public_host_without_tokens(tmp_path):
    env = {"PATH": "/usr/bin:/bin", "DATA_DIR": str(tmp_path)}
    res = run_refused_start(["--host", "0.0.0.0"], env)
    assert res.returncode == 2
    assert "AUTH_TOKENS" in res.stderr and "0.0.0.0" in res.stderr


def test_tool_call_ids_are_unique_per_call(server, llm):
    llm.script(tool_calls(("run_command", {"command": "echo a"}), ("run_command", {"command": "echo b"})))
    llm.script(text("both ran"))
    task = server.wait_task(server.send("two")["task_id"])
    starts = [e["data"]["tool_call_id"] for e in task["events"] if e["type"] == ToolStartEvent.TYPE]
    results = [e["data"]["tool_call_id"] for e in task["events"] if e["type"] == ToolResultEvent.TYPE]
    assert starts == results and len(set(starts)) == 2
