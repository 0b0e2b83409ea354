"""The storage layer's bounds: a database that is not there fails fast and says so, the MySQL migration
lock is taken or the start fails, and SQLite writes wait for another process's lock without blocking."""

from __future__ import annotations

import sqlite3
import time

import pymysql
import pytest
from sqlalchemy import inspect, text

from modules.storage import db as db_module
from modules.storage.db import Database, DatabaseUnavailable, MigrationLockTimeout
from test.conftest import free_port
from test.db_urls import MARIADB, fresh_database


def test_a_database_that_refuses_connections_is_unavailable_at_once():
    db = Database(f"postgresql+psycopg://postgres@127.0.0.1:{free_port()}/nothing", timeout_s=2)
    started = time.monotonic()
    with pytest.raises(DatabaseUnavailable):
        with db.read() as s:
            s.execute(text("SELECT 1"))
    assert time.monotonic() - started < 2
    assert db.probe(0.5) is not None and not db.ping(0.5)


def test_a_statement_longer_than_the_timeout_is_cancelled_by_postgresql(tmp_path):
    with fresh_database("postgresql", tmp_path) as url:
        db = Database(url, timeout_s=0.5)
        try:
            with pytest.raises(DatabaseUnavailable):
                with db.read() as s:
                    s.execute(text("SELECT pg_sleep(3)"))
            assert db.ping()
        finally:
            db.dispose()


def test_a_sqlite_write_waits_for_another_connections_lock_then_gives_up(tmp_path):
    path = tmp_path / "app.db"
    db = Database(f"sqlite:///{path}", timeout_s=0.5)
    db.migrate()
    locker = sqlite3.connect(path, isolation_level=None)
    locker.execute("BEGIN EXCLUSIVE")
    try:
        started = time.monotonic()
        with pytest.raises(DatabaseUnavailable):
            with db.write():
                pass
        assert 0.4 < time.monotonic() - started < 5  # its 0.5 s bound, not a wait for the lock's end
        assert db.probe(0.2) is not None  # reads go on; the probe takes the write lock
    finally:
        locker.rollback()
        locker.close()
    assert db.ping()
    db.dispose()


def test_the_mysql_migration_lock_is_taken_or_the_start_fails(tmp_path, monkeypatch):
    monkeypatch.setattr(db_module, "MIGRATION_LOCK_WAIT_S", 0.5)
    with fresh_database("mariadb", tmp_path) as url:
        holder = pymysql.connect(**MARIADB, autocommit=True)
        try:
            with holder.cursor() as cur:
                cur.execute("SELECT GET_LOCK('chat_server_migrate', 0)")
                assert cur.fetchone()[0] == 1
            db = Database(url)
            with pytest.raises(MigrationLockTimeout):
                db.migrate()
            assert "alembic_version" not in inspect(db.engine).get_table_names()  # nothing ran
        finally:
            holder.close()  # releases the lock
        db.migrate()
        assert "alembic_version" in inspect(db.engine).get_table_names()
        db.dispose()
