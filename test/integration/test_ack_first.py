"""Acknowledge first: a send is answered once stored, before its routing request; routing keeps send order."""

from __future__ import annotations

import threading
import time

import socketio

from modules.event_catalogue import RouteEvent
from modules.statuses import Route, SendStatus, TaskStatus
from test.conftest import wait_until
from test.integration.helpers import history
from test.scripted_llm import match_system, text

ROUTER = match_system("You are RoutingAgent")
MASTER = match_system("You are MasterAgent")


def test_the_ack_comes_before_the_routing_request_is_answered(server, llm):
    hold = threading.Event()
    llm.script(text('{"query": "plan a trip", "agent": "MasterAgent"}', wait=hold), match=ROUTER)
    llm.script(text("Where to?"), match=MASTER)
    started = time.monotonic()
    res = server.post("/api/tasks", {"message": "plan a trip"})
    took = time.monotonic() - started
    assert res.status_code == 202
    ack = res.json()
    assert ack["status"] == SendStatus.ROUTING and ack["message_id"] and ack["conversation_id"]
    assert ack["route"] is None and ack["task_id"] is None
    assert not hold.is_set() and took < 5  # answered while the routing request is still open
    wait_until(lambda: any(ROUTER(r.body) for r in llm.requests), what="the routing request")
    pending = server.get(f"/api/messages/{ack['message_id']}").json()
    assert pending["status"] == SendStatus.ROUTING and pending["route"] is None
    hold.set()
    routed = server.routed(ack)
    assert routed["route"] == Route.PIPELINE and routed["target_agent"] == "MasterAgent"
    assert server.wait_task(routed["task_id"])["status"] == TaskStatus.SUCCEEDED


def test_the_route_follows_as_a_room_event(server, llm):
    llm.script(text("Hello."), match=MASTER)
    routes = []
    client = socketio.Client(reconnection=False)
    client.on(RouteEvent.TYPE, routes.append)
    client.connect(server.url, wait_timeout=10)
    try:
        ack = client.call("send_message", {"message": "hello"}, timeout=10)
        assert ack["status"] == SendStatus.ROUTING
        first = wait_until(lambda: next((r for r in routes if r["message_id"] == ack["message_id"]
                                         and "idx" not in r), None), what="the room's route event")
    finally:
        client.disconnect()
    assert first["route"] == Route.PIPELINE and first["target_agent"] == "MasterAgent" and "task_id" not in first


def test_a_fast_path_message_waits_for_an_earlier_one_still_routing(server, llm):
    llm.script(text("Noted, shall I go on?"), match=MASTER)
    first = server.send("start")
    cid = first["conversation_id"]
    server.wait_task(first["task_id"])
    hold = threading.Event()
    llm.script(text('{"query": "a new topic", "agent": "MasterAgent"}', wait=hold), match=ROUTER)
    llm.set_default(text("ok"))
    slow = server.post("/api/tasks", {"message": "something entirely different", "conversation_id": cid}).json()
    wait_until(lambda: len([r for r in llm.requests if ROUTER(r.body)]) == 2, what="the second routing request")
    quick = server.post("/api/tasks", {"message": "ok", "conversation_id": cid}).json()
    assert quick["status"] == SendStatus.ROUTING
    held_quick = server.get(f"/api/messages/{quick['message_id']}").json()
    assert held_quick["status"] == SendStatus.ROUTING  # behind the slow one
    hold.set()
    assert server.routed(quick)["route"] == Route.FAST_PATH
    server.routed(slow)
    wait_until(lambda: not server.get(f"/api/conversations/{cid}/running-status").json()["is_main_running"],
               what="all turns done")
    users = [m["content"].split("\n")[0] for m in history(server, cid) if m["role"] == "user"]
    assert users == ["start", "something entirely different", "ok"]


def test_a_message_stored_but_not_routed_is_routed_after_a_restart(server, llm):
    hold = threading.Event()
    llm.script(text('{"query": "x", "agent": "MasterAgent"}', wait=hold), match=ROUTER)
    ack = server.post("/api/tasks", {"message": "route me after the crash"}).json()
    wait_until(lambda: any(ROUTER(r.body) for r in llm.requests), what="the routing request")
    server.kill()
    hold.set()
    llm.script(text("Routed after all."), match=MASTER)
    server.start()
    routed = server.routed(ack)
    assert routed["route"] == Route.PIPELINE and routed["target_agent"] == "MasterAgent"
    assert server.wait_task(routed["task_id"])["status"] == TaskStatus.SUCCEEDED
    users = [m["content"].split("\n")[0] for m in history(server, ack["conversation_id"]) if m["role"] == "user"]
    assert users == ["route me after the crash"]


def test_a_retried_send_while_routing_returns_the_same_message(server, llm):
    hold = threading.Event()
    llm.script(text('{"query": "x", "agent": "MasterAgent"}', wait=hold), match=ROUTER)
    body = {"message": "once only", "client_message_id": "c-1"}
    first = server.post("/api/tasks", body).json()
    again = server.post("/api/tasks", body).json()
    assert again["message_id"] == first["message_id"]
    hold.set()
    routed = server.routed(first)
    server.wait_task(routed["task_id"])
    users = [m["content"].split("\n")[0] for m in history(server, first["conversation_id"]) if m["role"] == "user"]
    assert users == ["once only"]


def test_a_message_is_only_visible_to_its_sender(auth_server, llm):
    server = auth_server
    sent = server.send("hello")
    assert server.get(f"/api/messages/{sent['message_id']}").json()["status"] == SendStatus.ROUTED
    assert server.get(f"/api/messages/{sent['message_id']}", token="tok-bob").status_code == 404
    assert server.get("/api/messages/no-such-message").status_code == 404
