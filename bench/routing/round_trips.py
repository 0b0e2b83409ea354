"""Round trips to PostgreSQL, counted on an engine: what a batch of sends or a drain waits for.

psycopg sends a transaction's BEGIN as a query of its own before the first statement (unless the connection
is in autocommit), then each statement, then COMMIT or ROLLBACK (none when no transaction is open): each is one
round trip, and under eventlet one green wait. Counted from SQLAlchemy's statement event and the dialect's
commit and rollback, so only what reaches the server is counted (an executemany counts once: psycopg pipelines
it)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from psycopg.pq import TransactionStatus
from sqlalchemy import event
from sqlalchemy.engine import Engine


class RoundTrips:
    """Round trips to a PostgreSQL engine: `begins`, `statements`, `ends` (COMMIT or ROLLBACK sent)."""

    def __init__(self, engine: Engine):
        if engine.dialect.name != "postgresql":
            raise ValueError("round trips are counted on PostgreSQL only")
        self._lock = threading.Lock()
        self.begins = self.statements = self.ends = 0
        event.listen(engine, "before_cursor_execute", self._before)
        dialect = engine.dialect
        dialect.do_commit = self._ending(dialect.do_commit)  # type: ignore[method-assign]
        dialect.do_rollback = self._ending(dialect.do_rollback)  # type: ignore[method-assign]

    @property
    def total(self) -> int:
        return self.begins + self.statements + self.ends

    def reset(self) -> None:
        with self._lock:
            self.begins = self.statements = self.ends = 0

    def _before(self, conn: Any, _cursor: Any, _statement: str, _params: Any, _context: Any, _many: bool) -> None:
        raw = conn.connection.driver_connection
        begins = not raw.autocommit and raw.info.transaction_status == TransactionStatus.IDLE
        with self._lock:
            self.begins += begins
            self.statements += 1

    def _ending(self, original: Callable[[Any], None]) -> Callable[[Any], None]:
        def end(dbapi_connection: Any) -> None:
            raw = getattr(dbapi_connection, "dbapi_connection", dbapi_connection)  # a pool's proxy, or psycopg's
            sent = raw.info.transaction_status != TransactionStatus.IDLE
            original(dbapi_connection)
            with self._lock:
                self.ends += sent
        return end
