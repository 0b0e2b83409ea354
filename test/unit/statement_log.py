"""The SQL statements a block of code sends, for tests that count a path's reads and writes (issue 26)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import event

from modules.storage.db import Database


@contextmanager
def statements(db: Database) -> Iterator[list[str]]:
    """Each statement the engine sends meanwhile, its whitespace collapsed."""
    seen: list[str] = []

    def record(_conn, _cursor, statement, *_args):
        seen.append(" ".join(statement.split()))

    event.listen(db.engine, "before_cursor_execute", record)
    try:
        yield seen
    finally:
        event.remove(db.engine, "before_cursor_execute", record)
