"""Receiver-decided routing through the real server: asks that must not take the wrong message, time out,
are stopped or run in parallel; queues across a restart; the agents listing."""

from __future__ import annotations

import json
import time

from modules.event_catalogue import TaskEndEvent, UserMessageEvent
from modules.statuses import AgentState, Delivery, TaskStatus
from test.conftest import wait_until
from test.integration.router.team import (
    MASTER,
    QID,
    agent_is,
    agent_tasks,
    agents,
    all_of,
    all_tool_results,
    answering,
    assert_tool_calls_closed,
    contents,
    history,
    idle_everywhere,
    last_user_contains,
    requests_of,
    script_team,
    start_team,
    states_of,
    sub,
    tool_results,
    wait_tasks,
)
from test.scripted_llm import text, tool_calls


def test_message_queued_before_an_ask_is_not_taken_as_its_answer(server, llm, gates):
    """Guidance from the master that waits in the sub-agent's queue when the sub-agent asks the
    master is not the answer: the ask gets the master's real answer, the guidance comes inline."""
    hold_sub, hold_master = gates(), gates()
    llm.set_default(answering(lambda asker, q: "Take the train."))
    script_team(llm, "plan the trip")
    llm.script(tool_calls(("send_message_to_sub_agent", {"display_name": "InfoAgent_1",
                                                          "message": "the budget is 100 EUR"}), wait=hold_master),
               match=MASTER)
    llm.script(text("Guided."), match=MASTER)
    llm.script(tool_calls(("ask_master", {"question": "Train or plane?"}), wait=hold_sub), match=sub(1))
    llm.script(text("Train within budget."), match=sub(1))
    cid, _ = start_team(server)
    wait_until(lambda: requests_of(llm, sub(1)), what="the sub-agent's model call")
    hold_master.set()
    wait_until(lambda: agent_is(server, cid, "InfoAgent_1", pending=1), what="the guidance queued")
    hold_sub.set()

    [turn] = wait_tasks(server, cid, "InfoAgent_1", 1)
    [result] = tool_results(turn, "ask_master")
    assert result["success"] is True and result["answer"] == "Take the train.", result
    second = requests_of(llm, sub(1))[1]
    assert [m["role"] for m in second[-3:]] == ["assistant", "tool", "user"]
    assert second[-1]["content"] == "[Message from MasterAgent] the budget is 100 EUR"


def test_ask_times_out_with_a_clear_result_and_the_late_answer_is_not_lost(make_server, llm, gates):
    server = make_server(env={"ASK_TIMEOUT_S": "1"})
    hold_answer = gates()
    llm.set_default(text("done."))
    script_team(llm, "plan the trip")
    llm.script(text("Started."), match=all_of(MASTER, last_user_contains("start the team")))
    llm.script(answering(lambda asker, q: "Late: take the train.", hold=hold_answer),
               match=all_of(MASTER, last_user_contains("[Question ")))
    llm.script(tool_calls(("ask_master", {"question": "Train or plane?"})), match=sub(1))
    llm.script(text("No answer; I chose the plane."), match=sub(1))
    llm.script(text("Switched to the train."), match=sub(1))
    cid, _ = start_team(server)

    started = time.monotonic()
    [turn] = wait_tasks(server, cid, "InfoAgent_1", 1)
    assert 0.9 <= time.monotonic() - started < 10
    [result] = tool_results(turn, "ask_master")
    assert result["success"] is False and QID.fullmatch(result["question_id"])
    assert result["error"] == "no answer from MasterAgent within 1 s"
    assert states_of(turn) == [AgentState.RUNNING, AgentState.WAITING, AgentState.RUNNING, AgentState.COMPLETED]
    hold_answer.set()

    first, second = wait_tasks(server, cid, "InfoAgent_1", 2)
    late = requests_of(llm, sub(1))[2]
    assert late[-1]["content"] == f"[Answer to {result['question_id']} from MasterAgent] Late: take the train."
    assert sum("Late: take the train." in c for c in contents(late)) == 1
    assert_tool_calls_closed(late)


def test_stop_while_waiting_ends_the_ask_with_a_stopped_result(server, llm, gates):
    hold_answer = gates()
    llm.set_default(text("done."))
    script_team(llm, "plan the trip")
    llm.script(text("Started."), match=all_of(MASTER, last_user_contains("start the team")))
    llm.script(answering(lambda asker, q: "Answer after the stop.", hold=hold_answer),
               match=all_of(MASTER, last_user_contains("[Question ")))
    llm.script(tool_calls(("ask_master", {"question": "Train or plane?"}),
                          ("run_command", {"command": "echo never-runs"})), match=sub(1))
    cid, _ = start_team(server)
    wait_until(lambda: agent_is(server, cid, "InfoAgent_1", AgentState.WAITING), what="the sub-agent waiting")
    [waiting] = agent_tasks(server, cid, "InfoAgent_1")
    res = server.post(f"/api/tasks/{waiting['task_id']}/cancel")
    assert res.status_code == 200, res.text

    turn = server.wait_task(waiting["task_id"], timeout=5)
    assert turn["status"] == TaskStatus.STOPPED and turn["events"][-1]["type"] == TaskEndEvent.TYPE
    [result] = tool_results(turn, "ask_master")
    assert result["success"] is False and result["error"] == "stopped by the user while waiting for the answer"
    [skipped] = tool_results(turn, "run_command")
    assert skipped["success"] is False and "cancelled" in skipped["error"]
    assert states_of(turn) == [AgentState.RUNNING, AgentState.WAITING, AgentState.RUNNING, AgentState.IDLE]
    assert agents(server, cid)["InfoAgent_1"]["state"] == AgentState.IDLE
    stored = history(server, cid, "InfoAgent_1")
    assert_tool_calls_closed([{k: m[k] for k in ("role", "tool_calls", "tool_call_id")} for m in stored])
    assert len(requests_of(llm, sub(1))) == 1

    # the master's answer comes after the stop: the sub-agent's next request stays valid
    hold_answer.set()
    wait_until(lambda: len(requests_of(llm, sub(1))) == 2, what="the sub-agent's next model call")
    after = requests_of(llm, sub(1))[1]
    assert_tool_calls_closed(after)
    assert sum("Answer after the stop." in c for c in contents(after)) == 1


def test_parallel_asks_of_several_sub_agents_never_cross(server, llm, gates):
    together = gates()
    names = [f"InfoAgent_{n}" for n in (1, 2, 3, 4)]
    llm.set_default(answering(lambda asker, q: f"secret of {asker}"))
    script_team(llm, *[f"task {n}" for n in names])
    for n, name in enumerate(names, 1):
        llm.script(tool_calls(("ask_master", {"question": f"What is my secret? ({name})"}), wait=together),
                   match=sub(n))
        llm.script(text(f"{name} done."), match=sub(n))
    cid, _ = start_team(server)
    any_sub = lambda body: any(sub(n)(body) for n in range(1, len(names) + 1))  # noqa: E731
    wait_until(lambda: len(requests_of(llm, any_sub)) == len(names), what="all sub-agents' model calls")
    together.set()

    for n, name in enumerate(names, 1):
        [turn] = wait_tasks(server, cid, name, 1)
        [result] = tool_results(turn, "ask_master")
        assert result["success"] is True and result["answer"] == f"secret of {name}", (name, result)
        assert json.loads(requests_of(llm, sub(n))[1][-1]["content"]) == result
    answers = all_tool_results(server, cid, "MasterAgent", "answer_sub_agent_question")
    assert len(answers) == len(names)
    assert sorted(a["to"] for a in answers) == names
    assert len({a["question_id"] for a in answers}) == len(names)
    assert all(a["delivery"] == Delivery.RESOLVED for a in answers)


def test_several_messages_to_a_completed_agent_start_one_turn_that_sees_all_in_order(server, llm, gates):
    hold_sub = gates()
    parts = ["part 1: flights", "part 2: hotels", "part 3: trains"]
    llm.set_default(text("done."))
    script_team(llm, "get ready")
    llm.script(text("Started."), match=all_of(MASTER, last_user_contains("start the team")))
    llm.script(tool_calls(*[("send_message_to_sub_agent", {"display_name": "InfoAgent_1", "message": p})
                            for p in parts]),
               match=all_of(MASTER, last_user_contains("[Sub-agent InfoAgent_1 succeeded")))
    llm.script(text("Ready.", wait=hold_sub), match=sub(1))
    llm.script(text("All three parts handled."), match=sub(1))
    cid, master_task = start_team(server)
    server.wait_task(master_task)
    hold_sub.set()

    sent = [f"[Message from MasterAgent] {p}" for p in parts]
    wait_until(lambda: len([c for r in requests_of(llm, sub(1)) for c in contents(r) if c == sent[-1]]) >= 1,
               what="the last part in a request of the sub-agent")
    wait_until(lambda: idle_everywhere(server, cid), what="every agent idle")
    deliveries = [r["delivery"] for r in all_tool_results(server, cid, "MasterAgent", "send_message_to_sub_agent")]
    assert deliveries == [Delivery.TRIGGERED_NEW_TURN, Delivery.INJECTED_INLINE, Delivery.INJECTED_INLINE]
    # The first part starts one turn; the others join it. Whether they reach its first model request depends
    # on whether that request is built before the master's last send commits (its writes yield to the other
    # green threads, as on every database), so the parts may take up to one request each: never more, never
    # out of order, never twice.
    requests = requests_of(llm, sub(1))[1:]  # after the sub-agent's first task
    assert 1 <= len(requests) <= len(parts)
    assert [c for c in contents(requests[-1]) if c.startswith("[Message from MasterAgent]")] == sent
    tasks = [server.wait_task(t["task_id"]) for t in agent_tasks(server, cid, "InfoAgent_1")][1:]
    seen = [e["data"]["message"] for t in tasks for e in t["events"] if e["type"] == UserMessageEvent.TYPE]
    assert seen == sent
    assert all(t["status"] == TaskStatus.SUCCEEDED for t in tasks)


def test_messages_queued_at_sigkill_are_delivered_once_after_restart(make_server, llm, gates):
    """At SIGKILL, three messages wait for a sub-agent whose model call is open, a second sub-agent
    is blocked in ask_master, and its question and two user messages wait for the master. After
    the restart each queued message reaches its agent's next model request exactly once, in order;
    the interrupted ask is closed with a result; a further restart delivers nothing again."""
    server = make_server()
    never_sub, never_master, hold_master, hold_ask = gates(), gates(), gates(), gates()
    guidance = ["first: Paris", "second: Rome", "third: Oslo"]
    llm.set_default(answering(lambda asker, q: f"answer after restart for {asker}", otherwise="done."))
    script_team(llm, "visit the cities", "pick a museum")
    llm.script(tool_calls(*[("send_message_to_sub_agent", {"display_name": "InfoAgent_1", "message": g})
                            for g in guidance], wait=hold_master), match=MASTER)
    llm.script(text("thinking forever", wait=never_master), match=MASTER)
    llm.script(text("stuck", wait=never_sub), match=sub(1))
    llm.script(tool_calls(("ask_master", {"question": "Which museum?"}), wait=hold_ask), match=sub(2))
    cid, master_task = start_team(server)
    wait_until(lambda: requests_of(llm, sub(1)), what="the sub-agent's open model call")
    hold_master.set()
    wait_until(lambda: len(requests_of(llm, MASTER)) == 3, what="the master's last model call")
    hold_ask.set()
    # The asker shows `waiting` just before its question is queued: the user's messages come after the question.
    wait_until(lambda: agent_is(server, cid, "InfoAgent_2", AgentState.WAITING)
               and agents(server, cid)["MasterAgent"]["pending_count"] == 1, what="InfoAgent_2's question queued")
    for text_ in ("user one", "user two"):
        assert server.send(text_, cid)["delivery"] == Delivery.INJECTED_INLINE
    listed = agents(server, cid)
    assert listed["InfoAgent_1"]["pending_count"] == 3 and listed["MasterAgent"]["pending_count"] == 3

    server.kill()
    never_sub.set()
    never_master.set()
    llm.script(text("Visited all three."), match=sub(1))
    seen_before = len(llm.agent_requests)
    server.start()

    wait_until(lambda: idle_everywhere(server, cid), timeout=20, what="recovery and all follow-ups")
    assert server.get(f"/api/tasks/{master_task}").json()["status"] == TaskStatus.FAILED
    after = [r.body["messages"] for r in llm.agent_requests[seen_before:]]
    for messages in after:
        assert_tool_calls_closed(messages)
    sub_after = [m for m in after if sub(1)({"messages": m})]
    expected = ["visit the cities", *[f"[Message from MasterAgent] {g}" for g in guidance]]
    assert contents(sub_after[0]) == expected
    master_first = [m for m in after if MASTER({"messages": m})][0]
    lines = [c.split("\n")[0] for c in contents(master_first)]
    # the sub-agents' interrupted turns are reported to the master, once each, after what was queued before
    interrupted = [line for line in lines if line.startswith("[Sub-agent ")]
    assert sorted(line.split(" failed")[0] for line in interrupted) == ["[Sub-agent InfoAgent_1",
                                                                        "[Sub-agent InfoAgent_2"]
    assert lines[-2:] == interrupted
    queued = [line for line in lines if not line.startswith("[Sub-agent ")][-3:]
    assert queued[0].startswith("[Question q_") and queued[0].endswith("from InfoAgent_2] Which museum?")
    assert queued[1:] == ["user one", "user two"]
    sub_history = contents(history(server, cid, "InfoAgent_1"))
    assert sub_history[:4] == expected and len(sub_history) == len(set(sub_history))
    master_users = [c.split("\n")[0] for c in contents(history(server, cid)) if not c.startswith("[Sub-agent ")]
    assert master_users == ["start the team", queued[0], "user one", "user two"]
    # the ask open at the kill was closed; the master's answer came later, once, as a message
    asker = history(server, cid, "InfoAgent_2")
    closed = next(m for m in asker if m["role"] == "tool" and m["name"] == "ask_master")
    assert "interrupted" in json.loads(closed["content"])["error"]
    asker_last = [m for m in after if sub(2)({"messages": m})][-1]
    assert sum("answer after restart for InfoAgent_2" in c for c in contents(asker_last)) == 1
    assert "[Answer to q_" in contents(asker_last)[-1]

    tasks_before = server.get(f"/api/tasks?conversation_id={cid}").json()["data"]
    requests_before = len(llm.agent_requests)  # (a suggestion call after the last reply may still come)
    server.restart()
    assert server.get(f"/api/tasks?conversation_id={cid}").json()["data"] == tasks_before
    assert contents(history(server, cid, "InfoAgent_1")) == sub_history
    assert len(llm.agent_requests) == requests_before


def test_agents_listing_shows_states_and_pending_counts(server, llm, gates):
    conv = server.post("/api/conversations", {"title": "states"}).json()
    listed = agents(server, conv["conversation_id"])
    assert [(a["display_name"], a["state"], a["pending_count"], a["parent_id"]) for a in listed.values()] == [
        ("MasterAgent", "idle", 0, None)]
    hold_sub = gates()
    llm.set_default(text("done."))
    llm.script(text("working", wait=hold_sub), match=sub(1))
    llm.script(tool_calls(("create_sub_agent", {"role": "InfoAgent", "task": "work"})), match=MASTER)
    llm.script(text("Started."), match=MASTER)
    sent = server.send("start", conv["conversation_id"])
    server.wait_task(sent["task_id"])
    cid = conv["conversation_id"]
    listed = agents(server, cid)
    assert listed["MasterAgent"]["state"] == AgentState.COMPLETED
    assert listed["InfoAgent_1"]["state"] == AgentState.RUNNING
    assert listed["InfoAgent_1"]["parent_id"] == listed["MasterAgent"]["agent_id"]
    assert listed["InfoAgent_1"]["role"] == "InfoAgent"
    hold_sub.set()
    wait_until(lambda: agent_is(server, cid, "InfoAgent_1", AgentState.COMPLETED), what="the sub-agent done")
