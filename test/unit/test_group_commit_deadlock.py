"""A deadlock is not an outage: the database rolls back the one transaction it chose and answers on, so the
group commit retries each writer of that batch alone (as after any writer's error) instead of failing them all
with DatabaseUnavailable and making the health check suspect the database (modules/storage/db.py)."""

from __future__ import annotations

import psycopg
from sqlalchemy import insert, select, text
from sqlalchemy.exc import OperationalError

from modules.storage.db import Database, deadlocked
from modules.storage.group_commit import GroupCommit
from modules.storage.models import User
from test.conftest import wait_until
from test.db_urls import fresh_database
from test.unit.held_batch import HeldBatch


def _lock(row: int):
    return lambda s: s.execute(text("SELECT id FROM lock_rows WHERE id = :id FOR UPDATE"), {"id": row}).all()


def test_a_batch_that_a_deadlock_rolled_back_retries_each_writer_alone_on_postgresql(tmp_path):
    with fresh_database("postgresql", tmp_path) as url:
        db = Database(url, timeout_s=30)
        db.migrate()
        with db.write() as s:
            s.execute(text("CREATE TABLE lock_rows (id integer PRIMARY KEY)"))
            s.execute(text("INSERT INTO lock_rows VALUES (1), (2)"))
        suspected: list[bool] = []
        db.health.suspect = lambda: suspected.append(True)  # type: ignore[method-assign]
        held = HeldBatch(GroupCommit(db))

        # Another transaction (another process, say) holds row 1 and will want row 2; it waits long before it
        # looks for a deadlock, so the batch's transaction is the one PostgreSQL rolls back.
        other = psycopg.connect(url.replace("postgresql+psycopg", "postgresql"))
        other.execute("SET deadlock_timeout = '30s'")
        other.execute("SELECT id FROM lock_rows WHERE id = 1 FOR UPDATE")
        steps = {"row 2": _lock(2), "row 1": _lock(1),
                 "a user": lambda s: s.execute(insert(User).values(name="innocent", created_at=0.0))}
        held.queue(steps)  # one batch: row 2 locked, then row 1 waited for
        held.release()
        with psycopg.connect(url.replace("postgresql+psycopg", "postgresql"), autocommit=True) as watcher:
            wait_until(lambda: watcher.execute("SELECT count(*) FROM pg_locks WHERE NOT granted").fetchone()[0] > 0,
                       what="the batch waiting for row 1")
        other.execute("SELECT id FROM lock_rows WHERE id = 2 FOR UPDATE")  # the cycle; the batch is rolled back
        other.commit()
        other.close()
        outcomes = held.join()

        assert outcomes == {"row 2": "ok", "row 1": "ok", "a user": "ok"}, outcomes
        assert suspected == []
        with db.read() as s:
            assert s.scalars(select(User.name).where(User.name == "innocent")).all() == ["innocent"]
        db.dispose()


def test_what_counts_as_a_deadlock():
    class Pg(Exception):
        sqlstate = "40P01"

    assert deadlocked(OperationalError("SELECT", {}, Pg("deadlock detected")))
    assert deadlocked(OperationalError("SELECT", {}, Exception(1213, "Deadlock found when trying to get lock")))
    assert not deadlocked(OperationalError("SELECT", {}, Exception(2003, "Can't connect to MySQL server")))
    assert not deadlocked(OperationalError("SELECT", {}, Exception("server closed the connection unexpectedly")))
