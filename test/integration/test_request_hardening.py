"""Hostile requests get clear 4xx answers: foreign Host headers, deeply nested JSON, ids holding a NUL,
socket events with extra arguments (issue 9, deliverable 5)."""

from __future__ import annotations

import json

import pytest
import requests
import socketio
import websocket

from test.db_urls import fresh_database
from test.scripted_llm import text

DEEP = "[" * 100_000 + "]" * 100_000


def get_with_host(server, path: str, host: str, **headers: str) -> requests.Response:
    return requests.get(server.url + path, headers={"Host": host, **headers}, timeout=10)


def assert_error(res: requests.Response, status: int, code: str) -> None:
    assert res.status_code == status, (res.request.method, res.request.url, res.text)
    body = res.json()
    assert body == {"success": False, "error": body["error"], "code": code} and body["error"], body


def raw_socket(server, connect_data: str = "", **options) -> websocket.WebSocket:
    """A Socket.IO connection spoken by hand, to send packets no client library would encode."""
    ws = websocket.create_connection(f"ws://127.0.0.1:{server.port}/socket.io/?EIO=4&transport=websocket",
                                     timeout=10, **options)
    assert ws.recv().startswith("0")  # engine.io open
    ws.send("40" + connect_data)
    assert ws.recv().startswith("40")  # socket.io connect
    return ws


def raw_call(ws: websocket.WebSocket, ack_id: int, packet_body: str) -> dict:
    """Send an event packet with an ack id and return the acknowledgement's argument (timeout: 10 s)."""
    ws.send(f"42{ack_id}{packet_body}")
    while True:
        frame = ws.recv()
        if frame == "2":  # engine.io ping
            ws.send("3")
        elif frame.startswith(f"43{ack_id}"):
            return json.loads(frame[len(f"43{ack_id}"):])[0]


def test_a_foreign_host_header_is_refused_without_tokens(make_server, llm):
    server = make_server()
    for host in ("evil.example", f"evil.example:{server.port}", "127.0.0.1.evil.example", "localhost.evil",
                 "localhost:abc", ""):
        assert_error(get_with_host(server, "/api/conversations", host), 403, "forbidden_host")
        assert_error(get_with_host(server, "/", host), 403, "forbidden_host")
        assert get_with_host(server, "/socket.io/?EIO=4&transport=polling", host).status_code == 403
    with pytest.raises(websocket.WebSocketBadStatusException) as refused:
        raw_socket(server, host="evil.example", suppress_origin=True)
    assert refused.value.status_code == 403

    for host in ("localhost", f"localhost:{server.port}", "127.0.0.1", f"127.0.0.1:{server.port}", "[::1]",
                 f"[::1]:{server.port}", "LocalHost:5173"):
        assert get_with_host(server, "/api/conversations", host).status_code == 200, host
    handshake = get_with_host(server, "/socket.io/?EIO=4&transport=polling", f"localhost:{server.port}")
    assert handshake.status_code == 200 and handshake.text.startswith("0")
    raw_socket(server, host=f"localhost:{server.port}", suppress_origin=True).close()


def test_allowed_hosts_admits_a_proxy_name(make_server, llm):
    server = make_server(env={"ALLOWED_HOSTS": "chat.example.org, other.example"})
    assert get_with_host(server, "/api/conversations", "chat.example.org").status_code == 200
    assert get_with_host(server, "/api/conversations", "Chat.Example.org:443").status_code == 200
    assert get_with_host(server, "/api/conversations", "localhost").status_code == 200
    assert_error(get_with_host(server, "/api/conversations", "evil.example"), 403, "forbidden_host")


def test_with_tokens_the_host_is_not_checked(make_server, llm):
    server = make_server(env={"AUTH_TOKENS": "alice:tok-alice"})
    assert get_with_host(server, "/api/conversations", "chat.example.org",
                         Authorization="Bearer tok-alice").status_code == 200
    assert_error(get_with_host(server, "/api/conversations", "chat.example.org"), 401, "unauthorized")


def test_deeply_nested_json_is_invalid_json(server, llm):
    llm.set_default(text("ok"))
    for path, body in (("/api/tasks", DEEP), ("/api/conversations", DEEP),
                       ("/api/tasks", '{"message": "hi", "extra": ' + DEEP + "}")):
        res = requests.post(server.url + path, data=body, headers={"Content-Type": "application/json"}, timeout=10)
        assert_error(res, 400, "invalid_json")

    ws = raw_socket(server, connect_data='{"token":' + DEEP + "}")  # no tokens: connects without auth data
    try:
        for ack_id, event in enumerate(("send_message", "join_conversation", "stop_task"), start=1):
            ack = raw_call(ws, ack_id, f'["{event}",{DEEP}]')
            assert ack["success"] is False and ack["code"] == "invalid_json" and ack["status"] == 400
        ack = raw_call(ws, 9, '["send_message",{"message":"still served"}]')
        assert ack["success"] is True
    finally:
        ws.close()
    server.wait_task(server.routed(ack)["task_id"])


def test_a_socket_event_with_extra_arguments_is_acknowledged(server, llm):
    client = socketio.Client(reconnection=False)
    client.connect(server.url, wait_timeout=5)
    try:
        for event, payload in (("send_message", {"message": "hi"}), ("join_conversation", {"conversation_id": "x"}),
                               ("stop_task", {"task_id": "x"})):
            ack = client.call(event, (payload, "extra"), timeout=10)
            assert ack["success"] is False and ack["code"] == "invalid_json" and ack["status"] == 400, ack
            ack = client.call(event, (payload, {"more": 1}, 3), timeout=10)
            assert ack["code"] == "invalid_json", ack
    finally:
        client.disconnect()


@pytest.mark.parametrize("kind", ["sqlite", "postgresql", "mariadb"])
def test_ids_holding_a_nul_answer_as_unknown_ids_on(kind, make_server, llm, tmp_path):
    llm.set_default(text("ok"))
    with fresh_database(kind, tmp_path) as url:
        server = make_server(database_url=url)
        sent = server.send("a real conversation")
        cid = sent["conversation_id"]
        server.wait_task(sent["task_id"])
        for method, path in (
            ("GET", "/api/tasks/abc%00def"), ("POST", "/api/tasks/abc%00def/cancel"),
            ("GET", "/api/conversations/a%00b"), ("GET", "/api/conversations/a%00b/messages"),
            ("GET", "/api/conversations/a%00b/agents"), ("GET", "/api/conversations/a%00b/running-status"),
            ("GET", f"/api/conversations/{cid}/messages?agent=Master%00Agent"),
            ("GET", "/api/tasks?conversation_id=a%00b"), ("GET", "/api/sub_agents?conversation_id=a%00b"),
            ("GET", "/api/background_commands?conversation_id=a%00b"),
            ("POST", "/api/sub_agents/a%00b/terminate"), ("POST", "/api/background_commands/a%00b/cancel"),
        ):
            assert_error(server.request(method, path), 404, "not_found")
        for name in ("conversation_id", "question_id", "client_message_id"):
            assert_error(server.post("/api/tasks", {"message": "hi", name: "a\x00b"}), 400, f"invalid_{name}")
        assert server.get(f"/api/conversations/{cid}/messages?agent=MasterAgent").status_code == 200

        client = socketio.Client(reconnection=False)
        client.connect(server.url, wait_timeout=5)
        try:
            for event, payload in (("join_conversation", {"conversation_id": "a\x00b"}),
                                   ("join_conversation", {"conversation_id": "\ud800"}),
                                   ("stop_task", {"task_id": "a\x00b"}), ("stop_task", {"task_id": "\udfff"})):
                ack = client.call(event, payload, timeout=10)
                assert ack["success"] is False and ack["code"] == "not_found", (event, payload, ack)
            ack = client.call("send_message", {"message": "hi", "conversation_id": "a\x00b"}, timeout=10)
            assert ack["code"] == "invalid_conversation_id", ack
            assert client.call("join_conversation", {"conversation_id": cid}, timeout=10)["success"] is True
        finally:
            client.disconnect()
        assert "Traceback" not in server.log_text()
        server.stop()


def test_a_socket_token_that_is_not_a_string_of_unicode_is_refused_at_once(auth_server, llm):
    """A connect whose `auth.token` is a number, a list, an object or a lone surrogate is refused like a wrong
    token (a `connect_error` with a message), never left unanswered with a traceback in the log."""
    for token in ("5", '["tok-alice"]', '{"a": 1}', '"\\ud800"'):
        ws = websocket.create_connection(f"ws://127.0.0.1:{auth_server.port}/socket.io/?EIO=4&transport=websocket",
                                         timeout=10)
        try:
            assert ws.recv().startswith("0")  # engine.io open
            ws.send(f'40{{"token": {token}}}')
            answer = ws.recv()
        finally:
            ws.close()
        assert answer.startswith("44") and json.loads(answer[2:])["message"], (token, answer)  # connect_error
    assert "Traceback" not in auth_server.log_text()
    ws = raw_socket(auth_server, '{"token": "tok-alice"}')  # the right token still connects
    ws.close()
