"""Receiver-decided message routing (README, "Architecture") through the real server and the scripted model.

Every test drives `run.py` over HTTP: the user talks to the master with `POST /api/tasks`, the
master's scripted tool calls create sub-agents and send them messages, sub-agents ask and answer.
The assertions are on what each model request contained, on the tools' results, on the task
event logs and on `GET /api/conversations/<cid>/agents`.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable, Iterator

import pytest

from test.conftest import ServerProcess, wait_until
from test.scripted_llm import dynamic, match_system, text, tool_calls

MASTER = match_system("You are MasterAgent")
QUESTION = re.compile(r"\[Question (q_[0-9a-f]{12}) from ([^\]]+)\] ([^\n]*)")
QID = re.compile(r"q_[0-9a-f]{12}")


def sub(n: int, role: str = "InfoAgent"):
    return match_system(f"You are {role}_{n} ")


def all_of(*matches):
    return lambda body: all(m(body) for m in matches)


def last_user_contains(substr: str):
    def match(body: dict) -> bool:
        users = [m for m in body.get("messages", []) if m.get("role") == "user"]
        return bool(users) and substr in (users[-1].get("content") or "")
    return match


# -- reading the server and the model's requests --------------------------------------
def agents(server, cid: str) -> dict[str, dict]:
    return {a["display_name"]: a for a in server.get(f"/api/conversations/{cid}/agents").json()["data"]}


def agent_is(server, cid: str, name: str, state: str | None = None, pending: int | None = None) -> bool:
    """`name` exists, and is in `state` and has `pending` queued messages when those are given."""
    agent = agents(server, cid).get(name)
    return agent is not None and state in (None, agent["state"]) and pending in (None, agent["pending_count"])


def agent_tasks(server, cid: str, name: str) -> list[dict]:
    agent = agents(server, cid).get(name)
    if agent is None:
        return []
    agent_id = agent["agent_id"]
    return [t for t in server.get(f"/api/tasks?conversation_id={cid}").json()["data"] if t["agent_id"] == agent_id]


def wait_tasks(server, cid: str, name: str, n: int, timeout: float = 15) -> list[dict]:
    """Wait until `name` has `n` tasks and all of them are finished; the finished tasks with events."""
    tasks = wait_until(lambda: (t := agent_tasks(server, cid, name)) and len(t) >= n and t, timeout,
                       f"{name} to have {n} tasks")
    assert len(tasks) == n, f"{name} has {len(tasks)} tasks, expected {n}"
    return [server.wait_task(t["task_id"], timeout) for t in tasks]


def history(server, cid: str, agent: str | None = None) -> list[dict]:
    path = f"/api/conversations/{cid}/messages" + (f"?agent={agent}" if agent else "")
    return server.get(path).json()["data"]


def requests_of(llm, match) -> list[list[dict]]:
    """The messages of every model request that `match` accepts, in arrival order."""
    return [r.body["messages"] for r in llm.requests if match(r.body)]


def tool_results(task: dict, name: str) -> list[dict]:
    return [json.loads(e["data"]["result"]) for e in task["events"]
            if e["type"] == "tool_result" and e["data"]["name"] == name]


def states_of(task: dict) -> list[str]:
    return [e["data"]["state"] for e in task["events"] if e["type"] == "agent_state"]


def contents(messages: list[dict], role: str = "user") -> list[str]:
    return [m.get("content") or "" for m in messages if m["role"] == role]


def assert_tool_calls_closed(messages: list[dict]) -> None:
    """What the provider checks: each assistant tool_calls message is followed by exactly its results."""
    i = 0
    while i < len(messages):
        m = messages[i]
        assert m["role"] != "tool", f"a tool result without its call at {i}: {m}"
        if m["role"] == "assistant" and m.get("tool_calls"):
            ids = [c["id"] for c in m["tool_calls"]]
            block = messages[i + 1:i + 1 + len(ids)]
            assert [b["role"] for b in block] == ["tool"] * len(ids), f"open tool calls at {i}: {messages}"
            assert sorted(b["tool_call_id"] for b in block) == sorted(ids)
            i += 1 + len(ids)
        else:
            i += 1


def idle_everywhere(server, cid: str) -> bool:
    listed = agents(server, cid).values()
    tasks = server.get(f"/api/tasks?conversation_id={cid}").json()["data"]
    return (all(a["state"] in ("idle", "completed") and a["pending_count"] == 0 for a in listed)
            and all(t["status"] in ("succeeded", "failed", "stopped") for t in tasks))


# -- a master that answers the questions it is asked --------------------------------
def unanswered_questions(body: dict) -> list[tuple[str, str, str]]:
    """(question_id, asker, question) of every question in the request not answered by a tool call yet."""
    asked = [QUESTION.search(m.get("content") or "") for m in body["messages"] if m["role"] == "user"]
    answered = {json.loads(c["function"]["arguments"]).get("question_id")
                for m in body["messages"] if m["role"] == "assistant" for c in m.get("tool_calls") or []}
    return [q.groups() for q in asked if q and q.group(1) not in answered]


def answering(answer: Callable[[str, str], str], tool: str = "answer_sub_agent_question",
              hold: threading.Event | None = None, otherwise: str = "ok"):
    """A dynamic step: answer every open question of the request with `answer(asker, question)`."""
    def build(body: dict):
        open_questions = unanswered_questions(body)
        if not open_questions:
            return text(otherwise)
        return tool_calls(*[(tool, {"question_id": qid, "answer": answer(asker, question)})
                            for qid, asker, question in open_questions], wait=hold)
    return dynamic(build)


class Gates:
    """Events that hold model calls open; all are released at the end so no scripted call lingers."""

    def __init__(self) -> None:
        self.made: list[threading.Event] = []

    def __call__(self) -> threading.Event:
        self.made.append(threading.Event())
        return self.made[-1]

    def release(self) -> None:
        for gate in self.made:
            gate.set()


@pytest.fixture
def gates() -> Iterator[Gates]:
    made = Gates()
    yield made
    made.release()


@pytest.fixture(scope="module")
def shared_server(tmp_path_factory, llm_server) -> Iterator[ServerProcess]:
    """One server for the tests of this module that need no special settings or restarts (each
    test works in its own conversation); starting a server per test would triple the run time."""
    proc = ServerProcess(tmp_path_factory.mktemp("router"), llm_server.base_url).start()
    yield proc
    proc.stop()


@pytest.fixture
def server(shared_server, llm, gates) -> Iterator[ServerProcess]:
    """The shared server; after the test every conversation must come to rest, so that no turn of
    this test reaches the scripted model during the next one."""
    yield shared_server
    gates.release()
    for conv in shared_server.get("/api/conversations").json()["data"]:
        wait_until(lambda c=conv["conversation_id"]: idle_everywhere(shared_server, c), timeout=20,
                   what=f"conversation {conv['conversation_id']} at rest after the test")


def script_team(llm, *tasks: str, role: str = "InfoAgent") -> None:
    """Script first: the master's first model call starts one background sub-agent per task."""
    llm.script(tool_calls(*[("create_sub_agent", {"role": role, "task": t}) for t in tasks]), match=MASTER)


def start_team(server) -> tuple[str, str]:
    """The user's first message, which the master answers with `script_team`'s tool round."""
    sent = server.send("start the team")
    return sent["conversation_id"], sent["task_id"]


def all_tool_results(server, cid: str, name: str, tool: str) -> list[dict]:
    """`tool`'s results over every turn of agent `name`, once the whole conversation is at rest."""
    wait_until(lambda: idle_everywhere(server, cid), what="the conversation at rest")
    return [r for t in agent_tasks(server, cid, name) for r in tool_results(server.wait_task(t["task_id"]), tool)]


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
    assert agents(server, cid)["InfoAgent_1"]["state"] == "running"
    hold_sub.set()

    master = server.wait_task(master_task)
    assert tool_results(master, "send_message_to_sub_agent") == [
        {"success": True, "display_name": "InfoAgent_1", "delivery": "injected_inline"}]
    [turn] = wait_tasks(server, cid, "InfoAgent_1", 1)
    assert turn["status"] == "succeeded"
    first, second = requests_of(llm, sub(1))
    assert contents(first) == ["find hotels"]
    assert second[-1] == {"role": "user", "content": "[Message from MasterAgent] only hotels near the station"}
    assert second[-2]["role"] == "tool" and second[-3]["role"] == "assistant"
    assert_tool_calls_closed(second)
    inline = [e["data"] for e in turn["events"] if e["type"] == "user_message"][1:]
    assert [(d["source"], d["starts_work"]) for d in inline] == [("guidance", False)]
    assert states_of(turn) == ["running", "completed"]
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
    assert listed["InfoAgent_1"]["state"] == "waiting" and listed["MasterAgent"]["state"] == "running"
    assert listed["InfoAgent_1"]["pending_count"] == 0 and listed["MasterAgent"]["pending_count"] == 0
    hold_answer.set()

    [turn] = wait_tasks(server, cid, "InfoAgent_1", 1)
    assert turn["status"] == "succeeded"
    [result] = tool_results(turn, "ask_master")
    assert result == {"success": True, "question_id": qid, "answer": "Go by train.", "from": "MasterAgent"}
    second = requests_of(llm, sub(1))[1]
    assert second[-1]["role"] == "tool" and json.loads(second[-1]["content"]) == result
    assert states_of(turn) == ["running", "waiting", "running", "completed"]
    [answered] = all_tool_results(server, cid, "MasterAgent", "answer_sub_agent_question")
    assert answered["delivery"] == "resolved" and answered["to"] == "InfoAgent_1"
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

    wait_until(lambda: agent_is(server, cid, "InfoAgent_1", "completed"), what="the first turn's end")
    first_turn, second_turn = wait_tasks(server, cid, "InfoAgent_1", 2)
    assert all_tool_results(server, cid, "MasterAgent", "send_message_to_sub_agent") == [
        {"success": True, "display_name": "InfoAgent_1", "delivery": "triggered_new_turn"}]
    assert first_turn["status"] == second_turn["status"] == "succeeded"
    trigger = second_turn["events"][0]
    assert trigger["type"] == "user_message" and trigger["data"]["starts_work"] is True
    assert trigger["data"]["message"] == "[Message from MasterAgent] now summarise chapter 2"
    requests = requests_of(llm, sub(1))
    assert len(requests) == 2
    assert [(m["role"], m["content"]) for m in requests[1][1:]] == [
        ("user", "summarise chapter 1"), ("assistant", "Summary of chapter 1."),
        ("user", "[Message from MasterAgent] now summarise chapter 2")]
    assert states_of(second_turn) == ["running", "completed"]


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
    assert tool_results(master, "send_message_to_sub_agent")[0]["delivery"] == "injected_inline"
    first, second = wait_tasks(server, cid, "InfoAgent_1", 2)
    assert first["status"] == second["status"] == "succeeded"
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

    wait_until(lambda: agent_is(server, cid, "InfoAgent_1", "waiting")
               and agent_is(server, cid, "InfoAgent_2", "running", pending=1),
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
                        "delivery": "resolved"}
    a_second = requests_of(llm, sub(1))[1]
    assert json.loads(a_second[-1]["content"]) == asked
    assert states_of(a_turn) == ["running", "waiting", "running", "completed"]


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
    assert states_of(turn) == ["running", "waiting", "running", "completed"]
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
    wait_until(lambda: agent_is(server, cid, "InfoAgent_1", "waiting"), what="the sub-agent waiting")
    [waiting] = agent_tasks(server, cid, "InfoAgent_1")
    res = server.post(f"/api/tasks/{waiting['task_id']}/cancel")
    assert res.status_code == 200, res.text

    turn = server.wait_task(waiting["task_id"], timeout=5)
    assert turn["status"] == "stopped" and turn["events"][-1]["type"] == "task_stopped"
    [result] = tool_results(turn, "ask_master")
    assert result["success"] is False and result["error"] == "stopped by the user while waiting for the answer"
    [skipped] = tool_results(turn, "run_command")
    assert skipped["success"] is False and "cancelled" in skipped["error"]
    assert states_of(turn) == ["running", "waiting", "running", "idle"]
    assert agents(server, cid)["InfoAgent_1"]["state"] == "idle"
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
    assert all(a["delivery"] == "resolved" for a in answers)


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

    first, second = wait_tasks(server, cid, "InfoAgent_1", 2)
    deliveries = [r["delivery"] for r in all_tool_results(server, cid, "MasterAgent", "send_message_to_sub_agent")]
    assert deliveries == ["triggered_new_turn", "injected_inline", "injected_inline"]
    requests = requests_of(llm, sub(1))
    assert len(requests) == 2, "the messages cost more than one model call"
    assert contents(requests[1])[-3:] == [f"[Message from MasterAgent] {p}" for p in parts]
    seen = [e["data"]["message"] for e in second["events"] if e["type"] == "user_message"]
    assert seen == [f"[Message from MasterAgent] {p}" for p in parts]
    assert second["status"] == "succeeded"


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
    wait_until(lambda: agent_is(server, cid, "InfoAgent_2", "waiting")
               and agents(server, cid)["MasterAgent"]["pending_count"] == 1, what="InfoAgent_2's question queued")
    for text_ in ("user one", "user two"):
        assert server.send(text_, cid)["delivery"] == "injected_inline"
    listed = agents(server, cid)
    assert listed["InfoAgent_1"]["pending_count"] == 3 and listed["MasterAgent"]["pending_count"] == 3

    server.kill()
    never_sub.set()
    never_master.set()
    llm.script(text("Visited all three."), match=sub(1))
    seen_before = len(llm.agent_requests)
    server.start()

    wait_until(lambda: idle_everywhere(server, cid), timeout=20, what="recovery and all follow-ups")
    assert server.get(f"/api/tasks/{master_task}").json()["status"] == "failed"
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
    assert listed["MasterAgent"]["state"] == "completed"
    assert listed["InfoAgent_1"]["state"] == "running"
    assert listed["InfoAgent_1"]["parent_id"] == listed["MasterAgent"]["agent_id"]
    assert listed["InfoAgent_1"]["role"] == "InfoAgent"
    hold_sub.set()
    wait_until(lambda: agent_is(server, cid, "InfoAgent_1", "completed"), what="the sub-agent done")
