"""A turn whose thread dies before ending its task (a bug, not an outage): the watchdog ends it, a stop ends it
at once, and the messages that queued up behind it start their turn."""

from __future__ import annotations

from pathlib import Path

import pytest

from modules.event_catalogue import TaskEndEvent, TextEndEvent
from modules.statuses import AgentState, TaskStatus
from test.conftest import wait_until
from test.faults.helpers import MASTER, Ledger, assert_answers_next, assert_settled
from test.scripted_llm import text

LAUNCHER = [str(Path(__file__).with_name("crash_launcher.py"))]
CRASH = "injected: the turn's end crashed"


@pytest.fixture
def crashing_server(make_server):
    return make_server(launcher=LAUNCHER)


def _crashed(server, task_id: str) -> None:
    """Wait until the turn's thread has died (the injected crash is in the log) with the task still active."""
    server.wait_event(task_id, TextEndEvent.TYPE)
    wait_until(lambda: CRASH in (server.data_dir / "server.log").read_text(errors="replace"), 10,
               what="the injected crash")


def test_the_watchdog_ends_a_turn_whose_thread_died_and_queued_messages_get_their_turn(crashing_server, llm):
    server = crashing_server
    llm.script(text("an answer whose turn never ends"), match=MASTER)
    llm.script(text("the queued message is answered"), match=MASTER)
    cid = server.post("/api/conversations", {"title": "crash"}).json()["conversation_id"]
    ledger = Ledger()
    first = ledger.send(server, "hello", cid).json()
    _crashed(server, first["task_id"])
    queued = ledger.send(server, "a message behind the dead turn", cid).json()
    snap = assert_settled(server, cid, ledger)
    task = next(t for t in snap["tasks"] if t["task_id"] == first["task_id"])
    assert task["status"] == TaskStatus.FAILED and task["error"]["code"] == "turn_crashed", task
    follow_up = [t for t in snap["tasks"] if t["task_id"] != first["task_id"]]
    assert len(follow_up) == 1 and follow_up[0]["status"] == TaskStatus.SUCCEEDED, snap["tasks"]
    assert queued["task_id"] in (None, first["task_id"], follow_up[0]["task_id"])
    events = server.get(f"/api/tasks/{follow_up[0]['task_id']}").json()["events"]
    assert [e["data"]["content"] for e in events
            if e["type"] == TextEndEvent.TYPE] == ["the queued message is answered"]
    assert_answers_next(server, llm, cid, ledger)


def test_a_stop_ends_a_turn_whose_thread_died_at_once(crashing_server, llm):
    server = crashing_server
    llm.script(text("an answer whose turn never ends"), match=MASTER)
    cid = server.post("/api/conversations", {"title": "crash"}).json()["conversation_id"]
    ledger = Ledger()
    first = ledger.send(server, "hello", cid).json()
    _crashed(server, first["task_id"])
    cancel = server.post(f"/api/tasks/{first['task_id']}/cancel")
    assert cancel.status_code == 200, cancel.text
    task = server.get(f"/api/tasks/{first['task_id']}").json()
    assert task["status"] == TaskStatus.STOPPED, task  # at once: no watchdog round, no restart
    assert task["events"][-1]["type"] == TaskEndEvent.TYPE
    agents = server.get(f"/api/conversations/{cid}/agents").json()["data"]
    assert agents[0]["state"] == AgentState.IDLE
    assert_settled(server, cid, ledger)
    assert_answers_next(server, llm, cid, ledger)
