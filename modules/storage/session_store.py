"""Key/field/JSON-value store shared by every server process (the active agent lives here)."""

from __future__ import annotations

import functools
from typing import Any

from sqlalchemy import Executable, bindparam, select
from sqlalchemy.dialects import mysql, postgresql, sqlite

from modules.storage.db import Database
from modules.storage.group_commit import GroupCommit
from modules.storage.models import SessionEntry
from modules.storage.records import now

# Read and written with every routed message (the active agent): built once (modules/storage/agents.py says why).
_GET = select(SessionEntry.value).where(SessionEntry.key == bindparam("k"), SessionEntry.field == bindparam("f"))


class SessionStore:
    """With `writer`, a `set` shares the group commit's transaction with the other writes of its moment: the
    active agent is written two or three times a routed message, and a transaction of its own each time
    queued behind the group commit for SQLite's one writer."""

    def __init__(self, db: Database, writer: GroupCommit | None = None):
        self._db = db
        self._writer = writer

    def get(self, key: str, field: str) -> Any:
        with self._db.read() as s:
            return s.scalars(_GET, {"k": key, "f": field}).first()

    def fields(self, key: str) -> dict[str, Any]:
        with self._db.read() as s:
            return {row.field: row.value for row in s.scalars(select(SessionEntry).where(SessionEntry.key == key))}

    def set(self, key: str, field: str, value: Any) -> None:
        """One statement, the database's own upsert: no read first, so no race to retry."""
        statement, params = _upsert(self._db.dialect), {"k": key, "f": field, "v": value, "at": now()}
        if self._writer is not None:
            self._writer.call(lambda s: s.execute(statement, params))
            return
        with self._db.write() as s:
            s.execute(statement, params)

    def delete(self, key: str, field: str) -> None:
        with self._db.write() as s:
            row = s.get(SessionEntry, (key, field))
            if row is not None:
                s.delete(row)


@functools.cache
def _upsert(dialect: str) -> Executable:
    """INSERT ... ON CONFLICT DO UPDATE (PostgreSQL, SQLite) or ON DUPLICATE KEY UPDATE (MySQL, MariaDB), built
    once per dialect."""
    row: dict[str, Any] = {"key": bindparam("k"), "field": bindparam("f"), "value": bindparam("v"),
                           "updated_at": bindparam("at")}
    if dialect in ("mysql", "mariadb"):
        upsert = mysql.insert(SessionEntry).values(row)
        return upsert.on_duplicate_key_update(value=upsert.inserted.value, updated_at=upsert.inserted.updated_at)
    insert = postgresql.insert if dialect == "postgresql" else sqlite.insert
    statement = insert(SessionEntry).values(row)
    return statement.on_conflict_do_update(index_elements=["key", "field"], set_={
        "value": statement.excluded.value, "updated_at": statement.excluded.updated_at})
