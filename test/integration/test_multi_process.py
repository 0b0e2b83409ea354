"""Two server processes on one PostgreSQL database and one Redis: events, routing, stop and takeover."""

from __future__ import annotations

import os
import signal
import threading

import socketio

from test.conftest import wait_until
from test.db_urls import fresh_database
from test.integration.test_notifications import MASTER, master_tasks
from test.scripted_llm import text, tool_calls

REDIS = "redis://127.0.0.1:6379/0"


def test_two_processes_share_conversations(make_server, llm, tmp_path):
    with fresh_database("postgresql", tmp_path) as url:
        a = make_server(database_url=url, env={"REDIS_URL": REDIS})
        b = make_server(database_url=url, env={"REDIS_URL": REDIS})

        # a socket client of B sees the events of a task that A runs (Socket.IO over Redis)
        hold = threading.Event()
        llm.script(text("held answer", wait=hold), match=MASTER)
        llm.script(text("answer to the second"), match=MASTER)
        first = a.send("first")
        cid = first["conversation_id"]
        seen = []
        done = threading.Event()
        client = socketio.Client(reconnection=False)

        @client.on("*")
        def on_event(event, data):
            seen.append((event, data.get("task_id")))
            if event == "task_complete" and data.get("task_id") == first["task_id"]:
                done.set()

        client.connect(b.url, wait_timeout=10)
        try:
            assert client.call("join_conversation", {"conversation_id": cid}, timeout=10)["main_task_id"] == \
                first["task_id"]
            # a message sent through B while A's turn runs goes into A's turn, never a second turn at once
            second = b.send("second", cid)
            assert second["delivery"] == "injected_inline" and second["task_id"] == first["task_id"]
            status = b.get(f"/api/conversations/{cid}/running-status").json()
            assert status["is_main_running"] and status["main_task_id"] == first["task_id"]
            hold.set()
            assert done.wait(20), seen
        finally:
            client.disconnect()
        tasks = wait_until(lambda: (t := master_tasks(b, cid)) and len(t) == 2 and t, what="the follow-up turn")
        assert a.wait_task(tasks[1]["task_id"])["status"] == "succeeded"
        assert any(event == "text_chunk" for event, _ in seen)

        # a stop sent to B stops the task that A runs
        llm.script(tool_calls(("run_command", {"command": "sleep 30"})), match=MASTER)
        long = a.send("long job", cid)
        wait_until(lambda: any(e["type"] == "tool_start" for e in b.get(f"/api/tasks/{long['task_id']}").json()[
            "events"]), what="the command to start")
        assert b.post(f"/api/tasks/{long['task_id']}/cancel").status_code == 200
        assert b.wait_task(long["task_id"], timeout=15)["status"] == "stopped"

        # restarting B leaves A's running work alone; killing A hands its work to B
        never = threading.Event()
        llm.script(text("never finishes", wait=never), match=MASTER)
        held = a.send("hold on", cid)
        wait_until(lambda: b.get(f"/api/tasks/{held['task_id']}").json()["status"] == "running", what="running")
        b.kill()
        b.start()
        assert b.get(f"/api/tasks/{held['task_id']}").json()["status"] == "running"
        a.kill()
        task = b.wait_task(held["task_id"], timeout=20)
        assert task["status"] == "failed" and task["error"]["code"] == "interrupted"
        agents = b.get(f"/api/conversations/{cid}/agents").json()["data"]
        assert agents[0]["state"] == "idle"
        never.set()


def test_a_stalled_process_loses_its_task_and_does_not_write_after_the_takeover(make_server, llm, tmp_path):
    with fresh_database("postgresql", tmp_path) as url:
        a = make_server(database_url=url, env={"REDIS_URL": REDIS})
        b = make_server(database_url=url, env={"REDIS_URL": REDIS})
        hold = threading.Event()
        llm.script(text("late words from the stalled process", wait=hold), match=MASTER)
        sent = a.send("first")
        cid = sent["conversation_id"]
        llm.wait_for_requests(1)
        os.kill(a.proc.pid, signal.SIGSTOP)  # A stops heartbeating with its turn open
        try:
            task = b.wait_task(sent["task_id"], timeout=40)
            assert task["status"] == "failed" and task["error"]["code"] == "interrupted"
            llm.script(text("fresh answer from B"), match=MASTER)
            second = b.send("next", cid)
            assert second["delivery"] == "triggered_new_turn"
            assert b.wait_task(second["task_id"])["status"] == "succeeded"
        finally:
            os.kill(a.proc.pid, signal.SIGCONT)
        hold.set()
        wait_until(lambda: "was taken over by another process" in a.log_text(), timeout=20, what="A backs off")
        messages = b.get(f"/api/conversations/{cid}/messages").json()["data"]
        assert [(m["role"], (m["content"] or "").split("\n")[0]) for m in messages] == [
            ("user", "first"), ("user", "next"), ("assistant", "fresh answer from B")]
