"""PostgreSQL behind a fault proxy, failing at several moments of a turn.

After each fault: every task final and every agent out of `running` within 30 s of the database's return,
no accepted message lost or duplicated, no refused one stored, no tool call without a result, and the next
message answered. While it is away: /healthz answers 503 within a second and API calls 503 with a code.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
import socketio

from modules.event_catalogue import ServerDegradedEvent, ServerRecoveredEvent, ToolStartEvent
from modules.statuses import CommandStatus, TaskStatus
from test.conftest import TWO_USERS, wait_until
from test.db_urls import fresh_database
from test.faults.helpers import Ledger, assert_answers_next, assert_reports_outage, assert_settled
from test.faults.proxy import BLACKHOLE, FaultProxy
from test.integration.helpers import MASTER, history, notices
from test.scripted_llm import text, tool_calls

ENV = {"DB_TIMEOUT_S": "2"}
# A foreground command that runs until the test lets it end (its workspace is its working directory).
GATED = "while [ ! -e release ]; do sleep 0.05; done; echo released"


@pytest.fixture
def pg(tmp_path) -> Iterator[tuple[str, FaultProxy]]:
    """A fresh PostgreSQL database, reached through a fault proxy."""
    with fresh_database("postgresql", tmp_path) as url, FaultProxy("127.0.0.1", 5432) as proxy:
        yield url.replace("@127.0.0.1:5432/", f"@127.0.0.1:{proxy.port}/"), proxy


@pytest.fixture
def pg_server(pg, make_server):
    url, proxy = pg
    return make_server(database_url=url, env=ENV), proxy


def _turn_failed(server, task_id: str) -> bool:
    """The server logged that the turn hit the missing database (this code: "lost its database")."""
    log = (server.data_dir / "server.log").read_text(errors="replace")
    return f"task {task_id} lost its database" in log or f"task {task_id} crashed" in log


def _release(server, cid: str) -> None:
    (server.workspace(cid) / "release").touch()


def _conversation(server) -> str:
    return server.post("/api/conversations", {"title": "faults"}).json()["conversation_id"]


def test_cut_during_a_model_call(pg_server, llm):
    """The database drops while the model streams: the turn fails cleanly, sockets hear the outage both ways."""
    server, proxy = pg_server
    gate = threading.Event()
    llm.script(text("an answer that cannot be stored", wait=gate), match=MASTER)
    cid, ledger = _conversation(server), Ledger()
    heard = {ServerDegradedEvent.TYPE: threading.Event(), ServerRecoveredEvent.TYPE: threading.Event()}
    client = socketio.Client(reconnection=False)
    for name, event in heard.items():
        client.on(name, lambda data, event=event: event.set())
    client.connect(server.url, wait_timeout=10)
    try:
        first = ledger.send(server, "hello", cid).json()
        llm.wait_for_requests(1)
        with proxy.down():
            assert ledger.send(server, "sent while the database is down", cid).status_code == 503
            assert_reports_outage(server)
            assert heard[ServerDegradedEvent.TYPE].wait(10)
            gate.set()  # the model answers now; its reply has nowhere to go
            wait_until(lambda: _turn_failed(server, first["task_id"]), 10, what="the turn hitting the outage")
        assert heard[ServerRecoveredEvent.TYPE].wait(10)
    finally:
        client.disconnect()
    snap = assert_settled(server, cid, ledger)
    task = next(t for t in snap["tasks"] if t["task_id"] == first["task_id"])
    assert task["status"] == TaskStatus.FAILED and task["error"]["code"] == "database_unavailable", task
    assert_answers_next(server, llm, cid, ledger)


def test_cut_during_a_tool_call(pg_server, llm):
    """The issue's case: connections cut while a command runs, and still cut when it ends."""
    server, proxy = pg_server
    llm.script(tool_calls(("run_command", {"command": GATED})), match=MASTER)
    cid, ledger = _conversation(server), Ledger()
    first = ledger.send(server, "run until released", cid).json()
    server.wait_event(first["task_id"], ToolStartEvent.TYPE)
    with proxy.down():
        assert ledger.send(server, "a message during the command", cid).status_code == 503
        _release(server, cid)
        wait_until(lambda: _turn_failed(server, first["task_id"]), 20, what="the turn hitting the outage")
    snap = assert_settled(server, cid, ledger)
    assert next(t for t in snap["tasks"] if t["task_id"] == first["task_id"])["status"] == TaskStatus.FAILED
    assert_answers_next(server, llm, cid, ledger)


def test_blackhole_at_the_turns_end(pg_server, llm):
    """Connections accepted but never answered while the final reply is stored: every wait is bounded."""
    server, proxy = pg_server
    gate = threading.Event()
    llm.script(tool_calls(("run_command", {"command": "echo one"})), match=MASTER)
    llm.script(text("the final answer", wait=gate), match=MASTER)
    cid, ledger = _conversation(server), Ledger()
    first = ledger.send(server, "do one thing", cid).json()
    llm.wait_for_requests(2)
    with proxy.down(BLACKHOLE):
        assert_reports_outage(server)
        assert ledger.send(server, "sent into the black hole", cid, timeout=8).status_code == 503
        cancel = server.post(f"/api/tasks/{first['task_id']}/cancel")
        assert cancel.status_code == 503 and cancel.json()["code"] == "database_unavailable"
        gate.set()
        wait_until(lambda: _turn_failed(server, first["task_id"]), 10, what="the turn hitting the outage")
    snap = assert_settled(server, cid, ledger)
    assert next(t for t in snap["tasks"] if t["task_id"] == first["task_id"])["status"] == TaskStatus.FAILED
    assert_answers_next(server, llm, cid, ledger)


def test_cut_while_a_completion_notice_waits_for_the_running_turn(pg_server, llm):
    """A background command's notice queues while the turn still runs; the database drops before the turn
    can take it in. The notice starts the follow-up once the database is back: delivered once."""
    server, proxy = pg_server
    llm.script(tool_calls(("run_command", {"command": "echo bg-done", "run_in_background": True}),
                          ("run_command", {"command": GATED})), match=MASTER)
    llm.script(text("the background command is done"), match=MASTER)
    cid, ledger = _conversation(server), Ledger()
    first = ledger.send(server, "start both", cid).json()
    wait_until(lambda: [c["status"] for c in server.get(f"/api/background_commands?conversation_id={cid}")
                        .json()["data"]] == [CommandStatus.SUCCEEDED], what="the background command's end")
    with proxy.down():
        _release(server, cid)
        wait_until(lambda: _turn_failed(server, first["task_id"]), 20, what="the turn hitting the outage")
    snap = assert_settled(server, cid, ledger)
    assert next(t for t in snap["tasks"] if t["task_id"] == first["task_id"])["status"] == TaskStatus.FAILED
    wait_until(lambda: len(snap := server.get(f"/api/tasks?conversation_id={cid}").json()["data"]) == 2
               and snap[1]["status"] == TaskStatus.SUCCEEDED, 30, what="the notice's follow-up turn")
    assert len(notices(history(server, cid))) == 1
    assert_answers_next(server, llm, cid, ledger)


def test_a_user_who_connects_while_the_database_is_away_hears_so_and_is_served_once_it_is_back(pg, make_server,
                                                                                               llm):
    """README, "During an outage": a socket that connects meanwhile gets `server_degraded` at once, also one of a
    user this process has not served yet (whose id is read from the database): its connect went unanswered."""
    url, proxy = pg
    server = make_server(database_url=url, env={**ENV, "AUTH_TOKENS": TWO_USERS})
    llm.set_default(text("hello bob"))
    heard = {ServerDegradedEvent.TYPE: threading.Event(), ServerRecoveredEvent.TYPE: threading.Event()}
    client = socketio.Client(reconnection=False)
    for name, event in heard.items():
        client.on(name, lambda data, event=event: event.set())
    try:
        with proxy.down():
            assert_reports_outage(server)
            client.connect(server.url, auth={"token": "tok-bob"}, wait_timeout=10)
            assert heard[ServerDegradedEvent.TYPE].wait(10)
            ack = client.call("join_conversation", {"conversation_id": "any"}, timeout=10)
            assert (ack["status"], ack["code"]) == (503, "database_unavailable"), ack
        assert heard[ServerRecoveredEvent.TYPE].wait(10)
        ack = client.call("send_message", {"message": "hello after the outage"}, timeout=10)
        assert ack["success"] is True, ack
    finally:
        client.disconnect()
    cid = ack["conversation_id"]
    assert server.get(f"/api/conversations/{cid}", token="tok-bob").status_code == 200  # bob's own
    assert server.get(f"/api/conversations/{cid}", token="tok-alice").status_code == 404
