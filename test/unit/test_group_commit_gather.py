"""The group commit's wait for more writers under load (`gather_s`, GROUP_COMMIT_GATHER_MS): a busy process's
leader waits before it takes its batch, so the writers that come meanwhile share it (without it, 500 streams fell
into a convoy of small batches: bench/load.py); a quiet process's write, and a single writer's, never waits."""

from __future__ import annotations

import threading
import time

from sqlalchemy import func, select

from modules.storage import group_commit
from modules.storage.db import Database
from modules.storage.group_commit import BUSY_WRITERS, GroupCommit
from modules.storage.models import User
from test.conftest import wait_until
from test.db_urls import migrated_database

USERS = User.__table__


def _count(db: Database) -> int:
    with db.read() as s:
        return int(s.scalar(select(func.count()).select_from(User)) or 0)


def _database(tmp_path) -> Database:
    db = Database(f"sqlite:///{tmp_path / 'app.db'}", timeout_s=30)
    db.migrate()
    return db


def _busy_window(monkeypatch) -> None:
    """Batches count as recent for a minute: a slow machine's test cannot outlast the window."""
    monkeypatch.setattr(group_commit, "BUSY_WINDOW_S", 60.0)


def test_a_quiet_process_and_a_single_fast_writer_commit_at_once(tmp_path, monkeypatch):
    _busy_window(monkeypatch)
    db = _database(tmp_path)
    writer = GroupCommit(db, gather_s=30.0)
    started = time.monotonic()
    for k in range(BUSY_WRITERS + 10):  # one writer, a batch each: never busy, however many
        writer.insert(USERS, [{"name": f"alone-{k}", "created_at": 0.0}])
    assert time.monotonic() - started < 10  # not the 30 s a wait would take
    assert _count(db) == BUSY_WRITERS + 10 and writer.batches == BUSY_WRITERS + 10


def _wave(writer: GroupCommit) -> None:
    """Busy: BUSY_WRITERS writers in one batch (as a wave of streams' writes), queued behind a batch held open."""
    held, release = threading.Event(), threading.Event()

    def hold(_session) -> None:
        held.set()
        assert release.wait(10)

    blocker = threading.Thread(target=writer.call, args=(hold,))
    blocker.start()
    assert held.wait(10)
    wave = [threading.Thread(target=writer.insert, args=(USERS, [{"name": f"wave-{k}", "created_at": 0.0}]))
            for k in range(BUSY_WRITERS)]
    for thread in wave:
        thread.start()
    wait_until(lambda: len(writer._queue) == BUSY_WRITERS, what="the wave queued")
    release.set()
    for thread in [blocker, *wave]:
        thread.join(10)
    assert writer.batches == 2


def test_a_busy_process_waits_for_more_writers_and_commits_them_together(tmp_path, monkeypatch):
    _busy_window(monkeypatch)
    db = _database(tmp_path)
    writer = GroupCommit(db, gather_s=1.0)
    _wave(writer)
    assert _count(db) == BUSY_WRITERS

    first_done = threading.Event()
    timing: dict[str, float] = {}

    def first() -> None:
        started = time.monotonic()
        writer.insert(USERS, [{"name": "first", "created_at": 0.0}])
        timing["first"] = time.monotonic() - started
        first_done.set()

    thread = threading.Thread(target=first)
    thread.start()
    # The first writer leads and gathers; a second one that comes meanwhile joins its batch.
    wait_until(lambda: writer._leading, what="the first writer leading")
    writer.insert(USERS, [{"name": "second", "created_at": 0.0}])
    assert first_done.wait(10)
    thread.join(10)
    assert timing["first"] >= 1.0  # it waited for more writers before taking its batch
    assert writer.batches == 3 and _count(db) == BUSY_WRITERS + 2  # the two writers in one batch


def test_on_postgresql_a_busy_process_does_not_wait(tmp_path, monkeypatch):
    """Its batches gather while a commit waits on the network; a wait there only cost CPU and time."""
    _busy_window(monkeypatch)
    with migrated_database("postgresql", tmp_path) as db:
        writer = GroupCommit(db, gather_s=30.0)
        _wave(writer)
        started = time.monotonic()
        writer.insert(USERS, [{"name": "after the wave", "created_at": 0.0}])
        assert time.monotonic() - started < 10
        assert _count(db) == BUSY_WRITERS + 1
