"""SQLite whose file another connection holds locked while a turn runs: the server neither freezes (SQLite's
busy wait is a C call that would stall every green thread) nor loses the turn."""

from __future__ import annotations

import sqlite3
import threading

from modules.statuses import TaskStatus
from test.conftest import wait_until
from test.faults.helpers import MASTER, Ledger, assert_answers_next, assert_reports_outage, assert_settled
from test.scripted_llm import text


def test_a_locked_database_file(make_server, llm, tmp_path):
    server = make_server(env={"DB_TIMEOUT_S": "2"})
    gate = threading.Event()
    llm.script(text("an answer written while the file is locked", wait=gate), match=MASTER)
    cid = server.post("/api/conversations", {"title": "locked"}).json()["conversation_id"]
    ledger = Ledger()
    first = ledger.send(server, "hello", cid).json()
    llm.wait_for_requests(1)
    locker = sqlite3.connect(server.data_dir / "app.db", isolation_level=None, timeout=10)
    try:
        locker.execute("BEGIN EXCLUSIVE")
        assert ledger.send(server, "sent while the file is locked", cid).status_code == 503
        assert_reports_outage(server)
        gate.set()
        log = server.data_dir / "server.log"
        wait_until(lambda: f"task {first['task_id']} lost its database" in log.read_text(errors="replace"), 10,
                   what="the turn hitting the lock")
    finally:
        locker.rollback()
        locker.close()
    snap = assert_settled(server, cid, ledger)
    task = next(t for t in snap["tasks"] if t["task_id"] == first["task_id"])
    assert task["status"] == TaskStatus.FAILED and task["error"]["code"] == "database_unavailable", task
    assert_answers_next(server, llm, cid, ledger)
