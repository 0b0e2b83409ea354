"""The heartbeat never waits behind ordinary work (issue 26): on PostgreSQL, hundreds of streams once drained
the pool, the heartbeat waited for a connection past the peers' timeout, and another process took the live
one's work over. It now beats on a connection of its own (`Database.write_control`), in a loop of its own."""

from __future__ import annotations

import threading
import time
from contextlib import ExitStack

import pytest
from sqlalchemy import text

from modules.storage import processes
from modules.storage.db import Database
from modules.storage.models import ServerProcess
from server.cluster import Membership
from test.db_urls import fresh_database


@pytest.fixture
def pg(tmp_path):
    with fresh_database("postgresql", tmp_path) as url:
        db = Database(url, timeout_s=2.0, pool_size=2, pool_overflow=1)
        db.migrate()
        yield db
        db.dispose()


def _drain_pool(db: Database, stack: ExitStack) -> None:
    """Every pooled connection checked out and held (a wave of streams mid-transaction)."""
    for _ in range(3):
        session = stack.enter_context(db.read(timeout_s=30))
        session.execute(text("SELECT 1"))


def test_a_heartbeat_beats_while_ordinary_work_holds_every_pooled_connection(pg):
    me = processes.register(pg)
    with pg.write() as s:
        row = s.get(ServerProcess, me)
        row.heartbeat_at -= 60
        row.pid = 1  # a peer on this host whose pid lives (this process's pid would be a previous life of it)
    with ExitStack() as stack:
        _drain_pool(pg, stack)
        started = time.monotonic()
        processes.heartbeat(pg, me)
        assert time.monotonic() - started < 1.0  # not the pool's timeout (2 s): it never waited for the pool
    assert me not in processes.gone_processes(pg, "someone-else", 10)


def test_the_membership_loop_beats_even_when_its_other_steps_wait_for_the_database(pg, monkeypatch):
    """A stop poll stuck on the database (here: forever) leaves the beat alone."""
    monkeypatch.setattr("server.cluster.HEARTBEAT_S", 0.05)
    membership = Membership(pg, poll_s=0.01)
    stuck = threading.Event()

    class Tasks:
        def apply_stop_requests(self) -> None:
            stuck.wait(30)

        def recover_interrupted(self, gone: dict[str, str]) -> int:
            return 0

    class Commands:
        def apply_cancel_requests(self) -> None: ...

    monkeypatch.setattr("server.cluster.TICK_S", 0.01)
    threading.Thread(target=membership.run, args=(Tasks(), Commands()), daemon=True).start()
    try:
        with pg.read() as s:
            first = s.get(ServerProcess, membership.process_id).heartbeat_at
        deadline = time.monotonic() + 10
        beat = first
        while beat == first and time.monotonic() < deadline:
            time.sleep(0.05)
            with pg.read() as s:
                beat = s.get(ServerProcess, membership.process_id).heartbeat_at
        assert beat > first
    finally:
        stuck.set()
