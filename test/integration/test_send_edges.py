"""Sends at their edges (docs/API.md, POST /api/tasks): a repeat while the first is in progress, a receiver
terminated while its message was routed (the reservation is released, nothing is stored), and the fast
path when the agent that reasoned last is a pipeline stage."""

from __future__ import annotations

import threading

from test.conftest import wait_until
from test.scripted_llm import match_system, text, tool_calls

REWRITE = match_system("You are QueryRewritingAgent")
INTENT = match_system("You are IntentRecognitionAgent")
SUGGEST = match_system("You suggest what the user may want to say next")
MASTER = match_system("You are MasterAgent")
INFO = match_system("You are InfoAgent_1 ")


def _kinds(requests) -> list[str]:
    return [r.body["messages"][0]["content"].split("You are ", 1)[1].split(" ")[0].rstrip(".")
            for r in requests if not SUGGEST(r.body)]


def _in_background(fn) -> tuple[threading.Thread, dict]:
    out: dict = {}
    thread = threading.Thread(target=lambda: out.update(result=fn()), daemon=True)
    thread.start()
    return thread, out


def _user_texts(server, cid, agent=None) -> list[str]:
    path = f"/api/conversations/{cid}/messages" + (f"?agent={agent}" if agent else "")
    return [m["content"] for m in server.get(path).json()["data"] if m["role"] == "user"]


def test_a_repeat_while_the_first_send_is_in_progress_is_refused_and_nothing_doubles(server, llm):
    hold_rewrite = threading.Event()
    llm.script(text("hello", wait=hold_rewrite), match=REWRITE)
    body = {"message": "hello", "client_message_id": "dup-1"}
    thread, first = _in_background(lambda: server.post("/api/tasks", body))
    llm.wait_for_requests(1, include_stages=True)  # the first send is inside its pipeline
    repeat = server.post("/api/tasks", body)
    assert repeat.status_code == 409 and repeat.json()["code"] == "duplicate_in_progress"
    hold_rewrite.set()
    thread.join(15)
    assert first["result"].status_code == 202
    assert server.send("hello", client_message_id="dup-1") == first["result"].json()
    answer = first["result"].json()
    server.wait_task(answer["task_id"])
    assert _user_texts(server, answer["conversation_id"]) == ["hello"]
    assert len(server.get("/api/conversations").json()["data"]) == 1


def test_a_receiver_terminated_while_routing_answers_agent_unavailable_and_frees_the_retry(server, llm):
    llm.script(text('{"agent": "InfoAgent"}'), match=INTENT)
    llm.script(text("Info here."), match=INFO)
    first = server.send("look something up")
    cid = first["conversation_id"]
    assert first["target_agent"] == "InfoAgent_1"
    server.wait_task(first["task_id"])

    hold_rewrite = threading.Event()
    llm.script(text("look up more", wait=hold_rewrite), match=REWRITE)
    llm.script(text('{"agent": "InfoAgent"}'), match=INTENT)
    body = {"message": "look up more", "conversation_id": cid, "client_message_id": "c-1"}
    thread, routed = _in_background(lambda: server.post("/api/tasks", body))
    wait_until(lambda: sum(REWRITE(r.body) for r in llm.requests) == 2, what="the second rewrite")
    # The routing chose among the agents it listed before the rewrite; InfoAgent_1 ends meanwhile.
    assert server.post(f"/api/sub_agents/{first['agent_id']}/terminate").status_code == 200
    hold_rewrite.set()
    thread.join(15)
    res = routed["result"]
    assert res.status_code == 409 and res.json()["code"] == "agent_unavailable", res.text
    assert "terminated" in res.json()["error"]
    assert _user_texts(server, cid, "InfoAgent_1") == ["look something up"]
    assert _user_texts(server, cid) == []
    assert all(a["pending_count"] == 0 for a in server.get(f"/api/conversations/{cid}/agents").json()["data"])

    # The failed send released its client_message_id: the retry is a new send, to a live agent.
    llm.script(text('{"agent": "InfoAgent"}'), match=INTENT)
    retry = server.send("look up more", cid, client_message_id="c-1")
    assert retry["target_agent"] == "InfoAgent_2" and retry["delivery"] == "triggered_new_turn"
    assert server.wait_task(retry["task_id"])["status"] == "succeeded"
    assert _user_texts(server, cid, "InfoAgent_2")[0].startswith("look up more")


def test_a_continuation_after_the_intent_stage_reasoned_last_reruns_only_intent(server, llm, tmp_path):
    go = tmp_path / "go"
    # The master is busy in a command (no model call) while two more messages arrive.
    # (Bounded on its own too: a failed test must not leave it polling after its server is gone.)
    wait_for_go = f"for i in $(seq 1200); do [ -e {go} ] && break; sleep 0.05; done; echo released"
    llm.script(tool_calls(("run_command", {"command": wait_for_go, "timeout": 60})), match=MASTER)
    llm.script(text("Both handled."), match=MASTER)
    first = server.send("start the long job")
    cid = first["conversation_id"]
    server.wait_event(first["task_id"], "tool_start")
    second = server.send("and note this", cid)
    assert (second["route"], second["delivery"]) == ("pipeline", "injected_inline")

    # The intent stage reasoned last: a continuation re-runs intent (no rewrite) and goes where it says.
    before = len(llm.requests)
    llm.script(text('{"agent": "InfoAgent"}'), match=INTENT)
    llm.script(text("Confirmed by info."), match=INFO)
    third = server.send("确认", cid)
    assert (third["route"], third["target_agent"]) == ("fast_path", "InfoAgent_1")
    assert server.wait_task(third["task_id"])["status"] == "succeeded"
    assert _kinds(llm.requests[before:]) == ["IntentRecognitionAgent", "InfoAgent_1"]

    go.touch()
    assert server.wait_task(first["task_id"])["status"] == "succeeded"
    last = [r for r in llm.requests if MASTER(r.body)][-1].body["messages"]
    assert [m["role"] for m in last[-3:]] == ["assistant", "tool", "user"]
    assert last[-1]["content"] == "and note this"
