"""The routing pipeline, the fast path, human in the loop and suggestions, counted in model requests."""

from __future__ import annotations

import json
import sqlite3
import threading

import socketio

from modules.event_catalogue import AskUserEvent, RouteEvent, SuggestionsEvent, TextEndEvent, ToolResultEvent
from modules.statuses import AgentState, Delivery, Route, SendStatus, TaskStatus
from test.conftest import run_refused_start, wait_until
from test.scripted_llm import dynamic, match_system, text, tool_calls

REWRITE = match_system("You are QueryRewritingAgent")
INTENT = match_system("You are IntentRecognitionAgent")
ROUTER = match_system("You are RoutingAgent")
SUGGEST = match_system("You suggest what the user may want to say next")
MASTER = match_system("You are MasterAgent")
INFO = match_system("You are InfoAgent_1 ")


def kinds(requests) -> list[str]:
    """Which agent or stage each model request of the routing and the reply came from (the
    asynchronous suggestion call that follows a reply is counted on its own, in the suggestion tests)."""
    return [r.body["messages"][0]["content"].split("You are ", 1)[1].split(" ")[0].rstrip(".")
            for r in requests if not SUGGEST(r.body)]


def test_pipeline_then_fast_path_to_the_specialist(server, llm):
    llm.script(text('{"query": "帮我查一下杭州的差旅政策", "agent": "InfoAgent"}'), match=ROUTER)
    llm.script(text("杭州：住宿每晚 500 元以内。"), match=INFO)
    first = server.send("帮我查一下杭州的差旅政策")
    assert first["route"] == Route.PIPELINE and first["target_agent"] == "InfoAgent_1"
    assert first["delivery"] == Delivery.TRIGGERED_NEW_TURN
    cid = first["conversation_id"]
    assert server.wait_task(first["task_id"])["status"] == TaskStatus.SUCCEEDED
    assert kinds(llm.requests) == ["RoutingAgent", "InfoAgent_1"]  # one routing request, not two

    # a short follow-up with content, tied to the active agent's answer: no routing request at all
    before = len(llm.requests)
    llm.script(text("上海：住宿每晚 600 元以内。按上海的标准帮你核对吗？"), match=INFO)
    second = server.send("那上海呢", cid)
    assert second["route"] == Route.FAST_PATH and second["target_agent"] == "InfoAgent_1"
    server.wait_task(second["task_id"])
    assert kinds(llm.requests[before:]) == ["InfoAgent_1"]

    # a continuation with a particle and a second clause, after a proposal
    before = len(llm.requests)
    llm.script(text("已确认，按上海标准执行。"), match=INFO)
    third = server.send("好的吧，就这样，谢谢", cid)
    assert third["route"] == Route.FAST_PATH and third["target_agent"] == "InfoAgent_1"
    task = server.wait_task(third["task_id"])
    assert task["status"] == TaskStatus.SUCCEEDED
    assert kinds(llm.requests[before:]) == ["InfoAgent_1"]
    route = next(e["data"] for e in task["events"] if e["type"] == RouteEvent.TYPE)
    assert route == {**route, "route": Route.FAST_PATH, "target_agent": "InfoAgent_1"}

    # a topic switch is vetoed even though it starts like a continuation; the one routing request
    # names the active agent and sees the history
    seen = []

    def route_it(body):
        seen.append(body["messages"][0]["content"] + body["messages"][-1]["content"])
        return text('{"query": "换一个城市查差旅政策", "agent": "InfoAgent"}')

    before = len(llm.requests)
    llm.script(dynamic(route_it), match=ROUTER)
    llm.script(text("好的，换哪个城市？"), match=INFO)
    fourth = server.send("换个城市", cid)
    assert fourth["route"] == Route.PIPELINE and fourth["target_agent"] == "InfoAgent_1"
    server.wait_task(fourth["task_id"])
    assert kinds(llm.requests[before:]) == ["RoutingAgent", "InfoAgent_1"]
    assert "talking with InfoAgent (InfoAgent_1)" in seen[0] and "杭州" in seen[0] and "换个城市" in seen[0]
    info_request = llm.agent_requests[-1].body["messages"]
    assert info_request[-1]["content"] == "换个城市\n\n[Understood as: 换一个城市查差旅政策]"


def test_a_term_of_another_agent_leaves_the_fast_path(server, llm):
    llm.script(text('{"query": "杭州差旅政策", "agent": "InfoAgent"}'), match=ROUTER)
    llm.script(text("杭州：住宿每晚 500 元以内。需要我再查别的城市吗？"), match=INFO)
    first = server.send("帮我查一下杭州的差旅政策")
    server.wait_task(first["task_id"])
    booking = match_system("You are BookingAgent_1 ")
    llm.script(text('{"query": "预订上海的酒店", "agent": "BookingAgent"}'), match=ROUTER)
    llm.script(text("好的，几号入住？"), match=booking)
    sent = server.send("那帮我订上海的酒店", first["conversation_id"])  # refers back, but names a booking term
    assert sent["route"] == Route.PIPELINE and sent["target_agent"] == "BookingAgent_1"
    server.wait_task(sent["task_id"])


def test_separate_stages_by_configuration(make_server, llm):
    server = make_server(env={"ROUTING_STAGES": "separate"})
    seen_history = []

    def rewrite(body):
        seen_history.append(body["messages"][-1]["content"])
        return text("杭州的差旅政策是什么")

    llm.script(dynamic(rewrite), match=REWRITE)
    llm.script(text('{"agent": "InfoAgent"}'), match=INTENT)
    llm.script(text("杭州：住宿每晚 500 元以内。"), match=INFO)
    first = server.send("查查杭州的")
    assert first["route"] == Route.PIPELINE and first["target_agent"] == "InfoAgent_1"
    server.wait_task(first["task_id"])
    assert kinds(llm.requests) == ["QueryRewritingAgent", "IntentRecognitionAgent", "InfoAgent_1"]
    assert "查查杭州的" in seen_history[0]
    last = llm.agent_requests[-1].body["messages"][-1]["content"]
    assert last == "查查杭州的\n\n[Understood as: 杭州的差旅政策是什么]"


def test_a_continuation_held_by_a_crash_in_the_intent_stage_reruns_only_that_stage(make_server, llm):
    """The active agent is the intent stage only when a process died while it decided: on a continuation the
    restarted router re-runs intent and dispatches, without rewriting again (`server/user_routing.py`)."""
    server = make_server(env={"ROUTING_STAGES": "separate"})
    hold = threading.Event()
    llm.script(text("好的"), match=REWRITE)
    llm.script(text('{"agent": "InfoAgent"}', wait=hold), match=INTENT)
    ack = server.post("/api/tasks", {"message": "好的"}).json()
    wait_until(lambda: any(INTENT(r.body) for r in llm.requests), what="the intent request")
    server.kill()
    hold.set()
    before = len(llm.requests)
    llm.script(text('{"agent": "InfoAgent"}'), match=INTENT)
    llm.script(text("好的，继续处理。"), match=INFO)
    server.start()
    routed = server.routed(ack)
    assert routed["route"] == Route.FAST_PATH and routed["target_agent"] == "InfoAgent_1"
    assert server.wait_task(routed["task_id"])["status"] == TaskStatus.SUCCEEDED
    assert kinds(llm.requests[before:]) == ["IntentRecognitionAgent", "InfoAgent_1"]


def test_active_master_resumes_without_rewriting_or_intent(server, llm):
    llm.script(text("Hello, how can I help?"), match=MASTER)
    first = server.send("hello there")
    assert first["route"] == Route.PIPELINE and first["target_agent"] == "MasterAgent"
    server.wait_task(first["task_id"])
    before = len(llm.requests)
    llm.script(text("Continuing."), match=MASTER)
    again = server.send("好的，继续", first["conversation_id"])
    assert again["route"] == Route.FAST_PATH and again["target_agent"] == "MasterAgent"
    server.wait_task(again["task_id"])
    assert kinds(llm.requests[before:]) == ["MasterAgent"]


def test_malformed_intent_falls_back_to_the_master(server, llm):
    llm.script(text("I think InfoAgent, maybe"), match=INTENT)
    llm.script(text("Master here."), match=MASTER)
    sent = server.send("who answers this?")
    assert sent["target_agent"] == "MasterAgent"
    assert server.wait_task(sent["task_id"])["status"] == TaskStatus.SUCCEEDED


def test_a_reply_in_the_chat_box_answers_ask_user(server, llm):
    llm.script(text('{"query": "帮我订一张去上海的票", "agent": "BookingAgent"}'), match=ROUTER)
    booking = match_system("You are BookingAgent_1 ")
    llm.script(tool_calls(("ask_user", {"question": "哪天出发？", "options": ["今天", "明天"]})), match=booking)
    llm.script(text("好的，明天出发的票已预订。"), match=booking)
    sent = server.send("帮我订一张去上海的票")
    cid = sent["conversation_id"]
    assert sent["target_agent"] == "BookingAgent_1"
    ask = server.wait_event(sent["task_id"], AskUserEvent.TYPE)
    assert ask["question"] == "哪天出发？" and ask["options"] == ["今天", "明天"]
    agents = {a["display_name"]: a for a in server.get(f"/api/conversations/{cid}/agents").json()["data"]}
    assert agents["BookingAgent_1"]["state"] == AgentState.WAITING

    stale = server.post("/api/tasks", {"message": "明天", "conversation_id": cid, "question_id": "q_000000000000"})
    assert stale.status_code == 409 and stale.json()["code"] == "stale_question"

    answer = server.send("明天", cid, question_id=ask["question_id"])
    assert (answer["route"], answer["delivery"]) == (Route.HIL, Delivery.RESOLVED)
    assert answer["task_id"] == sent["task_id"]
    task = server.wait_task(sent["task_id"])
    result = json.loads(next(e for e in task["events"] if e["type"] == ToolResultEvent.TYPE)["data"]["result"])
    assert result == {"success": True, "question_id": ask["question_id"], "answer": "明天"}
    assert [e["data"]["route"] for e in task["events"] if e["type"] == RouteEvent.TYPE] == [Route.PIPELINE, Route.HIL]
    assert len([r for r in llm.agent_requests if booking(r.body)]) == 2

    late = server.post("/api/tasks", {"message": "后天", "conversation_id": cid, "question_id": ask["question_id"]})
    assert late.status_code == 409 and late.json()["code"] == "stale_question"


def test_ask_user_answered_over_the_socket_and_stop_closes_an_open_ask(server, llm):
    llm.script(tool_calls(("ask_user", {"question": "Which file?"})), match=MASTER)
    llm.script(text("Thanks."), match=MASTER)
    asked = threading.Event()
    client = socketio.Client(reconnection=False)
    questions = []
    client.on(AskUserEvent.TYPE, lambda data: (questions.append(data), asked.set()))
    client.connect(server.url, wait_timeout=10)
    try:
        ack = client.call("send_message", {"message": "edit a file"}, timeout=15)
        assert asked.wait(15)
        reply = client.call("send_message", {"conversation_id": ack["conversation_id"], "message": "README.md"},
                            timeout=15)
        assert reply["status"] == SendStatus.ROUTING and reply["message_id"]
        reply = server.routed(reply)
        assert reply["route"] == Route.HIL and reply["delivery"] == Delivery.RESOLVED
    finally:
        client.disconnect()
    task = server.wait_task(server.routed(ack)["task_id"])
    result = json.loads(next(e for e in task["events"] if e["type"] == ToolResultEvent.TYPE)["data"]["result"])
    assert result["answer"] == "README.md" and result["question_id"] == questions[0]["question_id"]

    # a stop while the question is open closes the call with a result
    llm.script(tool_calls(("ask_user", {"question": "Still there?"})), match=MASTER)
    again = server.send("ask me again", ack["conversation_id"])
    server.wait_event(again["task_id"], AskUserEvent.TYPE)
    assert server.post(f"/api/tasks/{again['task_id']}/cancel").status_code == 200
    stopped = server.wait_task(again["task_id"])
    assert stopped["status"] == TaskStatus.STOPPED
    result = json.loads(next(e for e in stopped["events"] if e["type"] == ToolResultEvent.TYPE)["data"]["result"])
    assert result["success"] is False and "stopped" in result["error"]


def test_failing_session_store_degrades_to_the_pipeline(server, llm):
    llm.script(text("Hi."), match=MASTER)
    first = server.send("hello")
    server.wait_task(first["task_id"])
    with sqlite3.connect(server.data_dir / "app.db") as db:
        db.execute("DROP TABLE session_store")
    llm.script(text("Still here."), match=MASTER)
    before = len(llm.requests)
    sent = server.send("ok", first["conversation_id"])
    assert sent["route"] == Route.PIPELINE
    assert server.wait_task(sent["task_id"])["status"] == TaskStatus.SUCCEEDED
    assert kinds(llm.requests[before:]) == ["RoutingAgent", "MasterAgent"]
    assert "session store unreadable" in server.log_text()


def test_suggestions_follow_the_reply_and_a_chip_takes_the_fast_path(server, llm):
    llm.script(text("Here is the plan: A, then B."), match=MASTER)
    llm.script(text('```json\n{"questions": ["确认", "换个方案", "What about C?"]}\n```'), match=SUGGEST)
    sent = server.send("make a plan")
    task = server.wait_task(sent["task_id"])
    reply_id = next(e["data"]["message_id"] for e in task["events"] if e["type"] == TextEndEvent.TYPE)

    def suggestions():
        events = server.get(f"/api/tasks/{sent['task_id']}").json()["events"]
        return next((e for e in events if e["type"] == SuggestionsEvent.TYPE), None)

    event = wait_until(suggestions, what="suggestions")
    assert event["data"]["questions"] == ["确认", "换个方案", "What about C?"]
    assert event["data"]["message_id"] == reply_id
    assert event["idx"] > max(e["idx"] for e in task["events"] if e["type"] == TextEndEvent.TYPE)
    suggest_request = next(r for r in llm.requests if SUGGEST(r.body)).body
    assert "确认" in suggest_request["messages"][0]["content"]  # quick actions come from the continuation list

    before = len(llm.requests)
    llm.script(text("Confirmed."), match=MASTER)
    clicked = server.send(event["data"]["questions"][0], sent["conversation_id"])
    assert clicked["route"] == Route.FAST_PATH
    server.wait_task(clicked["task_id"])
    assert kinds(llm.requests[before:])[0] == "MasterAgent"


def test_new_user_message_cancels_pending_suggestions(server, llm):
    hold = threading.Event()
    llm.script(text("First reply."), match=MASTER)
    llm.script(text('{"questions": ["确认"]}', wait=hold), match=SUGGEST)
    sent = server.send("first")
    server.wait_task(sent["task_id"])
    llm.wait_for_requests(1, include_stages=True)
    wait_until(lambda: any(SUGGEST(r.body) for r in llm.requests), what="suggestion call")
    llm.script(text("Second reply."), match=MASTER)
    second = server.send("something new", sent["conversation_id"])
    hold.set()
    server.wait_task(second["task_id"])
    wait_until(lambda: len([r for r in llm.requests if SUGGEST(r.body)]) == 2, what="second suggestion call")
    events = server.get(f"/api/tasks/{sent['task_id']}").json()["events"]
    assert not any(e["type"] == SuggestionsEvent.TYPE for e in events)


def test_a_bad_profile_file_stops_start_up_naming_file_and_field(tmp_path):
    bad = tmp_path / "profiles.toml"
    bad.write_text('[[agent]]\nname = "MasterAgent"\nkind = "master"\ndescription = "x"\n'
                   'system_prompt = "y"\ntools = ["run_command", "fly_to_the_moon"]\n')
    res = run_refused_start([], {"PATH": "/usr/bin:/bin", "DATA_DIR": str(tmp_path), "AGENT_PROFILES": str(bad)})
    assert res.returncode == 2
    assert str(bad) in res.stderr and "`tools`" in res.stderr and "fly_to_the_moon" in res.stderr
