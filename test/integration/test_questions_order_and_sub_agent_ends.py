"""Edge cases found in review: parallel user questions, send order through the pipeline, ends of sub-agents."""

from __future__ import annotations

import json
import threading
import time

from modules.event_catalogue import AskUserEvent, ToolResultEvent
from modules.statuses import AgentState, CommandStatus, Delivery, Route, TaskStatus
from test.conftest import wait_until
from test.integration.helpers import MASTER, history, master_tasks, sub
from test.scripted_llm import dynamic, match_system, text, tool_calls

ROUTER = match_system("You are RoutingAgent")


def _open_questions(server, cid: str) -> dict[str, str]:
    """display name of the asking agent -> its open question id, from the task logs."""
    found = {}
    for task in server.get(f"/api/tasks?conversation_id={cid}&status=active").json()["data"]:
        for event in server.get(f"/api/tasks/{task['task_id']}").json()["events"]:
            if event["type"] == AskUserEvent.TYPE:
                found[event["data"]["display_name"]] = event["data"]["question_id"]
    return found


def test_parallel_user_questions_are_answered_by_their_id(server, llm):
    llm.script(tool_calls(("create_sub_agent", {"role": "InfoAgent", "task": "ask the date"}),
                          ("create_sub_agent", {"role": "InfoAgent", "task": "ask the city"})), match=MASTER)
    llm.script(text("Both are asking you."), match=MASTER)
    llm.set_default(text("noted."))
    llm.script(tool_calls(("ask_user", {"question": "Which date?"})), match=sub(1))
    llm.script(tool_calls(("ask_user", {"question": "Which city?"})), match=sub(2))
    sent = server.send("plan a trip")
    cid = sent["conversation_id"]
    questions = wait_until(lambda: (q := _open_questions(server, cid)) and len(q) == 2 and q, what="two asks")

    city = server.send("Lisbon", cid, question_id=questions["InfoAgent_2"])
    assert (city["route"], city["target_agent"], city["delivery"]) == (Route.HIL, "InfoAgent_2", Delivery.RESOLVED)
    date = server.send("Friday", cid)  # no id: the open one
    assert date["route"] == Route.HIL and date["target_agent"] == "InfoAgent_1"

    def ask_result(name):
        tools = [m for m in history(server, cid, name) if m["role"] == "tool" and m["name"] == "ask_user"]
        return tools and json.loads(tools[0]["content"])

    assert wait_until(lambda: ask_result("InfoAgent_2"), what="city answered")["answer"] == "Lisbon"
    assert wait_until(lambda: ask_result("InfoAgent_1"), what="date answered")["answer"] == "Friday"


def test_sends_keep_their_order_while_the_pipeline_is_slow(server, llm):
    llm.set_default(text("ok"))
    first = server.send("hello")
    cid = first["conversation_id"]
    server.wait_task(first["task_id"])
    rewrite_started = threading.Event()

    def slow_rewrite(body):
        rewrite_started.set()
        time.sleep(0.5)
        return text('{"query": "AAA rewritten", "agent": "MasterAgent"}')

    llm.script(dynamic(slow_rewrite), match=ROUTER)
    answers = {}
    a = threading.Thread(target=lambda: answers.setdefault("a", server.send("AAA first", cid)))
    a.start()
    assert rewrite_started.wait(10)
    answers["b"] = server.send("BBB second", cid)
    a.join(15)
    wait_until(lambda: not server.get(f"/api/conversations/{cid}/running-status").json()["is_main_running"],
               what="all turns done")
    users = [m["content"].split("\n")[0] for m in history(server, cid) if m["role"] == "user"]
    assert users == ["hello", "AAA first", "BBB second"]


def test_terminating_a_blocking_sub_agent_ends_its_masters_wait(make_server, llm):
    server = make_server(env={"SUB_AGENT_TIMEOUT_S": "60"})
    hold = threading.Event()
    llm.script(tool_calls(("create_sub_agent", {"role": "InfoAgent", "task": "think long",
                                                "run_in_background": False})), match=MASTER)
    llm.script(text("It was stopped."), match=MASTER)
    llm.script(text("never done", wait=hold), match=sub(1))
    sent = server.send("delegate and wait")
    cid = sent["conversation_id"]
    helper = wait_until(lambda: [s for s in server.get(f"/api/sub_agents?conversation_id={cid}").json()["data"]
                                 if s["state"] == AgentState.RUNNING], what="the sub-agent running")[0]
    started = time.monotonic()
    assert server.post(f"/api/sub_agents/{helper['agent_id']}/terminate").status_code == 200
    task = server.wait_task(sent["task_id"], timeout=20)
    assert time.monotonic() - started < 10, "the master waited for the timeout"
    result = json.loads(next(e for e in task["events"] if e["type"] == ToolResultEvent.TYPE)["data"]["result"])
    assert result["status"] == TaskStatus.STOPPED and result["success"] is False
    hold.set()
    assert len(master_tasks(server, cid)) == 1  # a terminated sub-agent sends no notice


def test_terminating_a_sub_agent_cancels_its_commands_and_leaves_nothing_queued(server, llm):
    llm.script(tool_calls(("create_sub_agent", {"role": "InfoAgent", "task": "start the long job"})),
               text("Started a helper."), text("The helper started its job."), match=MASTER)
    llm.script(tool_calls(("run_command", {"command": "sleep 60", "run_in_background": True})),
               text("The job runs."), match=sub(1))
    sent = server.send("delegate a long job")
    cid = sent["conversation_id"]
    wait_until(lambda: len(master_tasks(server, cid)) == 2 and all(
        t["status"] == TaskStatus.SUCCEEDED for t in master_tasks(server, cid)), what="the master heard the helper")
    helper = server.get(f"/api/sub_agents?conversation_id={cid}").json()["data"][0]
    assert server.get(f"/api/conversations/{cid}/running-status").json()["has_running_background_commands"]

    assert server.post(f"/api/sub_agents/{helper['agent_id']}/terminate").status_code == 200

    def settled():
        status = server.get(f"/api/conversations/{cid}/running-status").json()
        return not status["has_running_background_commands"] and status["pending_notices"] == 0 and status
    wait_until(settled, what="the helper's command cancelled and its notice discarded")
    commands = server.get(f"/api/background_commands?conversation_id={cid}").json()["data"]
    assert [c["status"] for c in commands] == [CommandStatus.CANCELLED]
    agents = {a["display_name"]: a for a in server.get(f"/api/conversations/{cid}/agents").json()["data"]}
    assert agents["InfoAgent_1"]["pending_count"] == 0
    assert len(master_tasks(server, cid)) == 2  # a terminated sub-agent's command wakes nobody


def test_a_stopped_background_sub_agent_reports_to_its_master(server, llm):
    hold = threading.Event()
    llm.script(tool_calls(("create_sub_agent", {"role": "InfoAgent", "task": "long research"})), match=MASTER)
    llm.script(text("Started."), match=MASTER)
    llm.script(text("Noted that it stopped."), match=MASTER)
    llm.script(text("never done", wait=hold), match=sub(1))
    sent = server.send("research")
    cid = sent["conversation_id"]
    server.wait_task(sent["task_id"])
    tasks = wait_until(lambda: [t for t in server.get(f"/api/tasks?conversation_id={cid}&status=active").json()[
        "data"]], what="the sub-agent's task")
    assert server.post(f"/api/tasks/{tasks[0]['task_id']}/cancel").status_code == 200
    follow = wait_until(lambda: (t := master_tasks(server, cid)) and len(t) == 2 and t, what="the notice")
    events = server.wait_task(follow[1]["task_id"])["events"]
    assert events[0]["data"]["message"].startswith("[Sub-agent InfoAgent_1 stopped")
    hold.set()


def test_a_message_sent_before_a_question_was_asked_does_not_answer_it(server, llm):
    """A message the user sent while the agent worked, routed by a slow pipeline only after the agent asked the
    user something, was written before the question: it is no answer to it (AskWaiter), the question stays open
    and the user's reply to it answers it."""
    think, routing, route = threading.Event(), threading.Event(), threading.Event()
    llm.script(tool_calls(("ask_user", {"question": "Which city?"}), wait=think), match=MASTER)
    llm.script(text("Lisbon it is, and I will look at the weather too."), match=MASTER)
    first = server.send("plan a trip for me")
    cid = first["conversation_id"]

    def slow_route(body):
        routing.set()
        route.wait(15)
        return text('{"query": "What is the weather in Tokyo tomorrow?", "agent": "MasterAgent"}')

    llm.script(dynamic(slow_route), match=ROUTER)
    answers = {}
    sending = threading.Thread(target=lambda: answers.setdefault(
        "early", server.send("What is the weather in Tokyo tomorrow?", cid)))
    sending.start()
    assert routing.wait(15), "the second message is routed by the pipeline"
    think.set()  # the master asks its question while the message waits for its route
    question = server.wait_event(first["task_id"], AskUserEvent.TYPE)
    route.set()
    sending.join(15)
    early = answers["early"]
    assert (early["route"], early["delivery"]) == (Route.PIPELINE, Delivery.INJECTED_INLINE)

    reply = server.send("Lisbon", cid, question_id=question["question_id"])
    assert (reply["route"], reply["delivery"]) == (Route.HIL, Delivery.RESOLVED)
    assert server.wait_task(first["task_id"])["status"] == TaskStatus.SUCCEEDED
    result = json.loads(next(m["content"] for m in history(server, cid) if m["role"] == "tool"))
    assert result["answer"] == "Lisbon"
    users = [m["content"] for m in history(server, cid) if m["role"] == "user"]
    assert users[-1].startswith("What is the weather in Tokyo tomorrow?")  # inline, after the ask
