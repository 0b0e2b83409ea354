"""What keeps a process's work in hand across database trouble: heartbeats register again after a peer
forgot us, and a task's final status is retried until written, never written twice, never over a take-over."""

from __future__ import annotations

import os
from contextlib import contextmanager

import pytest
from sqlalchemy.exc import OperationalError

from modules.storage import processes
from modules.storage.db import Database
from modules.storage.models import ServerProcess


class FlakyDatabase(Database):
    """`fail_before` write transactions raise an outage error before running; `fail_after` of them raise
    one after committing (the commit happened, its answer was lost)."""

    def __init__(self, url: str):
        super().__init__(url)
        self.fail_before = self.fail_after = self.writes = 0

    @contextmanager
    def write(self):
        self.writes += 1
        if self.fail_before:
            self.fail_before -= 1
            raise OperationalError("UPDATE", {}, Exception("database is down"))
        with super().write() as s:
            yield s
        if self.fail_after:
            self.fail_after -= 1
            raise OperationalError("COMMIT", {}, Exception("connection lost after the commit"))


@pytest.fixture
def db(tmp_path):
    database = FlakyDatabase(f"sqlite:///{tmp_path / 'app.db'}")
    database.migrate()
    yield database
    database.dispose()


# -- heartbeats ------------------------------------------------------------------------
def test_a_heartbeat_after_a_peer_forgot_us_registers_us_again(db):
    me = processes.register(db)
    processes.forget(db, {me})
    assert me not in processes.alive_processes(db, "someone-else", 10)
    processes.heartbeat(db, me)
    with db.read() as s:
        row = s.get(ServerProcess, me)
    assert row is not None and row.pid == os.getpid() and row.host == processes.HOST
    assert me in processes.alive_processes(db, "someone-else", 10)


def test_a_heartbeat_keeps_a_live_process_from_being_judged_gone(db):
    me = processes.register(db)
    with Database.write(db) as s:
        s.get(ServerProcess, me).heartbeat_at -= 60
    assert me in processes.gone_processes(db, "someone-else", 10)
    processes.heartbeat(db, me)
    assert me not in processes.gone_processes(db, "someone-else", 10)
    with db.read() as s:
        assert len(list(s.query(ServerProcess))) == 1  # beat, not registered twice


def test_a_process_on_this_host_whose_pid_is_gone_is_gone_at_once(db):
    me = processes.register(db)
    with Database.write(db) as s:
        s.get(ServerProcess, me).pid = 2**22 + 7  # beyond pid_max: no such process
    assert processes.gone_processes(db, "someone-else", 10) == {me: processes.HOST}
    assert me not in processes.alive_processes(db, "someone-else", 10)
