"""Sends at their edges (docs/API.md, POST /api/tasks): a repeat while the first is in progress, a send that
fails frees its client_message_id, a receiver terminated while its message was routed (the master takes it,
nothing is lost or doubled)."""

from __future__ import annotations

import sqlite3
import threading
import time

from modules.statuses import Delivery, TaskStatus
from test.conftest import wait_until
from test.scripted_llm import match_system, text

ROUTER = match_system("You are RoutingAgent")
MASTER = match_system("You are MasterAgent")
INFO = match_system("You are InfoAgent_1 ")


def _user_texts(server, cid, agent=None) -> list[str]:
    path = f"/api/conversations/{cid}/messages" + (f"?agent={agent}" if agent else "")
    return [m["content"] for m in server.get(path).json()["data"] if m["role"] == "user"]


def _queued_rows(server) -> int:
    with sqlite3.connect(server.database_url.removeprefix("sqlite:///")) as conn:
        return conn.execute("SELECT count(*) FROM pending_messages").fetchone()[0]


def test_a_repeat_while_the_first_send_is_in_progress_is_refused_and_stores_nothing(server, llm):
    cid = server.post("/api/conversations", {}).json()["conversation_id"]
    with sqlite3.connect(server.database_url.removeprefix("sqlite:///")) as conn:
        [user_id] = conn.execute("SELECT user_id FROM conversations WHERE id = ?", (cid,)).fetchone()
        # As a first try of this send leaves it while it runs in another request: reserved, not answered.
        conn.execute("INSERT INTO client_requests (user_id, client_message_id, response, created_at) "
                     "VALUES (?, 'dup-1', '{\"in_progress\": true}', ?)", (user_id, time.time()))
    repeat = server.post("/api/tasks", {"message": "hello", "conversation_id": cid,
                                        "client_message_id": "dup-1"})
    assert repeat.status_code == 409 and repeat.json()["code"] == "duplicate_in_progress", repeat.text
    assert _queued_rows(server) == 0 and _user_texts(server, cid) == []
    assert not llm.requests


def test_a_send_that_fails_frees_its_client_message_id_for_the_retry(server, llm):
    failed = server.post("/api/tasks", {"message": "hello", "conversation_id": "no-such-conversation",
                                        "client_message_id": "retry-1"})
    assert failed.status_code == 404 and failed.json()["code"] == "not_found", failed.text
    assert _queued_rows(server) == 0

    llm.script(text("Hi."), match=MASTER)
    retry = server.post("/api/tasks", {"message": "hello", "client_message_id": "retry-1"})
    assert retry.status_code == 202, retry.text  # not 409 duplicate_in_progress: the failure released it
    routed = server.routed(retry.json())
    assert server.wait_task(routed["task_id"])["status"] == TaskStatus.SUCCEEDED
    again = server.post("/api/tasks", {"message": "hello", "client_message_id": "retry-1"})
    assert again.json()["message_id"] == routed["message_id"]
    assert _user_texts(server, routed["conversation_id"]) == ["hello"]


def test_a_receiver_terminated_while_its_message_is_routed_hands_it_to_the_master(server, llm):
    llm.script(text('{"query": "look something up", "agent": "InfoAgent"}'), match=ROUTER)
    llm.script(text("Info here."), match=INFO)
    first = server.send("look something up")
    cid = first["conversation_id"]
    assert first["target_agent"] == "InfoAgent_1"
    server.wait_task(first["task_id"])

    # The routing lists the agents before its model request; InfoAgent_1 ends while that request runs.
    hold = threading.Event()
    llm.script(text('{"query": "look up more", "agent": "InfoAgent"}', wait=hold), match=ROUTER)
    llm.script(text("The master took it."), match=MASTER)
    ack = server.post("/api/tasks", {"message": "look up more", "conversation_id": cid}).json()
    wait_until(lambda: sum(ROUTER(r.body) for r in llm.requests) == 2, what="the second routing request")
    assert server.post(f"/api/sub_agents/{first['agent_id']}/terminate").status_code == 200
    hold.set()
    second = server.routed(ack)
    assert (second["target_agent"], second["delivery"]) == ("MasterAgent", Delivery.TRIGGERED_NEW_TURN), second
    assert server.wait_task(second["task_id"])["status"] == TaskStatus.SUCCEEDED
    assert _user_texts(server, cid, "InfoAgent_1") == ["look something up"]
    assert _user_texts(server, cid) == ["look up more"]
    assert all(a["pending_count"] == 0 for a in server.get(f"/api/conversations/{cid}/agents").json()["data"])
