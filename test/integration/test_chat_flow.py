"""The foundation end to end: real `run.py`, the scripted model over HTTP, REST and Socket.IO clients."""

from __future__ import annotations

import json
import sqlite3
import threading
import time

import socketio

from modules.event_catalogue import (
    AiMessageStartEvent,
    AskUserEvent,
    ErrorEvent,
    TaskCompleteEvent,
    TaskEndEvent,
    TextChunkEvent,
    TextEndEvent,
    ToolResultEvent,
    ToolStartEvent,
    UserMessageEvent,
)
from modules.statuses import AgentState, Delivery, MessageSource, Route, TaskStatus, Visibility
from test.conftest import event_types, wait_until
from test.integration.helpers import master_tasks
from test.scripted_llm import error, hang, text, tool_calls


def _tool_messages(request_body: dict) -> list[dict]:
    return [m for m in request_body["messages"] if m["role"] == "tool"]


def test_rest_flow_streams_runs_a_command_and_survives_restart(server, llm):
    llm.script(tool_calls(("run_command", {"command": "echo hello-from-tool"}), text="Let me check."))
    llm.script(text("The command printed hello-from-tool.", chunk_size=5))

    sent = server.send("please run echo")
    assert sent["route"] == Route.PIPELINE and sent["delivery"] == Delivery.TRIGGERED_NEW_TURN
    task = server.wait_task(sent["task_id"])
    assert task["status"] == TaskStatus.SUCCEEDED, task
    types = event_types(task)

    # the order a REST poller relies on
    order = [
        UserMessageEvent.TYPE,
        AiMessageStartEvent.TYPE,
        TextChunkEvent.TYPE,
        ToolStartEvent.TYPE,
        ToolResultEvent.TYPE,
        AiMessageStartEvent.TYPE,
        TextChunkEvent.TYPE,
        TextEndEvent.TYPE,
        TaskCompleteEvent.TYPE,
    ]
    pos = -1
    for name in order:
        pos = types.index(name, pos + 1)  # raises when an event is missing or out of order
    assert types[-1] == TaskCompleteEvent.TYPE
    assert [e["idx"] for e in task["events"]] == list(range(len(types)))

    result = json.loads(next(e for e in task["events"] if e["type"] == ToolResultEvent.TYPE)["data"]["result"])
    assert result["success"] is True and result["exit_code"] == 0
    assert "hello-from-tool" in result["output"]
    chunks = [e["data"]["content"] for e in task["events"] if e["type"] == TextChunkEvent.TYPE]
    assert "".join(chunks).endswith("The command printed hello-from-tool.")

    # the second model call saw the tool's result right after the assistant's tool call
    reqs = llm.wait_for_requests(2)
    second = reqs[1].body["messages"]
    assert second[0]["role"] == "system" and "MasterAgent" in second[0]["content"]
    assert [m["role"] for m in second[1:]] == ["user", "assistant", "tool"]
    assert second[2]["tool_calls"][0]["id"] == second[3]["tool_call_id"]
    assert reqs[0].body["stream"] is True
    assert any(t["function"]["name"] == "run_command" for t in reqs[0].body["tools"])

    # the same events, from any offset, after a restart
    server.restart()
    again = server.get(f"/api/tasks/{sent['task_id']}?from=0").json()
    assert again["events"] == task["events"]
    tail = server.get(f"/api/tasks/{sent['task_id']}?from=3").json()
    assert tail["events"] == task["events"][3:]
    assert tail["next_offset"] == len(types)
    past_end = server.get(f"/api/tasks/{sent['task_id']}?from={len(types)}").json()
    assert past_end["events"] == [] and past_end["next_offset"] == len(types)

    msgs = server.get(f"/api/conversations/{sent['conversation_id']}/messages").json()["data"]
    assert [m["role"] for m in msgs] == ["user", "assistant", "tool", "assistant"]
    assert msgs[0]["metadata"]["source"] == MessageSource.USER and msgs[0]["message_id"] == sent["message_id"]


def test_socketio_flow_gets_the_same_events_as_the_log(server, llm):
    llm.script(tool_calls(("run_command", {"command": "echo via-socket"})))
    llm.script(text("done via socket"))
    received: list[tuple[str, dict]] = []
    finished = threading.Event()
    client = socketio.Client(reconnection=False)

    @client.on("*")
    def catch_all(event, data):
        received.append((event, data))
        if event in (TaskCompleteEvent.TYPE, ErrorEvent.TYPE, TaskEndEvent.TYPE):
            finished.set()

    client.connect(server.url, wait_timeout=10)
    try:
        ack = server.routed(client.call("send_message", {"message": "run it over the socket"}, timeout=10))
        assert ack["success"] is True and ack["task_id"]
        assert finished.wait(20), received
    finally:
        client.disconnect()
    log = server.wait_task(ack["task_id"])
    socket_events = [(e, d["idx"]) for e, d in received if d.get("task_id") == ack["task_id"]]
    assert socket_events == [(e["type"], e["idx"]) for e in log["events"]]
    assert received[-1][0] == TaskCompleteEvent.TYPE


def test_join_conversation_and_stop_over_socket(server, llm):
    llm.script(tool_calls(("run_command", {"command": "sleep 30"})))
    llm.script(text("should not be requested"))
    conv = server.post("/api/conversations", {"title": "socket stop"}).json()
    stopped = threading.Event()
    client = socketio.Client(reconnection=False)
    client.on(TaskEndEvent.TYPE, lambda data: stopped.set())
    started = threading.Event()
    client.on(ToolStartEvent.TYPE, lambda data: started.set())
    client.connect(server.url, wait_timeout=10)
    try:
        assert client.call("join_conversation", {"conversation_id": conv["conversation_id"]})["success"]
        bad = client.call("join_conversation", {"conversation_id": "nope"})
        assert bad["success"] is False and bad["code"] == "not_found"
        sent = server.send("sleep please", conv["conversation_id"])
        assert started.wait(15)
        ack = client.call("stop_task", {"task_id": sent["task_id"]}, timeout=10)
        assert ack["success"] is True
        assert stopped.wait(15)
    finally:
        client.disconnect()
    task = server.wait_task(sent["task_id"])
    assert task["status"] == TaskStatus.STOPPED
    result = json.loads(next(e for e in task["events"] if e["type"] == ToolResultEvent.TYPE)["data"]["result"])
    assert result["success"] is False and "stopped" in result["error"]
    assert len(llm.agent_requests) == 1


def test_model_500_twice_then_success_completes(server, llm):
    llm.script(error(500), error(500), text("third time lucky"))
    sent = server.send("hello")
    task = server.wait_task(sent["task_id"])
    assert task["status"] == TaskStatus.SUCCEEDED
    assert len(llm.agent_requests) == 3
    text_end = [e for e in task["events"] if e["type"] == TextEndEvent.TYPE]
    assert text_end[-1]["data"]["content"] == "third time lucky"


def test_model_that_keeps_failing_gives_a_clear_error(server, llm):
    llm.set_default(error(500, "upstream is down"))
    sent = server.send("hello")
    task = server.wait_task(sent["task_id"], timeout=30)
    assert task["status"] == TaskStatus.FAILED
    err = task["events"][-1]
    assert err["type"] == ErrorEvent.TYPE and err["data"]["code"] == "server_error"
    assert task["error"]["code"] == "server_error"
    # the conversation stays usable afterwards
    llm.set_default(text("back again"))
    again = server.wait_task(server.send("retry", sent["conversation_id"])["task_id"])
    assert again["status"] == TaskStatus.SUCCEEDED


def test_rate_limit_is_retried(server, llm):
    llm.script(error(429, "slow down", retry_after=0.1), text("after the limit"))
    task = server.wait_task(server.send("hi")["task_id"])
    assert task["status"] == TaskStatus.SUCCEEDED and len(llm.agent_requests) == 2


def test_malformed_tool_arguments_become_a_tool_error(server, llm):
    llm.script(
        tool_calls(("run_command", '{"command": "echo hi"'), ("no_such_tool", {}), ("run_command", {"timeout": 3}))
    )
    llm.script(text("I see the errors."))
    task = server.wait_task(server.send("go")["task_id"])
    assert task["status"] == TaskStatus.SUCCEEDED
    results = [json.loads(e["data"]["result"]) for e in task["events"] if e["type"] == ToolResultEvent.TYPE]
    assert [r["success"] for r in results] == [False, False, False]
    assert "not valid JSON" in results[0]["error"]
    assert "unknown tool" in results[1]["error"]
    assert "missing required argument" in results[2]["error"]
    second = llm.wait_for_requests(2)[1].body
    assert len(_tool_messages(second)) == 3


def test_command_runs_in_the_conversation_workspace_with_timeout_and_tail(server, llm):
    llm.script(
        tool_calls(
            ("run_command", {"command": "echo here > here.txt; pwd"}),
            ("run_command", {"command": "sleep 5; echo never", "timeout": 0.3}),
            ("run_command", {"command": "seq 1 20000; exit 3"}),
        )
    )
    llm.script(text("ok"))
    sent = server.send("inspect")
    task = server.wait_task(sent["task_id"])
    results = [json.loads(e["data"]["result"]) for e in task["events"] if e["type"] == ToolResultEvent.TYPE]
    assert results[0]["output"].strip() == "/workspace"  # the sandbox's view of the conversation's workspace
    assert (server.workspace(sent["conversation_id"]) / "here.txt").read_text() == "here\n"
    assert results[1]["success"] is False and "timed out" in results[1]["error"]
    assert "never" not in results[1]["output"]
    assert results[2]["exit_code"] == 3 and results[2]["success"] is False
    assert results[2]["output_truncated"] is True and results[2]["output"].rstrip().endswith("20000")
    assert len(results[2]["output"]) <= 8000


def test_cancel_closes_open_tool_calls_and_history_stays_valid(server, llm):
    llm.script(tool_calls(("run_command", {"command": "sleep 30"}), ("run_command", {"command": "echo second"})))
    sent = server.send("long job")
    cid = sent["conversation_id"]
    llm.wait_for_requests(1)
    server.wait_event(sent["task_id"], ToolStartEvent.TYPE)  # the command is running: cancel it
    res = server.post(f"/api/tasks/{sent['task_id']}/cancel")
    assert res.status_code == 200, res.text
    task = server.wait_task(sent["task_id"])
    assert task["status"] == TaskStatus.STOPPED and event_types(task)[-1] == TaskEndEvent.TYPE
    assert server.post(f"/api/tasks/{sent['task_id']}/cancel").status_code == 409

    llm.script(text("fresh start"))
    again = server.wait_task(server.send("next", cid)["task_id"])
    assert again["status"] == TaskStatus.SUCCEEDED
    body = llm.agent_requests[-1].body
    calls = body["messages"][2]["tool_calls"]
    tool_msgs = _tool_messages(body)
    assert [m["tool_call_id"] for m in tool_msgs] == [c["id"] for c in calls]
    assert all(json.loads(m["content"])["success"] is False for m in tool_msgs)


def test_repeated_client_message_id_is_stored_once(server, llm):
    first = server.send("only once", client_message_id="abc-1")
    second = server.send("only once", client_message_id="abc-1")
    assert first == second
    server.wait_task(first["task_id"])
    msgs = server.get(f"/api/conversations/{first['conversation_id']}/messages").json()["data"]
    assert [m["content"] for m in msgs if m["role"] == "user"] == ["only once"]
    assert len(server.get("/api/conversations").json()["data"]) == 1


def test_a_retry_after_a_send_died_past_queueing_stores_the_message_once(server, llm):
    first = server.send("only once", client_message_id="abc-2")
    server.wait_task(first["task_id"])
    # As if the first try's process died after queueing, before recording its answer: the
    # reservation is still in progress and old enough to count as abandoned.
    with sqlite3.connect(server.database_url.removeprefix("sqlite:///")) as conn:
        conn.execute("UPDATE client_requests SET response = ?, created_at = 0 WHERE client_message_id = ?",
                     (json.dumps({"in_progress": True}), "abc-2"))
    retry = server.send("only once", client_message_id="abc-2")  # a first send: no conversation id either
    assert (retry["message_id"], retry["conversation_id"]) == (first["message_id"], first["conversation_id"])
    assert len(server.get("/api/conversations").json()["data"]) == 1
    msgs = server.get(f"/api/conversations/{first['conversation_id']}/messages").json()["data"]
    assert [m["content"] for m in msgs if m["role"] == "user"] == ["only once"]


def test_an_answer_taken_by_an_ask_that_died_before_writing_it_comes_back_after_a_restart(server, llm):
    llm.script(tool_calls(("ask_user", {"question": "Which file?"})), text("Opening notes.txt now."))
    sent = server.send("open a file")
    cid = sent["conversation_id"]
    ask = server.wait_event(sent["task_id"], AskUserEvent.TYPE)
    master = server.get(f"/api/conversations/{cid}/agents").json()["data"][0]
    # As if the ask had just taken the user's answer from the queue when its process was killed, before
    # it wrote the answer into the history as the ask's result.
    with sqlite3.connect(server.database_url.removeprefix("sqlite:///")) as conn:
        conn.execute(
            "INSERT INTO pending_messages (id, conversation_id, target_agent_id, source_agent_id, "
            "source_display_name, type, content, question_id, metadata, status, consumed_by, created_at, "
            "consumed_at) VALUES (?, ?, ?, NULL, 'user', 'answer', 'notes.txt', ?, ?, 'consumed', ?, ?, ?)",
            ("answer-1", cid, master["agent_id"], ask["question_id"],
             json.dumps({"source": MessageSource.USER, "visibility": Visibility.CHAT, "route": Route.HIL}),
             f"ask:{ask['question_id']}",
             time.time(), time.time()))
    server.kill()
    server.start()
    assert server.wait_task(sent["task_id"])["status"] == TaskStatus.FAILED
    follow_up = wait_until(lambda: (t := master_tasks(server, cid)) and len(t) == 2 and t[1], what="a new turn")
    assert server.wait_task(follow_up["task_id"])["status"] == TaskStatus.SUCCEEDED
    last = llm.agent_requests[-1].body["messages"]
    assert last[-1] == {"role": "user", "content": "notes.txt"}
    assert json.loads(last[-2]["content"])["success"] is False  # the ask's call, closed by the recovery


def test_sigkill_mid_task_is_recovered_with_a_valid_history(server, llm):
    llm.script(tool_calls(("run_command", {"command": "sleep 30"})))
    sent = server.send("start something long")
    server.wait_event(sent["task_id"], ToolStartEvent.TYPE)
    server.kill()
    server.start()
    task = server.wait_task(sent["task_id"])
    assert task["status"] == TaskStatus.FAILED and task["error"]["code"] == "interrupted"
    agents = server.get(f"/api/conversations/{sent['conversation_id']}/agents").json()["data"]
    assert agents[0]["state"] == AgentState.IDLE
    llm.script(text("recovered"))
    again = server.wait_task(server.send("hello again", sent["conversation_id"])["task_id"])
    assert again["status"] == TaskStatus.SUCCEEDED
    body = llm.agent_requests[-1].body
    assert [m["role"] for m in body["messages"][1:]] == ["user", "assistant", "tool", "user"]


def test_hanging_model_times_out_into_an_error(make_server, llm):
    server = make_server(env={"LLM_TIMEOUT_S": "0.5", "LLM_MAX_RETRIES": "1"})
    llm.set_default(hang(3))
    task = server.wait_task(server.send("anyone there?")["task_id"], timeout=20)
    assert task["status"] == TaskStatus.FAILED and task["error"]["code"] == "timeout"
