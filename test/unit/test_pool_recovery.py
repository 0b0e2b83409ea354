"""Pooled connections that the database server dropped (a restart, an idle timeout, a kill) cost one failed
transaction, not a pre-ping round trip on every checkout: the failure discards the whole pool, and the next
transactions open fresh connections."""

from __future__ import annotations

from contextlib import ExitStack

import psycopg
import pymysql
import pytest
from sqlalchemy import text
from sqlalchemy.engine import make_url

from modules.storage.db import Database, DatabaseUnavailable
from test.db_urls import MARIADB, PG_ADMIN, fresh_database

POOLED = 4


def _kill_sessions(kind: str, name: str) -> int:
    if kind == "postgresql":
        with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
            return len(conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s "
                                    "AND pid <> pg_backend_pid()", (name,)).fetchall())
    conn = pymysql.connect(**MARIADB, autocommit=True)
    try:
        cur = conn.cursor()
        cur.execute("SELECT id FROM information_schema.processlist WHERE db = %s AND id <> CONNECTION_ID()", (name,))
        ids = [row[0] for row in cur.fetchall()]
        for session_id in ids:
            cur.execute(f"KILL {int(session_id)}")
        return len(ids)
    finally:
        conn.close()


@pytest.mark.parametrize("kind", ["postgresql", "mariadb"])
def test_a_pool_of_dropped_connections_fails_one_transaction_and_then_serves_again(kind, tmp_path):
    with fresh_database(kind, tmp_path) as url:
        db = Database(url, timeout_s=3)
        try:
            db.migrate()
            pings = []
            real_ping = db.engine.dialect.do_ping
            db.engine.dialect.do_ping = lambda conn: pings.append(1) or real_ping(conn)
            with ExitStack() as held:  # several connections at once, so the pool keeps several
                for _ in range(POOLED):
                    held.enter_context(db.read()).execute(text("SELECT 1"))
            assert _kill_sessions(kind, make_url(url).database) >= POOLED

            failed = 0
            for _ in range(POOLED + 2):
                try:
                    with db.read() as s:
                        assert s.execute(text("SELECT 1")).scalar() == 1
                except DatabaseUnavailable:
                    failed += 1
            assert failed <= 1  # the first dead connection discards the pool with it
            with db.write() as s:
                assert s.execute(text("SELECT 1")).scalar() == 1
            assert pings == []  # no round trip per checkout
        finally:
            db.dispose()
