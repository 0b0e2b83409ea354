"""Receiver-decided message routing (docs/ARCHITECTURE.md), inline delivery and asks, through the real server
and the scripted model.

Every test drives `run.py` over HTTP: the user talks to the master with `POST /api/tasks`, the
master's scripted tool calls create sub-agents and send them messages, sub-agents ask and answer.
The assertions are on what each model request contained, on the tools' results, on the task
event logs and on `GET /api/conversations/<cid>/agents`.
"""

from __future__ import annotations

import json

from modules.event_catalogue import UserMessageEvent
from modules.statuses import AgentState, Delivery, TaskStatus
from test.conftest import wait_until
from test.integration.router.team import (
    MASTER,
    agent_is,
    agents,
    all_of,
    all_tool_results,
    answering,
    assert_tool_calls_closed,
    contents,
    history,
    last_user_contains,
    requests_of,
    script_team,
    start_team,
    states_of,
    sub,
    tool_results,
    unanswered_questions,
    wait_tasks,
)
from test.scripted_llm import text, tool_calls


# -- the tests --------------------------------------------------------------------------
def test_master_guides_a_running_sub_agent_inline(server, llm, gates):
    """The master's message to a running sub-agent is in the sub-agent's next model request,
    after its tool block; no new turn."""
    hold_sub, hold_master = gates(), gates()
    llm.set_default(text("done."))
    script_team(llm, "find hotels")
    llm.script(tool_calls(("send_message_to_sub_agent", {"display_name": "InfoAgent_1",
                                                          "message": "only hotels near the station"}),
                          wait=hold_master), match=MASTER)
    llm.script(text("Guidance sent."), match=MASTER)
    llm.script(tool_calls(("run_command", {"command": "echo searching"}), wait=hold_sub), match=sub(1))
    llm.script(text("Three hotels near the station."), match=sub(1))
    cid, master_task = start_team(server)

    wait_until(lambda: requests_of(llm, sub(1)), what="the sub-agent's first model call")
    hold_master.set()
    wait_until(lambda: agent_is(server, cid, "InfoAgent_1", pending=1), what="the guidance queued")
    assert agents(server, cid)["InfoAgent_1"]["state"] == AgentState.RUNNING
    hold_sub.set()

    master = server.wait_task(master_task)
    assert tool_results(master, "send_message_to_sub_agent") == [
        {"success": True, "display_name": "InfoAgent_1", "delivery": Delivery.INJECTED_INLINE}]
    [turn] = wait_tasks(server, cid, "InfoAgent_1", 1)
    assert turn["status"] == TaskStatus.SUCCEEDED
    first, second = requests_of(llm, sub(1))
    assert contents(first) == ["find hotels"]
    assert second[-1] == {"role": "user", "content": "[Message from MasterAgent] only hotels near the station"}
    assert second[-2]["role"] == "tool" and second[-3]["role"] == "assistant"
    assert_tool_calls_closed(second)
    inline = [e["data"] for e in turn["events"] if e["type"] == UserMessageEvent.TYPE][1:]
    assert [(d["source"], d["starts_work"]) for d in inline] == [("guidance", False)]
    assert states_of(turn) == [AgentState.RUNNING, AgentState.COMPLETED]
    assert agents(server, cid)["InfoAgent_1"]["pending_count"] == 0


def test_sub_agent_asks_the_master_and_the_answer_is_the_tool_result(server, llm, gates):
    """ask_master blocks the sub-agent (state `waiting`), starts a master turn that sees the question
    with its id, and the master's answer becomes the ask's tool result."""
    hold_answer = gates()
    llm.set_default(text("done."))
    script_team(llm, "plan the trip")
    llm.script(text("A helper is on it."), match=all_of(MASTER, last_user_contains("start the team")))
    llm.script(answering(lambda asker, q: "Go by train.", hold=hold_answer),
               match=all_of(MASTER, last_user_contains("[Question ")))
    llm.script(tool_calls(("ask_master", {"question": "Train or plane?"})), match=sub(1))
    llm.script(text("Booked the train."), match=sub(1))
    cid, _ = start_team(server)

    asked = wait_until(lambda: requests_of(llm, all_of(MASTER, last_user_contains("[Question "))),
                       what="the master's turn on the question")
    qid, asker, question = unanswered_questions({"messages": asked[0]})[0]
    assert (asker, question) == ("InfoAgent_1", "Train or plane?")
    listed = agents(server, cid)
    assert listed["InfoAgent_1"]["state"] == AgentState.WAITING and listed["MasterAgent"]["state"] == AgentState.RUNNING
    assert listed["InfoAgent_1"]["pending_count"] == 0 and listed["MasterAgent"]["pending_count"] == 0
    hold_answer.set()

    [turn] = wait_tasks(server, cid, "InfoAgent_1", 1)
    assert turn["status"] == TaskStatus.SUCCEEDED
    [result] = tool_results(turn, "ask_master")
    assert result == {"success": True, "question_id": qid, "answer": "Go by train.", "from": "MasterAgent"}
    second = requests_of(llm, sub(1))[1]
    assert second[-1]["role"] == "tool" and json.loads(second[-1]["content"]) == result
    assert states_of(turn) == [AgentState.RUNNING, AgentState.WAITING, AgentState.RUNNING, AgentState.COMPLETED]
    [answered] = all_tool_results(server, cid, "MasterAgent", "answer_sub_agent_question")
    assert answered["delivery"] == Delivery.RESOLVED and answered["to"] == "InfoAgent_1"
    # the answer went to the blocked call only: not a second time into the sub-agent's history
    assert not any("Go by train." in c for c in contents(history(server, cid, "InfoAgent_1")))


def test_master_gives_a_completed_sub_agent_a_new_task(server, llm, gates):
    hold_sub = gates()
    llm.set_default(text("done."))
    script_team(llm, "summarise chapter 1")
    llm.script(text("Started."), match=all_of(MASTER, last_user_contains("start the team")))
    llm.script(tool_calls(("send_message_to_sub_agent", {"display_name": "InfoAgent_1",
                                                          "message": "now summarise chapter 2"})),
               match=all_of(MASTER, last_user_contains("[Sub-agent InfoAgent_1 succeeded")))
    llm.script(text("Summary of chapter 1.", wait=hold_sub), match=sub(1))
    llm.script(text("Summary of chapter 2."), match=sub(1))
    cid, master_task = start_team(server)
    server.wait_task(master_task)
    hold_sub.set()

    wait_until(lambda: agent_is(server, cid, "InfoAgent_1", AgentState.COMPLETED), what="the first turn's end")
    first_turn, second_turn = wait_tasks(server, cid, "InfoAgent_1", 2)
    assert all_tool_results(server, cid, "MasterAgent", "send_message_to_sub_agent") == [
        {"success": True, "display_name": "InfoAgent_1", "delivery": Delivery.TRIGGERED_NEW_TURN}]
    assert first_turn["status"] == second_turn["status"] == TaskStatus.SUCCEEDED
    trigger = second_turn["events"][0]
    assert trigger["type"] == UserMessageEvent.TYPE and trigger["data"]["starts_work"] is True
    assert trigger["data"]["message"] == "[Message from MasterAgent] now summarise chapter 2"
    requests = requests_of(llm, sub(1))
    assert len(requests) == 2
    assert [(m["role"], m["content"]) for m in requests[1][1:]] == [
        ("user", "summarise chapter 1"), ("assistant", "Summary of chapter 1."),
        ("user", "[Message from MasterAgent] now summarise chapter 2")]
    assert states_of(second_turn) == [AgentState.RUNNING, AgentState.COMPLETED]


def test_message_during_the_last_output_starts_a_new_turn_after_the_end(server, llm, gates):
    hold_sub, hold_master = gates(), gates()
    llm.set_default(text("done."))
    script_team(llm, "list the hotels")
    llm.script(tool_calls(("send_message_to_sub_agent", {"display_name": "InfoAgent_1",
                                                          "message": "add the prices"}), wait=hold_master),
               match=MASTER)
    llm.script(text("Final answer without prices.", wait=hold_sub), match=sub(1))
    llm.script(text("Prices added."), match=sub(1))
    cid, master_task = start_team(server)
    wait_until(lambda: requests_of(llm, sub(1)), what="the sub-agent's last model call")
    hold_master.set()
    wait_until(lambda: agent_is(server, cid, "InfoAgent_1", pending=1), what="the message queued")
    hold_sub.set()

    master = server.wait_task(master_task)
    assert tool_results(master, "send_message_to_sub_agent")[0]["delivery"] == Delivery.INJECTED_INLINE
    first, second = wait_tasks(server, cid, "InfoAgent_1", 2)
    assert first["status"] == second["status"] == TaskStatus.SUCCEEDED
    assert second["events"][0]["ts"] >= first["events"][-1]["ts"], "the new turn started before the end"
    assert second["events"][0]["data"]["message"] == "[Message from MasterAgent] add the prices"
    requests = requests_of(llm, sub(1))
    assert len(requests) == 2
    assert requests[1][-2:] == [{"role": "assistant", "content": "Final answer without prices."},
                                {"role": "user", "content": "[Message from MasterAgent] add the prices"}]


def test_agent_asks_another_running_agent_which_sees_the_question_inline(server, llm, gates):
    """A asks B while B runs a tool: B gets the question before its next model call, in the same
    turn; B's answer_other_agent resolves A's blocked ask."""
    hold_b = gates()
    llm.set_default(text("done."))
    script_team(llm, "find out the door code", "compute the door code")
    llm.script(tool_calls(("ask_other_agent", {"target_display_name": "InfoAgent_2",
                                               "question": "What is the door code?"})), match=sub(1))
    llm.script(text("A: the code is known."), match=sub(1))
    llm.script(tool_calls(("run_command", {"command": "echo computing"}), wait=hold_b), match=sub(2))
    llm.script(answering(lambda asker, q: f"4711, for {asker}", tool="answer_other_agent"), match=sub(2))
    llm.script(text("B: answered."), match=sub(2))
    cid, _ = start_team(server)

    wait_until(lambda: agent_is(server, cid, "InfoAgent_1", AgentState.WAITING)
               and agent_is(server, cid, "InfoAgent_2", AgentState.RUNNING, pending=1),
               what="A waiting, its question queued for the running B")
    hold_b.set()

    [a_turn] = wait_tasks(server, cid, "InfoAgent_1", 1)
    [b_turn] = wait_tasks(server, cid, "InfoAgent_2", 1)
    [asked] = tool_results(a_turn, "ask_other_agent")
    assert asked["success"] is True and asked["answer"] == "4711, for InfoAgent_1" and asked["from"] == "InfoAgent_2"
    b_second = requests_of(llm, sub(2))[1]
    assert b_second[-2]["role"] == "tool"
    assert b_second[-1]["content"].startswith(f"[Question {asked['question_id']} from InfoAgent_1] "
                                              "What is the door code?")
    [answered] = tool_results(b_turn, "answer_other_agent")
    assert answered == {"success": True, "question_id": asked["question_id"], "to": "InfoAgent_1",
                        "delivery": Delivery.RESOLVED}
    a_second = requests_of(llm, sub(1))[1]
    assert json.loads(a_second[-1]["content"]) == asked
    assert states_of(a_turn) == [AgentState.RUNNING, AgentState.WAITING, AgentState.RUNNING, AgentState.COMPLETED]
