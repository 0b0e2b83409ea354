"""Two server processes on one PostgreSQL database and one Redis: events, routing, stop and takeover."""

from __future__ import annotations

import os
import signal
import threading

import socketio

from modules.event_catalogue import AskUserEvent, TaskCompleteEvent, TextChunkEvent, ToolResultEvent, ToolStartEvent
from modules.statuses import AgentState, CommandStatus, Delivery, Route, TaskStatus
from test.conftest import wait_until
from test.db_urls import fresh_database
from test.integration.helpers import MASTER, master_tasks
from test.scripted_llm import text, tool_calls


def test_two_processes_share_conversations(make_server, llm, tmp_path, redis_url):
    with fresh_database("postgresql", tmp_path) as url:
        a = make_server(database_url=url, env={"REDIS_URL": redis_url})
        b = make_server(database_url=url, env={"REDIS_URL": redis_url})

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
            if event == TaskCompleteEvent.TYPE and data.get("task_id") == first["task_id"]:
                done.set()

        client.connect(b.url, wait_timeout=10)
        try:
            assert client.call("join_conversation", {"conversation_id": cid}, timeout=10)["main_task_id"] == \
                first["task_id"]
            # a message sent through B while A's turn runs goes into A's turn, never a second turn at once
            second = b.send("second", cid)
            assert second["delivery"] == Delivery.INJECTED_INLINE and second["task_id"] == first["task_id"]
            status = b.get(f"/api/conversations/{cid}/running-status").json()
            assert status["is_main_running"] and status["main_task_id"] == first["task_id"]
            hold.set()
            assert done.wait(20), seen
        finally:
            client.disconnect()
        tasks = wait_until(lambda: (t := master_tasks(b, cid)) and len(t) == 2 and t, what="the follow-up turn")
        assert a.wait_task(tasks[1]["task_id"])["status"] == TaskStatus.SUCCEEDED
        assert any(event == TextChunkEvent.TYPE for event, _ in seen)

        # a stop sent to B stops the task that A runs
        llm.script(tool_calls(("run_command", {"command": "sleep 30"})), match=MASTER)
        long = a.send("long job", cid)
        b.wait_event(long["task_id"], ToolStartEvent.TYPE)  # the command started
        assert b.post(f"/api/tasks/{long['task_id']}/cancel").status_code == 200
        assert b.wait_task(long["task_id"], timeout=15)["status"] == TaskStatus.STOPPED

        # restarting B leaves A's running work alone; killing A hands its work to B
        never = threading.Event()
        llm.script(text("never finishes", wait=never), match=MASTER)
        held = a.send("hold on", cid)
        wait_until(lambda: b.get(f"/api/tasks/{held['task_id']}").json()["status"] == TaskStatus.RUNNING,
                   what="running")
        b.kill()
        b.start()
        assert b.get(f"/api/tasks/{held['task_id']}").json()["status"] == TaskStatus.RUNNING
        a.kill()
        task = b.wait_task(held["task_id"], timeout=20)
        assert task["status"] == TaskStatus.FAILED and task["error"]["code"] == "interrupted"
        agents = b.get(f"/api/conversations/{cid}/agents").json()["data"]
        assert agents[0]["state"] == AgentState.IDLE
        never.set()


def test_a_stalled_process_loses_its_task_and_does_not_write_after_the_takeover(make_server, llm, tmp_path,
                                                                                redis_url):
    with fresh_database("postgresql", tmp_path) as url:
        a = make_server(database_url=url, env={"REDIS_URL": redis_url})
        b = make_server(database_url=url, env={"REDIS_URL": redis_url})
        hold = threading.Event()
        llm.script(text("late words from the stalled process", wait=hold), match=MASTER)
        sent = a.send("first")
        cid = sent["conversation_id"]
        llm.wait_for_requests(1)
        os.kill(a.proc.pid, signal.SIGSTOP)  # A stops heartbeating with its turn open
        try:
            task = b.wait_task(sent["task_id"], timeout=40)
            assert task["status"] == TaskStatus.FAILED and task["error"]["code"] == "interrupted"
            llm.script(text("fresh answer from B"), match=MASTER)
            second = b.send("next", cid)
            assert second["delivery"] == Delivery.TRIGGERED_NEW_TURN
            assert b.wait_task(second["task_id"])["status"] == TaskStatus.SUCCEEDED
        finally:
            os.kill(a.proc.pid, signal.SIGCONT)
        hold.set()
        wait_until(lambda: "was taken over by another process" in a.log_text(), timeout=20, what="A backs off")
        messages = b.get(f"/api/conversations/{cid}/messages").json()["data"]
        assert [(m["role"], (m["content"] or "").split("\n")[0]) for m in messages] == [
            ("user", "first"), ("user", "next"), ("assistant", "fresh answer from B")]


def test_peer_signals_answer_an_ask_and_stop_a_task_in_another_process_without_waiting_for_a_poll(
        make_server, llm, tmp_path, redis_url):
    """With the database polls an hour apart, only the Redis signal can bring B's answer and B's stop to A."""
    with fresh_database("postgresql", tmp_path) as url:
        env = {"REDIS_URL": redis_url, "PEER_POLL_S": "3600"}
        a = make_server(database_url=url, env=env)
        b = make_server(database_url=url, env=env)

        llm.script(tool_calls(("ask_user", {"question": "Which file?"})), match=MASTER)
        llm.script(text("Reading notes.txt."), match=MASTER)
        sent = a.send("open a file for me")
        cid = sent["conversation_id"]
        ask = b.wait_event(sent["task_id"], AskUserEvent.TYPE)
        answer = b.send("notes.txt", cid, question_id=ask["question_id"])
        assert answer["route"] == Route.HIL and answer["task_id"] == sent["task_id"]
        task = a.wait_task(sent["task_id"], timeout=20)
        assert task["status"] == TaskStatus.SUCCEEDED
        result = next(e for e in task["events"] if e["type"] == ToolResultEvent.TYPE)["data"]["result"]
        assert "notes.txt" in result

        llm.script(tool_calls(("run_command", {"command": "sleep 60"})), match=MASTER)
        long = a.send("long job", cid)
        b.wait_event(long["task_id"], ToolStartEvent.TYPE)  # the command started
        assert b.post(f"/api/tasks/{long['task_id']}/cancel").status_code == 200
        assert a.wait_task(long["task_id"], timeout=20)["status"] == TaskStatus.STOPPED

        _cancel_a_background_command_of_a_through_b(a, b, llm, cid)


def test_a_cancel_through_another_process_reaches_the_owner_by_its_database_poll(make_server, llm, tmp_path,
                                                                                  redis_url):
    """No Redis: the cancel flag in the database is all the owner gets, and it is enough."""
    with fresh_database("postgresql", tmp_path) as url:
        env = {"PEER_POLL_S": "0.5"}
        a = make_server(database_url=url, env=env)
        b = make_server(database_url=url, env=env)
        llm.script(text("Hello."), match=MASTER)
        first = a.send("hello")
        assert a.wait_task(first["task_id"])["status"] == TaskStatus.SUCCEEDED
        _cancel_a_background_command_of_a_through_b(a, b, llm, first["conversation_id"])


def _cancel_a_background_command_of_a_through_b(a, b, llm, cid):
    llm.script(tool_calls(("run_command", {"command": "sleep 60", "run_in_background": True})), match=MASTER)
    llm.script(text("Started it."), match=MASTER)
    llm.script(text("It was cancelled."), match=MASTER)
    started = a.send("start a long job in the background", cid)
    assert a.wait_task(started["task_id"])["status"] == TaskStatus.SUCCEEDED
    command = b.get(f"/api/background_commands?conversation_id={cid}").json()["data"][-1]
    assert command["status"] == CommandStatus.RUNNING
    cancel = b.post(f"/api/background_commands/{command['command_id']}/cancel")
    assert cancel.status_code == 200 and cancel.json()["cancelling"] is True

    def ended():
        cmds = b.get(f"/api/background_commands?conversation_id={cid}").json()["data"]
        return next(c for c in cmds if c["command_id"] == command["command_id"])["status"] != CommandStatus.RUNNING

    wait_until(ended, timeout=20, what="the command to be cancelled by its owner")
    cmds = a.get(f"/api/background_commands?conversation_id={cid}").json()["data"]
    assert next(c for c in cmds if c["command_id"] == command["command_id"])["status"] == CommandStatus.CANCELLED
    again = b.post(f"/api/background_commands/{command['command_id']}/cancel")
    assert again.status_code == 409 and again.json()["code"] == "command_not_running"
