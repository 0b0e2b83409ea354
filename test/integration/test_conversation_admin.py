"""Rename, delete, search, export and regenerate (docs/API.md), through the real server."""

from __future__ import annotations

import json
import sqlite3
import threading

import pytest
import socketio

from modules.event_catalogue import TextChunkEvent
from modules.statuses import CommandStatus, Delivery, TaskStatus, Visibility
from test.conftest import wait_until
from test.db_urls import fresh_database
from test.scripted_llm import text, tool_calls


def _chat(server, llm, message: str, reply: str, conversation_id: str | None = None) -> dict:
    llm.script(text(reply))
    sent = server.send(message, conversation_id)
    assert server.wait_task(sent["task_id"])["status"] == TaskStatus.SUCCEEDED
    return sent


def test_rename_survives_a_restart_and_refuses_bad_titles_and_other_users(auth_server, llm):
    conv = auth_server.post("/api/conversations", {"title": "first"}).json()
    cid = conv["conversation_id"]
    res = auth_server.request("PATCH", f"/api/conversations/{cid}", json={"title": "  Trip to Lisbon  "})
    assert res.status_code == 200, res.text
    assert res.json()["title"] == "Trip to Lisbon" and res.json()["agents"][0]["display_name"] == "MasterAgent"
    for bad in ({"title": "   "}, {"title": "x" * 201}, {"title": 5}, {}):
        res = auth_server.request("PATCH", f"/api/conversations/{cid}", json=bad)
        assert (res.status_code, res.json()["code"]) == (400, "invalid_title"), bad
    res = auth_server.request("PATCH", f"/api/conversations/{cid}", json={"title": "bob's"}, token="tok-bob")
    assert (res.status_code, res.json()["code"]) == (404, "not_found")
    assert auth_server.request("PATCH", "/api/conversations/nope", json={"title": "x"}).status_code == 404
    auth_server.restart()
    assert auth_server.get(f"/api/conversations/{cid}").json()["title"] == "Trip to Lisbon"
    titles = [c["title"] for c in auth_server.get("/api/conversations").json()["data"]]
    assert titles == ["Trip to Lisbon"]


def test_search_matches_titles_and_messages_case_insensitively_per_user(auth_server, llm):
    a = _chat(auth_server, llm, "Where is the Gulbenkian museum?", "In Lisbon, near Praça de Espanha.")
    b = _chat(auth_server, llm, "Plan a 100% budget trip", "Sure: trains and hostels.")
    auth_server.request("PATCH", f"/api/conversations/{b['conversation_id']}", json={"title": "Budget_Plans"})

    def found(q: str, token: str | None = None) -> set[str]:
        res = auth_server.get("/api/conversations", params={"q": q}, **({"token": token} if token else {}))
        assert res.status_code == 200, res.text
        return {c["conversation_id"] for c in res.json()["data"]}

    assert found("gulbenkian") == {a["conversation_id"]}  # the user's message
    assert found("PRAÇA DE") == {a["conversation_id"]}  # the agent's reply
    assert found("budget_") == {b["conversation_id"]}  # the title; `_` is no wildcard
    assert found("100%") == {b["conversation_id"]}  # nor is `%`
    assert found("nothing like this") == set()
    assert found("") == {a["conversation_id"], b["conversation_id"]}
    assert found("lisbon", token="tok-bob") == set()


def test_export_markdown_and_json_hold_every_agent_master_first(auth_server, llm):
    llm.script(tool_calls(("create_sub_agent", {"role": "InfoAgent", "task": "find opening hours",
                                                "run_in_background": False})))
    llm.script(text("Open 10:00-18:00."))  # the sub-agent
    llm.script(text("The museum opens at ten."))  # the master, with the sub-agent's result
    sent = auth_server.send("When does the museum open?")
    assert auth_server.wait_task(sent["task_id"], timeout=30)["status"] == TaskStatus.SUCCEEDED
    cid = sent["conversation_id"]

    res = auth_server.get(f"/api/conversations/{cid}/export", params={"format": "json"})
    assert res.status_code == 200, res.text
    assert res.headers["Content-Type"].startswith("application/json")
    assert res.headers["Content-Disposition"].startswith("attachment; filename=")
    doc = json.loads(res.content)
    assert doc["conversation"]["conversation_id"] == cid
    names = [entry["agent"]["display_name"] for entry in doc["agents"]]
    assert names == ["MasterAgent", "InfoAgent_1"]
    master_msgs = doc["agents"][0]["messages"]
    assert master_msgs[0]["content"] == "When does the museum open?" and master_msgs[0]["created_at"].endswith("Z")
    assert any(m["content"] == "Open 10:00-18:00." for m in doc["agents"][1]["messages"])

    md = auth_server.get(f"/api/conversations/{cid}/export", params={"format": "md"})
    assert md.status_code == 200 and md.headers["Content-Type"].startswith("text/markdown")
    body = md.content.decode()
    assert body.index("## MasterAgent") < body.index("## InfoAgent_1")
    assert "When does the museum open?" in body and "The museum opens at ten." in body
    assert master_msgs[0]["created_at"] in body
    assert auth_server.get(f"/api/conversations/{cid}/export").headers["Content-Type"].startswith("text/markdown")

    bad = auth_server.get(f"/api/conversations/{cid}/export", params={"format": "pdf"})
    assert (bad.status_code, bad.json()["code"]) == (400, "invalid_format")
    other = auth_server.get(f"/api/conversations/{cid}/export", params={"format": "json"}, token="tok-bob")
    assert other.status_code == 404


def test_regenerate_answers_the_last_user_message_again_and_keeps_the_old_answer(auth_server, llm):
    empty = auth_server.post("/api/conversations", {}).json()["conversation_id"]
    res = auth_server.post(f"/api/conversations/{empty}/regenerate")
    assert (res.status_code, res.json()["code"]) == (409, "nothing_to_regenerate")

    sent = _chat(auth_server, llm, "Name a colour", "Red.")
    cid = sent["conversation_id"]
    assert auth_server.post(f"/api/conversations/{cid}/regenerate", token="tok-bob").status_code == 404

    llm.script(text("Blue."))
    res = auth_server.post(f"/api/conversations/{cid}/regenerate")
    assert res.status_code == 202, res.text
    answer = res.json()
    assert answer["delivery"] == Delivery.TRIGGERED_NEW_TURN and answer["target_agent"] == "MasterAgent"
    assert answer["task_id"] and answer["task_id"] != sent["task_id"]
    assert auth_server.wait_task(answer["task_id"])["status"] == TaskStatus.SUCCEEDED
    request = llm.agent_requests[-1].body["messages"]
    # the old answer is an older version of the turn: it left the model's view (API.md, "Versions of a turn")
    assert [m["content"] for m in request[1:]] == ["Name a colour"]
    history = auth_server.get(f"/api/conversations/{cid}/messages").json()["data"]
    assert [m["content"] for m in history if m["role"] == "assistant"] == ["Red.", "Blue."]
    copy = [m for m in history if m["role"] == "user"][-1]
    assert copy["metadata"]["visibility"] == Visibility.HIDDEN
    assert copy["metadata"]["regenerate_of"] == sent["message_id"]

    release = threading.Event()
    llm.script(text("Green.", wait=release))
    running = auth_server.post(f"/api/conversations/{cid}/regenerate").json()
    try:
        res = auth_server.post(f"/api/conversations/{cid}/regenerate")
        assert (res.status_code, res.json()["code"]) == (409, "task_in_progress")
    finally:
        release.set()
    assert auth_server.wait_task(running["task_id"])["status"] == TaskStatus.SUCCEEDED


def test_delete_stops_the_work_and_every_endpoint_then_answers_404(auth_server, llm):
    kept = _chat(auth_server, llm, "keep me", "kept")
    llm.script(tool_calls(("run_command", {"command": "sleep 59.31", "run_in_background": True})))
    llm.script(text("still streaming " * 40, chunk_size=4, delay_s=0.1))  # ~16 s unless stopped
    sent = auth_server.send("start something long")
    cid = sent["conversation_id"]
    auth_server.wait_event(sent["task_id"], TextChunkEvent.TYPE, timeout=20)
    commands = auth_server.get("/api/background_commands", params={"conversation_id": cid}).json()["data"]
    assert [c["status"] for c in commands] == [CommandStatus.RUNNING]
    workspace = auth_server.workspace(cid)
    assert workspace.is_dir()
    images = sorted((auth_server.data_dir / "workspace_images").glob(f"{cid}.*"))

    assert auth_server.request("DELETE", f"/api/conversations/{cid}", token="tok-bob").status_code == 404
    assert auth_server.get(f"/api/conversations/{cid}").status_code == 200  # bob's try changed nothing

    res = auth_server.request("DELETE", f"/api/conversations/{cid}")
    assert res.status_code == 204, res.text
    for path in (f"/api/conversations/{cid}", f"/api/conversations/{cid}/messages",
                 f"/api/conversations/{cid}/agents", f"/api/conversations/{cid}/files",
                 f"/api/tasks/{sent['task_id']}", f"/api/tasks?conversation_id={cid}",
                 f"/api/background_commands?conversation_id={cid}"):
        assert auth_server.get(path).status_code == 404, path
    assert auth_server.request("DELETE", f"/api/conversations/{cid}").status_code == 404
    assert auth_server.get(f"/api/conversations/{cid}/export").status_code == 404
    assert auth_server.request("PATCH", f"/api/conversations/{cid}", json={"title": "back?"}).status_code == 404
    assert auth_server.post(f"/api/conversations/{cid}/regenerate").status_code == 404
    assert auth_server.request("POST", f"/api/conversations/{cid}/files",
                               files={"file": ("a.txt", b"x")}).status_code == 404
    client = socketio.Client(reconnection=False)
    client.connect(auth_server.url, auth={"token": "tok-alice"}, wait_timeout=10)
    try:
        ack = client.call("join_conversation", {"conversation_id": cid}, timeout=10)
        assert (ack["success"], ack["code"]) == (False, "not_found")
    finally:
        client.disconnect()
    assert auth_server.post("/api/tasks", {"message": "more", "conversation_id": cid}).status_code == 404
    listed = [c["conversation_id"] for c in auth_server.get("/api/conversations").json()["data"]]
    assert listed == [kept["conversation_id"]]
    assert not workspace.exists()
    assert not [image for image in images if image.suffix == ".ext4" and image.exists()]  # its file system too
    assert not list((auth_server.data_dir / "command_logs").iterdir())  # the only command's log is gone
    wait_until(lambda: b"sleep 59.31" not in _process_table(), timeout=15, what="the command to be killed")
    assert len(llm.agent_requests) == 3  # nothing asked the model after the delete (no follow-up turn)
    wait_until(lambda: _rows_of(auth_server, cid) == 0, timeout=20, what="the conversation's rows to be removed")
    auth_server.restart()
    assert auth_server.get(f"/api/conversations/{cid}").status_code == 404
    assert auth_server.get(f"/api/conversations/{kept['conversation_id']}/messages").status_code == 200


def _rows_of(server, cid: str) -> int:
    with sqlite3.connect(server.data_dir / "app.db") as db:
        return sum(db.execute(f"select count(*) from {table} where conversation_id = ?", (cid,)).fetchone()[0]
                   for table in ("messages", "tasks", "agents", "pending_messages", "background_commands"))


def _process_table() -> bytes:
    import subprocess
    return subprocess.run(["ps", "-eo", "args"], capture_output=True, check=True).stdout


@pytest.mark.parametrize("kind", ["postgresql", "mariadb"])
def test_rename_search_export_and_delete_on(kind, make_server, llm, tmp_path):
    with fresh_database(kind, tmp_path) as url:
        server = make_server(database_url=url)
        llm.script(tool_calls(("run_command", {"command": "echo 50%_done > out.txt"})))
        llm.script(text("Wrote 50%_done to OUT.TXT."))
        sent = server.send("write the progress file")
        assert server.wait_task(sent["task_id"])["status"] == TaskStatus.SUCCEEDED
        cid = sent["conversation_id"]
        other = server.post("/api/conversations", {"title": "50 percent"}).json()["conversation_id"]
        assert server.request("PATCH", f"/api/conversations/{cid}", json={"title": "Ünïcode ✓"}).status_code == 200

        def found(q: str) -> list[str]:
            return [c["conversation_id"] for c in server.get("/api/conversations", params={"q": q}).json()["data"]]

        assert found("50%_") == [cid] and found("out.txt") == [cid] and found("ünïcode") == [cid]
        assert found("percent") == [other]
        doc = server.get(f"/api/conversations/{cid}/export", params={"format": "json"}).json()
        assert [m["role"] for m in doc["agents"][0]["messages"]] == ["user", "assistant", "tool", "assistant"]
        assert server.request("DELETE", f"/api/conversations/{cid}").status_code == 204
        assert server.get(f"/api/tasks/{sent['task_id']}").status_code == 404
        assert [c["conversation_id"] for c in server.get("/api/conversations").json()["data"]] == [other]
        server.stop()


def test_openapi_lists_the_new_operations(server):
    paths = server.get("/openapi.json").json()["paths"]
    expected = {"/api/conversations": {"get"}, "/api/conversations/{conversation_id}": {"get", "patch", "delete"},
                "/api/conversations/{conversation_id}/export": {"get"},
                "/api/conversations/{conversation_id}/files": {"get", "post"},
                "/api/conversations/{conversation_id}/files/{name}": {"get"},
                "/api/conversations/{conversation_id}/regenerate": {"post"},
                "/api/conversations/{conversation_id}/queued": {"get"}}
    for path, methods in expected.items():
        assert methods <= set(paths[path]), path
    upload = paths["/api/conversations/{conversation_id}/files"]["post"]
    assert "multipart/form-data" in upload["requestBody"]["content"]
    assert "413" in upload["responses"]
    assert "content" not in paths["/api/conversations/{conversation_id}"]["delete"]["responses"]["204"]
    assert any(p["name"] == "q" for p in paths["/api/conversations"]["get"]["parameters"])
