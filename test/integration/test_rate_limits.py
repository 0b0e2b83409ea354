"""Per-user rate limits (README, "Configuration": RATE_LIMIT_*): past them a send or a new conversation
answers 429 `rate_limited` with `Retry-After`, a socket event an error acknowledgement; the other user is
not limited; with REDIS_URL, two processes share one count."""

from __future__ import annotations

import threading
import time

import pytest
import redis
import socketio

from modules.statuses import MessageSource
from test.conftest import TWO_USERS, wait_until
from test.db_urls import fresh_database

LIMITS = {"AUTH_TOKENS": TWO_USERS, "RATE_LIMIT_SENDS_PER_MIN": "3", "RATE_LIMIT_CONVERSATIONS_PER_MIN": "2",
          "RATE_LIMIT_SOCKET_EVENTS_PER_MIN": "4"}


@pytest.fixture(autouse=True)
def whole_window():
    """The limits count per clock minute: start with at least 20 s of the current one left."""
    wait_until(lambda: time.time() % 60 < 40, 25, what="a fresh part of the minute")


def _send(server, token: str, cid: str) -> object:
    return server.post("/api/tasks", {"message": "hi", "conversation_id": cid}, token=token)


def test_sends_conversations_and_socket_events_past_the_limits_answer_rate_limited(make_server, llm):
    server = make_server(env=LIMITS)
    alice = server.post("/api/conversations", {"title": "a"}, token="tok-alice").json()["conversation_id"]
    bob = server.post("/api/conversations", {"title": "b"}, token="tok-bob").json()["conversation_id"]
    assert server.post("/api/conversations", {"title": "a2"}, token="tok-alice").status_code == 201
    res = server.post("/api/conversations", {"title": "a3"}, token="tok-alice")
    assert (res.status_code, res.json()["code"]) == (429, "rate_limited"), res.text
    assert 1 <= int(res.headers["Retry-After"]) <= 60 and res.json()["retry_after_s"] == int(res.headers["Retry-After"])
    assert "RATE_LIMIT_CONVERSATIONS_PER_MIN" in res.json()["error"]

    assert [_send(server, "tok-alice", alice).status_code for _ in range(3)] == [202] * 3
    res = _send(server, "tok-alice", alice)
    assert (res.status_code, res.json()["code"]) == (429, "rate_limited")
    assert int(res.headers["Retry-After"]) >= 1
    assert _send(server, "tok-bob", bob).status_code == 202  # bob's count is his own

    def user_messages() -> int:
        history = server.get(f"/api/conversations/{alice}/messages", token="tok-alice").json()["data"]
        queued = server.get(f"/api/conversations/{alice}/queued", token="tok-alice").json()["data"]
        sent = [m for m in history if m["role"] == "user" and m["metadata"].get("source") == MessageSource.USER]
        return len(sent) + len(queued)

    wait_until(lambda: user_messages() == 3, 20, what="the three accepted sends stored")

    client = socketio.Client(reconnection=False)
    client.connect(server.url, auth={"token": "tok-alice"}, wait_timeout=5)
    try:
        acks = [client.call("join_conversation", {"conversation_id": alice}, timeout=5) for _ in range(5)]
    finally:
        client.disconnect()
    assert [a["success"] for a in acks] == [True] * 4 + [False]
    assert (acks[4]["code"], acks[4]["status"]) == ("rate_limited", 429) and acks[4]["retry_after_s"] >= 1


def test_edits_and_regenerates_count_as_sends(make_server, llm):
    server = make_server(env=LIMITS)
    sent = server.post("/api/tasks", {"message": "hi"}, token="tok-alice").json()
    cid = sent["conversation_id"]
    server.wait_task(wait_until(lambda: server.get(f"/api/messages/{sent['message_id']}", token="tok-alice")
                                .json()["task_id"], 20, what="the send's task"), token="tok-alice")
    again = server.post(f"/api/conversations/{cid}/regenerate", token="tok-alice")
    assert again.status_code == 202, again.text
    server.wait_task(again.json()["task_id"], token="tok-alice")
    edit = server.post(f"/api/conversations/{cid}/messages/{sent['message_id']}/edit", {"message": "hello"},
                       token="tok-alice")
    assert edit.status_code == 202, edit.text
    server.wait_task(edit.json()["task_id"], token="tok-alice")

    for res in (server.post(f"/api/conversations/{cid}/regenerate", token="tok-alice"),
                server.post(f"/api/conversations/{cid}/messages/{sent['message_id']}/edit", {"message": "hey"},
                            token="tok-alice")):
        assert (res.status_code, res.json()["code"]) == (429, "rate_limited"), res.text
        assert "RATE_LIMIT_SENDS_PER_MIN" in res.json()["error"]


def test_two_processes_share_one_count_through_redis(make_server, llm, tmp_path, redis_url):
    redis.Redis.from_url(redis_url).flushdb()  # no count of an earlier test in this minute
    with fresh_database("postgresql", tmp_path) as url:
        a = make_server(database_url=url, env={**LIMITS, "REDIS_URL": redis_url})
        b = make_server(database_url=url, env={**LIMITS, "REDIS_URL": redis_url})
        cid = a.post("/api/conversations", {"title": "a"}, token="tok-alice").json()["conversation_id"]
        codes = [_send(server, "tok-alice", cid).status_code for server in (a, b, a, b)]
        assert codes == [202, 202, 202, 429]
        assert _send(b, "tok-bob", b.post("/api/conversations", {}, token="tok-bob").json()["conversation_id"]
                     ).status_code == 202
        a.stop()
        b.stop()


def test_sends_at_once_through_two_processes_pass_the_limit_together_never(make_server, llm, tmp_path, redis_url):
    """Twelve sends at the same instant through each of two processes: one count in Redis (INCR), so exactly
    the limit of them is accepted."""
    redis.Redis.from_url(redis_url).flushdb()
    env = {**LIMITS, "REDIS_URL": redis_url, "RATE_LIMIT_SENDS_PER_MIN": "5"}
    with fresh_database("postgresql", tmp_path) as url:
        servers = [make_server(database_url=url, env=env) for _ in range(2)]
        cid = servers[0].post("/api/conversations", {"title": "a"}, token="tok-alice").json()["conversation_id"]
        go = threading.Barrier(24)
        codes: list[int] = []

        def send(server) -> None:
            go.wait(10)
            codes.append(_send(server, "tok-alice", cid).status_code)

        threads = [threading.Thread(target=send, args=(servers[i % 2],)) for i in range(24)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
        assert sorted(codes) == [202] * 5 + [429] * 19, codes
        for server in servers:
            server.stop()
