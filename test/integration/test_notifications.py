"""The completion notification pool, through the real server and the scripted model."""

from __future__ import annotations

import json
import threading

from modules.event_catalogue import AiMessageStartEvent, SubAgentWaitingEvent, ToolResultEvent, UserMessageEvent
from modules.statuses import CommandStatus, Delivery, MessageSource, TaskStatus, Visibility
from test.conftest import event_types, wait_until
from test.integration.helpers import MASTER, history, master_tasks, notices, sub
from test.scripted_llm import dynamic, text, tool_calls


def test_three_background_sub_agents_cost_two_follow_ups(server, llm):
    gates = [threading.Event() for _ in range(3)]
    hold_follow_up = threading.Event()
    llm.script(tool_calls(*[("create_sub_agent", {"role": "InfoAgent", "task": f"look up {c}"}) for c in "ABC"]),
               match=MASTER)
    llm.script(text("Three helpers are on it."), match=MASTER)
    llm.script(text("First result is in.", wait=hold_follow_up), match=MASTER)
    llm.script(text("All results are in."), match=MASTER)
    for n in range(3):
        llm.script(text(f"result {n + 1}", wait=gates[n]), match=sub(n + 1))

    sent = server.send("research A, B and C")
    cid = sent["conversation_id"]
    first = server.wait_task(sent["task_id"])
    assert first["status"] == TaskStatus.SUCCEEDED
    create_results = [json.loads(e["data"]["result"]) for e in first["events"] if e["type"] == ToolResultEvent.TYPE]
    assert [r["display_name"] for r in create_results] == ["InfoAgent_1", "InfoAgent_2", "InfoAgent_3"]
    assert first["events"][-1]["data"]["has_running_sub_agents"] is True
    waiting = [e for e in first["events"] if e["type"] == SubAgentWaitingEvent.TYPE]
    assert waiting and waiting[-1]["data"]["count"] == 3

    gates[0].set()  # the first finishes while the master is idle
    wait_until(lambda: len(master_tasks(server, cid)) == 2, what="first follow-up")
    subs = lambda: {s["display_name"]: s["status"] for s in  # noqa: E731
                    server.get(f"/api/sub_agents?conversation_id={cid}").json()["data"]}
    gates[1].set()
    wait_until(lambda: subs()["InfoAgent_2"] == "succeeded", what="InfoAgent_2 done")
    gates[2].set()
    wait_until(lambda: subs()["InfoAgent_3"] == "succeeded", what="InfoAgent_3 done")
    status = server.get(f"/api/conversations/{cid}/running-status").json()
    assert status["pending_notices"] == 2 and status["is_main_running"] is True
    hold_follow_up.set()

    tasks = wait_until(lambda: (t := master_tasks(server, cid)) and len(t) == 3 and t, what="second follow-up")
    follow_1 = server.wait_task(tasks[1]["task_id"])
    follow_2 = server.wait_task(tasks[2]["task_id"])
    assert follow_1["status"] == follow_2["status"] == TaskStatus.SUCCEEDED
    follow_1_notices = [e["data"]["message"] for e in follow_1["events"] if e["type"] == UserMessageEvent.TYPE]
    assert len(follow_1_notices) == 1 and follow_1_notices[0].startswith("[Sub-agent InfoAgent_1 succeeded")
    first_two = follow_2["events"][:2]
    assert [e["type"] for e in first_two] == [UserMessageEvent.TYPE, UserMessageEvent.TYPE]
    assert "InfoAgent_2" in first_two[0]["data"]["message"] and first_two[0]["data"]["starts_work"] is False
    assert "InfoAgent_3" in first_two[1]["data"]["message"] and first_two[1]["data"]["starts_work"] is True
    assert all(e["data"]["source"] == MessageSource.SUB_AGENT and e["data"]["visibility"] == Visibility.COMPACT
               for e in first_two)

    noted = notices(history(server, cid))
    assert [m["metadata"]["from_agent"] for m in noted] == ["InfoAgent_1", "InfoAgent_2", "InfoAgent_3"]
    assert "result 2" in noted[1]["content"] and "result 3" in noted[2]["content"]
    assert len(master_tasks(server, cid)) == 3
    # the last follow-up's model request saw both notices, in finish order, after the earlier turns
    last_request = [r for r in llm.requests if MASTER(r.body)][-1].body["messages"]
    assert "InfoAgent_2" in last_request[-2]["content"] and "InfoAgent_3" in last_request[-1]["content"]


def test_completion_during_a_tool_round_arrives_inline(server, llm):
    # The round's foreground command lasts until the test has seen the background one recorded as finished
    # (its cue is a file in the workspace), so the notice is queued while the round runs, however busy the machine.
    llm.script(tool_calls(("run_command", {"command": "echo quick-bg", "run_in_background": True}),
                          ("run_command", {"command": "for t in $(seq 6000); do [ -e go ] && break; sleep 0.01; done",
                                           "timeout": 90})), match=MASTER)
    llm.script(text("Saw it."), match=MASTER)
    sent = server.send("go")
    cid = sent["conversation_id"]
    wait_until(lambda: [c["status"] for c in server.get(f"/api/background_commands?conversation_id={cid}")
                        .json()["data"]] == [CommandStatus.SUCCEEDED],
                        what="the background command recorded as finished")
    (server.workspace(cid) / "go").touch()
    task = server.wait_task(sent["task_id"])
    assert task["status"] == TaskStatus.SUCCEEDED
    types = event_types(task)
    notice_at = [i for i, e in enumerate(task["events"])
                 if e["type"] == UserMessageEvent.TYPE and e["data"]["source"] == MessageSource.BACKGROUND_COMMAND]
    assert len(notice_at) == 1
    last_reply_at = len(types) - 1 - types[::-1].index(AiMessageStartEvent.TYPE)
    assert types.index(ToolResultEvent.TYPE) < notice_at[0] < last_reply_at
    assert task["events"][notice_at[0]]["data"]["starts_work"] is False
    assert len(master_tasks(server, sent["conversation_id"])) == 1
    second = llm.wait_for_requests(2)[1].body["messages"]
    assert [m["role"] for m in second[-4:]] == ["assistant", "tool", "tool", "user"]
    assert "quick-bg" in second[-1]["content"] and "exit code 0" in second[-1]["content"]
    noted = notices(history(server, sent["conversation_id"]))
    assert len(noted) == 1 and noted[0]["metadata"]["visibility"] == Visibility.COMPACT
    cmds = server.get(f"/api/background_commands?conversation_id={sent['conversation_id']}").json()["data"]
    assert cmds[0]["status"] == CommandStatus.SUCCEEDED and cmds[0]["exit_code"] == 0
    assert "quick-bg" in cmds[0]["output_tail"]


def test_twenty_commands_finishing_together_cost_one_follow_up(make_server, llm):
    # The wave ends when the test says so, not after a sleep that a busy machine may stretch; the settle window
    # is as wide as the design allows (500 ms), so the wave needs only to end within it.
    server = make_server(env={"NOTICE_SETTLE_MS": "500"})
    # The cue is a file in the workspace: the only folder of the host that a sandboxed command sees.
    calls = [("run_command", {"command": f"for t in $(seq 6000); do [ -e go ] && break; sleep 0.01; done; "
                                         f"echo job-{i}",
                              "run_in_background": True, "timeout": 60}) for i in range(20)]
    llm.script(tool_calls(*calls), match=MASTER)
    llm.script(text("Twenty jobs started."), match=MASTER)
    llm.script(text("All twenty finished."), match=MASTER)
    sent = server.send("start twenty jobs")
    cid = sent["conversation_id"]
    assert server.wait_task(sent["task_id"])["status"] == TaskStatus.SUCCEEDED
    wait_until(lambda: all(c["status"] == CommandStatus.RUNNING for c in server.get(
        f"/api/background_commands?conversation_id={cid}").json()["data"]), what="twenty commands running")
    (server.workspace(cid) / "go").touch()
    tasks = wait_until(lambda: (t := master_tasks(server, cid)) and len(t) == 2 and t, what="the follow-up")
    follow = server.wait_task(tasks[1]["task_id"])
    assert follow["status"] == TaskStatus.SUCCEEDED
    wait_until(lambda: not server.get(f"/api/conversations/{cid}/running-status").json()[
        "has_running_background_commands"], what="all commands done")
    assert len(master_tasks(server, cid)) == 2
    noted = [e for e in follow["events"] if e["type"] == UserMessageEvent.TYPE]
    assert len(noted) == 20
    assert [e["data"]["starts_work"] for e in noted] == [False] * 19 + [True]
    assert len(notices(history(server, cid))) == 20


def test_notice_pending_at_sigkill_is_delivered_once_after_restart(server, llm):
    never = threading.Event()
    llm.script(tool_calls(("run_command", {"command": "echo finished-before-kill", "run_in_background": True})),
               match=MASTER)
    llm.script(text("still thinking", wait=never), match=MASTER)
    sent = server.send("start and keep thinking")
    cid = sent["conversation_id"]
    wait_until(lambda: server.get(f"/api/conversations/{cid}/running-status").json()["pending_notices"] == 1,
               what="notice queued while the master runs")
    # Killed inside its second model call (else the follow-up would be served the step that never answers).
    wait_until(lambda: len([r for r in llm.requests if MASTER(r.body)]) == 2, what="the master's second model call")
    server.kill()
    llm.script(text("Got the command's result."), match=MASTER)
    server.start()
    tasks = wait_until(lambda: (t := master_tasks(server, cid)) and len(t) == 2 and t, what="follow-up")
    follow = server.wait_task(tasks[1]["task_id"])
    assert follow["status"] == TaskStatus.SUCCEEDED
    assert server.get(f"/api/tasks/{sent['task_id']}").json()["status"] == TaskStatus.FAILED
    noted = notices(history(server, cid))
    assert len(noted) == 1 and "finished-before-kill" in noted[0]["content"]
    last = [r for r in llm.requests if MASTER(r.body)][-1].body["messages"]
    assert sum("finished-before-kill" in (m.get("content") or "") for m in last if m["role"] == "user") == 1
    server.restart()
    assert len(master_tasks(server, cid)) == 2
    assert len(notices(history(server, cid))) == 1


def test_command_running_at_a_crash_is_reported_lost(server, llm):
    llm.script(tool_calls(("run_command", {"command": "sleep 30", "run_in_background": True})), match=MASTER)
    llm.script(text("Started."), match=MASTER)
    llm.script(text("The job was lost."), match=MASTER)
    sent = server.send("long job")
    cid = sent["conversation_id"]
    server.wait_task(sent["task_id"])
    server.kill()
    server.start()
    tasks = wait_until(lambda: (t := master_tasks(server, cid)) and len(t) == 2 and t, what="lost notice turn")
    server.wait_task(tasks[1]["task_id"])
    cmds = server.get(f"/api/background_commands?conversation_id={cid}").json()["data"]
    assert cmds[0]["status"] == CommandStatus.LOST
    noted = notices(history(server, cid))
    assert len(noted) == 1 and "lost" in noted[0]["content"]


def test_sub_agent_is_woken_by_its_own_background_command(server, llm):
    llm.script(tool_calls(("create_sub_agent", {"role": "CoderAgent", "task": "build it"})), match=MASTER)
    llm.script(text("Coder started."), match=MASTER)
    llm.script(text("The coder is done."), match=MASTER)
    coder = sub(1, "CoderAgent")
    llm.script(tool_calls(("run_command", {"command": "sleep 0.3; echo built", "run_in_background": True})),
               match=coder)
    llm.script(text("Build started, waiting for it."), match=coder)
    llm.script(text("Build finished: built."), match=coder)
    sent = server.send("build the project")
    cid = sent["conversation_id"]
    server.wait_task(sent["task_id"])
    coder_msgs = wait_until(lambda: (m := history(server, cid, "CoderAgent_1")) and
                            any(x["role"] == "assistant" and x["content"] == "Build finished: built." for x in m) and m,
                            what="coder woken by its command")
    assert len(notices(coder_msgs)) == 1 and "built" in notices(coder_msgs)[0]["content"]
    # Both of the coder's turns reach the master, as one follow-up each or inline into the first, as timing has it.
    wait_until(lambda: len(notices(history(server, cid))) == 2 and not server.get(
        f"/api/conversations/{cid}/running-status").json()["is_main_running"], what="master notices")
    follow = [server.wait_task(t["task_id"]) for t in master_tasks(server, cid)[1:]]
    texts = [e["data"]["message"] for f in follow for e in f["events"] if e["type"] == UserMessageEvent.TYPE]
    assert "Build started" in texts[0] and "Build finished" in texts[1] and len(texts) == 2


def test_blocking_sub_agent_returns_its_answer_as_the_tool_result(server, llm):
    llm.script(tool_calls(("create_sub_agent", {"role": "InfoAgent", "task": "capital of France?",
                                                "run_in_background": False})), match=MASTER)
    llm.script(text("It is Paris."), match=MASTER)
    llm.script(text("Paris"), match=sub(1))
    sent = server.send("ask a helper")
    task = server.wait_task(sent["task_id"])
    result = json.loads(next(e for e in task["events"] if e["type"] == ToolResultEvent.TYPE)["data"]["result"])
    assert result["success"] is True and result["answer"] == "Paris" and result["display_name"] == "InfoAgent_1"
    assert len(master_tasks(server, sent["conversation_id"])) == 1
    assert notices(history(server, sent["conversation_id"])) == []


def test_user_message_racing_completions_never_runs_two_master_turns(server, llm):
    llm.set_default(text("ok", delay_s=0.01))
    llm.script(tool_calls(*[("run_command", {"command": f"sleep 0.5; echo r{i}", "run_in_background": True})
                            for i in range(5)]), match=MASTER)
    sent = server.send("start five")
    cid = sent["conversation_id"]
    server.wait_task(sent["task_id"])
    wait_until(lambda: any(c["status"] != CommandStatus.RUNNING for c in server.get(
        f"/api/background_commands?conversation_id={cid}").json()["data"]), what="the first command to finish")
    answers = []
    threads = [threading.Thread(target=lambda i=i: answers.append(server.send(f"user {i}", cid))) for i in range(5)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(15)
    assert sorted(a["message_id"] for a in answers) == sorted({a["message_id"] for a in answers})
    assert len(answers) == 5 and all(a["target_agent"] == "MasterAgent" for a in answers)
    assert all(a["delivery"] in (Delivery.INJECTED_INLINE, Delivery.TRIGGERED_NEW_TURN) for a in answers), answers
    wait_until(lambda: len(notices(history(server, cid))) == 5 and
               not server.get(f"/api/conversations/{cid}/running-status").json()["is_main_running"],
               what="everything delivered")
    tasks = [server.wait_task(t["task_id"]) for t in master_tasks(server, cid)]
    spans = sorted((e["events"][0]["ts"], e["events"][-1]["ts"]) for e in tasks)
    for (_, end), (start, _) in zip(spans, spans[1:], strict=False):
        assert start >= end, "two master turns overlapped"
    users = [m["content"] for m in history(server, cid) if m["role"] == "user"]
    assert sorted(u for u in users if u.startswith("user ")) == [f"user {i}" for i in range(5)]
    assert len(users) == 1 + 5 + 5  # first message, five user messages, five notices, each once
    # Each answer named a task that exists and saw the message (or whose end-of-turn follow-up did).
    task_ids = [t["task_id"] for t in tasks]
    for answer in answers:
        assert answer["task_id"] in task_ids, answer
        seen_by = task_ids[task_ids.index(answer["task_id"]):task_ids.index(answer["task_id"]) + 2]
        assert any(e["type"] == UserMessageEvent.TYPE and e["data"]["message_id"] == answer["message_id"]
                   for t in tasks if t["task_id"] in seen_by for e in t["events"]), answer


def test_a_blocking_sub_agent_that_asks_its_master_does_not_deadlock(make_server, llm):
    server = make_server(env={"ASK_TIMEOUT_S": "20"})
    llm.script(tool_calls(("create_sub_agent", {"role": "InfoAgent", "task": "find the budget",
                                                "run_in_background": False})), match=MASTER)
    llm.script(dynamic(lambda body: tool_calls(("answer_sub_agent_question", {
        "question_id": json.loads(body["messages"][-1]["content"])["question_id"], "answer": "500 EUR"}))),
        match=MASTER)
    llm.script(text("Asked and answered."), match=MASTER)
    llm.script(text("The budget is noted."), match=MASTER)
    llm.script(tool_calls(("ask_master", {"question": "What budget?"})), match=sub(1))
    llm.script(text("Budget: 500 EUR"), match=sub(1))
    sent = server.send("delegate and wait")
    task = server.wait_task(sent["task_id"], timeout=30)
    results = [json.loads(e["data"]["result"]) for e in task["events"] if e["type"] == ToolResultEvent.TYPE]
    assert results[0]["status"] == "asking" and results[0]["question"] == "What budget?"
    assert results[1]["success"] is True and results[1]["delivery"] == Delivery.RESOLVED
    cid = sent["conversation_id"]
    info = wait_until(lambda: (m := history(server, cid, "InfoAgent_1")) and
                      any(x["role"] == "assistant" and x["content"] == "Budget: 500 EUR" for x in m) and m,
                      what="sub-agent finished")
    ask_result = json.loads(next(m for m in info if m["role"] == "tool")["content"])
    assert ask_result["answer"] == "500 EUR"
    tasks = wait_until(lambda: (t := master_tasks(server, cid)) and len(t) == 2 and t, what="completion notice")
    assert server.wait_task(tasks[1]["task_id"])["status"] == TaskStatus.SUCCEEDED
