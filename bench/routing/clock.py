"""Where bench/router.py's time goes: per thread role (senders, receiver), time inside the database layer,
statement execution, commits and pings, and the statements and commits counted."""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import event

from modules.storage.db import Database


class DbClock:
    """Per-role time inside the database layer and inside statement execution, per thread role."""

    def __init__(self) -> None:
        self._local = threading.local()
        self._lock = threading.Lock()
        self.layer: dict[str, float] = defaultdict(float)
        self.sql: dict[str, float] = defaultdict(float)
        self.commit: dict[str, float] = defaultdict(float)
        self.ping: dict[str, float] = defaultdict(float)
        self.statements: dict[str, int] = defaultdict(int)
        self.commits: dict[str, int] = defaultdict(int)

    def role(self, name: str) -> None:
        self._local.role = name
        self._local.depth = 0

    def _role(self) -> str:
        return getattr(self._local, "role", "other")

    def reset(self) -> None:
        with self._lock:
            self.layer.clear()
            self.sql.clear()
            self.commit.clear()
            self.ping.clear()
            self.statements.clear()
            self.commits.clear()

    def attach(self, db: Database) -> None:
        """Time every session of `db` (pool checkout, writer lock, statements, commit) and every statement."""
        clock = self
        read, write = db.read, db.write

        def timed(inner):
            @contextmanager
            def wrapper(**kwargs) -> Iterator:
                local = clock._local
                depth = getattr(local, "depth", 0)
                local.depth = depth + 1
                start = time.perf_counter()
                try:
                    with inner(**kwargs) as session:
                        yield session
                finally:
                    local.depth = depth
                    if depth == 0:  # a session opened inside another is already counted
                        elapsed = time.perf_counter() - start
                        with clock._lock:
                            clock.layer[clock._role()] += elapsed
            return wrapper

        db.read, db.write = timed(read), timed(write)

        dialect = db.engine.dialect

        def timed_call(original, bucket: dict[str, float]):
            def call(dbapi_connection):
                start = time.perf_counter()
                try:
                    return original(dbapi_connection)
                finally:
                    elapsed = time.perf_counter() - start
                    with clock._lock:
                        bucket[clock._role()] += elapsed
            return call

        commit = timed_call(dialect.do_commit, self.commit)

        def counted_commit(dbapi_connection):
            with clock._lock:
                clock.commits[clock._role()] += 1
            return commit(dbapi_connection)

        dialect.do_commit = counted_commit
        dialect.do_ping = timed_call(dialect.do_ping, self.ping)

        @event.listens_for(db.engine, "before_cursor_execute")
        def before(conn, cursor, statement, parameters, context, executemany):
            clock._local.sql_start = time.perf_counter()

        @event.listens_for(db.engine, "after_cursor_execute")
        def after(conn, cursor, statement, parameters, context, executemany):
            elapsed = time.perf_counter() - clock._local.sql_start
            role = clock._role()
            with clock._lock:
                clock.sql[role] += elapsed
                clock.statements[role] += 1
