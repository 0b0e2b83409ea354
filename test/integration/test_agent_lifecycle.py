"""Blocking tools that give up (ASK_TIMEOUT_S, SUB_AGENT_TIMEOUT_S), the master's terminate_sub_agent tool,
and an agent left `running` with no task (from an older version) released at start-up (README: Several
processes)."""

from __future__ import annotations

import json
import sqlite3
import threading
import time

from modules.event_catalogue import AgentStateEvent, AskUserEvent, ToolResultEvent
from modules.statuses import AgentState, Delivery, MessageSource, Route, TaskStatus, Visibility
from test.conftest import wait_until
from test.integration.helpers import master_tasks
from test.scripted_llm import match_system, text, tool_calls

MASTER = match_system("You are MasterAgent")
INFO = match_system("You are InfoAgent_1 ")


def _results(task, name):
    return [json.loads(e["data"]["result"]) for e in task["events"]
            if e["type"] == ToolResultEvent.TYPE and e["data"]["name"] == name]


def test_ask_user_times_out_with_a_clear_result_and_closes_the_question(make_server, llm):
    server = make_server(env={"ASK_TIMEOUT_S": "1"})
    llm.script(tool_calls(("ask_user", {"question": "Which city?", "options": ["Paris", "Rome"]})), match=MASTER)
    llm.script(text("No answer, so Paris."), match=MASTER)
    llm.script(text("Noted."), match=MASTER)
    sent = server.send("plan a trip")
    cid = sent["conversation_id"]
    task = server.wait_task(sent["task_id"])
    assert task["status"] == TaskStatus.SUCCEEDED
    [asked] = [e["data"] for e in task["events"] if e["type"] == AskUserEvent.TYPE]
    [result] = _results(task, "ask_user")
    assert result == {"success": False, "error": "the user did not answer within 1 s",
                      "question_id": asked["question_id"]}
    states = [e["data"]["state"] for e in task["events"] if e["type"] == AgentStateEvent.TYPE]
    assert states == [AgentState.RUNNING, AgentState.WAITING, AgentState.RUNNING, AgentState.COMPLETED]
    # The question is closed: a later message is an ordinary one, not its answer.
    late = server.post("/api/tasks", {"message": "Rome", "conversation_id": cid, "question_id": asked["question_id"]})
    assert late.status_code == 409 and late.json()["code"] == "stale_question"
    after = server.send("Rome", cid)
    assert after["route"] != Route.HIL and after["delivery"] == Delivery.TRIGGERED_NEW_TURN
    assert server.wait_task(after["task_id"])["status"] == TaskStatus.SUCCEEDED


def test_a_blocking_sub_agent_past_its_timeout_leaves_the_master_and_reports_later(make_server, llm):
    server = make_server(env={"SUB_AGENT_TIMEOUT_S": "1"})
    slow = threading.Event()
    llm.script(tool_calls(("create_sub_agent", {"role": "InfoAgent", "task": "think long",
                                                "run_in_background": False})), match=MASTER)
    llm.script(text("It is still working."), match=MASTER)
    llm.script(text("Its answer came."), match=MASTER)
    llm.script(text("the slow answer", wait=slow), match=INFO)
    sent = server.send("delegate and wait")
    cid = sent["conversation_id"]
    started = time.monotonic()
    task = server.wait_task(sent["task_id"], timeout=20)  # `slow` is never set before this returns
    assert time.monotonic() - started >= 0.9
    assert task["status"] == TaskStatus.SUCCEEDED
    [result] = _results(task, "create_sub_agent")
    assert result["success"] is False and result["display_name"] == "InfoAgent_1"
    assert result["error"].startswith("stopped or timed out while waiting")

    # The sub-agent goes on; its end now reaches the master as a notice, which starts a follow-up.
    slow.set()
    follow = wait_until(lambda: (t := master_tasks(server, cid)) and len(t) == 2 and t, what="the notice's turn")
    events = server.wait_task(follow[1]["task_id"])["events"]
    assert events[0]["data"]["message"].startswith("[Sub-agent InfoAgent_1 succeeded")
    assert "the slow answer" in events[0]["data"]["message"]


def test_the_master_terminates_a_sub_agent_which_then_takes_no_messages(server, llm):
    never, helper_running = threading.Event(), threading.Event()
    llm.script(tool_calls(("create_sub_agent", {"role": "InfoAgent", "task": "long research"})), match=MASTER)
    llm.script(tool_calls(("terminate_sub_agent", {"display_name": "InfoAgent_1"}), wait=helper_running),
               match=MASTER)
    llm.script(tool_calls(("terminate_sub_agent", {"display_name": "InfoAgent_1"}),
                          ("send_message_to_sub_agent", {"display_name": "InfoAgent_1", "message": "hello?"})),
               match=MASTER)
    llm.script(text("It is gone."), match=MASTER)
    llm.script(text("never done", wait=never), match=INFO)
    sent = server.send("start and stop a helper")
    cid = sent["conversation_id"]
    wait_until(lambda: any(INFO(r.body) for r in llm.requests), what="the helper's model call")
    helper_running.set()
    task = server.wait_task(sent["task_id"])
    assert task["status"] == TaskStatus.SUCCEEDED
    terminated, again = _results(task, "terminate_sub_agent")
    assert terminated == {"success": True, "display_name": "InfoAgent_1", "status": "terminated"}
    assert again == {"success": False, "error": "InfoAgent_1 is already terminated"}
    [sent_to_gone] = _results(task, "send_message_to_sub_agent")
    assert sent_to_gone == {"success": False, "error": "InfoAgent_1 was terminated and takes no more messages"}

    [helper] = server.get(f"/api/sub_agents?conversation_id={cid}").json()["data"]
    helper_tasks = [t for t in server.get(f"/api/tasks?conversation_id={cid}").json()["data"]
                    if t["agent_id"] == helper["agent_id"]]
    assert [server.wait_task(t["task_id"])["status"] for t in helper_tasks] == [TaskStatus.STOPPED]
    users = [m["content"] for m in server.get(f"/api/conversations/{cid}/messages?agent=InfoAgent_1").json()["data"]
             if m["role"] == "user"]
    assert users == ["long research"]
    assert len(master_tasks(server, cid)) == 1  # a terminated sub-agent sends no notice
    never.set()


def test_an_agent_left_running_without_a_task_is_released_at_start_up_and_its_queue_served(server, llm):
    llm.script(text("hello"), match=MASTER)
    sent = server.send("hi")
    cid = sent["conversation_id"]
    server.wait_task(sent["task_id"])
    master = server.get(f"/api/conversations/{cid}/agents").json()["data"][0]
    server.stop()
    # As an older version could leave it: claimed (`running`) apart from any task, long ago, with a message
    # queued that its turn never took.
    with sqlite3.connect(server.database_url.removeprefix("sqlite:///")) as conn:
        conn.execute("UPDATE agents SET state = 'running', updated_at = ? WHERE id = ?",
                     (time.time() - 3600, master["agent_id"]))
        conn.execute(
            "INSERT INTO pending_messages (id, conversation_id, target_agent_id, source_agent_id, "
            "source_display_name, type, content, question_id, metadata, status, consumed_by, created_at, "
            "consumed_at) VALUES ('orphan-1', ?, ?, NULL, 'user', 'message', 'still there?', NULL, ?, "
            "'queued', NULL, ?, NULL)",
            (cid, master["agent_id"], json.dumps({"source": MessageSource.USER, "visibility": Visibility.CHAT}),
             time.time()))
    llm.script(text("Yes, still here."), match=MASTER)
    server.start()
    follow = wait_until(lambda: (t := master_tasks(server, cid)) and len(t) == 2 and t, what="the queued turn")
    task = server.wait_task(follow[1]["task_id"])
    assert task["status"] == TaskStatus.SUCCEEDED and task["events"][0]["data"]["message"] == "still there?"
    assert llm.agent_requests[-1].body["messages"][-1] == {"role": "user", "content": "still there?"}
    agents = server.get(f"/api/conversations/{cid}/agents").json()["data"]
    assert agents[0]["state"] == AgentState.COMPLETED and agents[0]["pending_count"] == 0
