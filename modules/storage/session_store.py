"""Key/field/JSON-value store shared by every server process (the active agent lives here)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Executable, select
from sqlalchemy.dialects import mysql, postgresql, sqlite

from modules.storage.db import Database
from modules.storage.models import SessionEntry
from modules.storage.records import now


class SessionStore:
    def __init__(self, db: Database):
        self._db = db

    def get(self, key: str, field: str) -> Any:
        with self._db.read() as s:
            row = s.get(SessionEntry, (key, field))
        return None if row is None else row.value

    def fields(self, key: str) -> dict[str, Any]:
        with self._db.read() as s:
            return {row.field: row.value for row in s.scalars(select(SessionEntry).where(SessionEntry.key == key))}

    def set(self, key: str, field: str, value: Any) -> None:
        """One statement, the database's own upsert: no read first, so no race to retry."""
        row = {"key": key, "field": field, "value": value, "updated_at": now()}
        with self._db.write() as s:
            s.execute(_upsert(self._db.dialect, row))

    def delete(self, key: str, field: str) -> None:
        with self._db.write() as s:
            row = s.get(SessionEntry, (key, field))
            if row is not None:
                s.delete(row)


def _upsert(dialect: str, row: dict[str, Any]) -> Executable:
    """INSERT ... ON CONFLICT DO UPDATE (PostgreSQL, SQLite) or ON DUPLICATE KEY UPDATE (MySQL, MariaDB)."""
    changes = {"value": row["value"], "updated_at": row["updated_at"]}
    if dialect in ("mysql", "mariadb"):
        return mysql.insert(SessionEntry).values(row).on_duplicate_key_update(changes)
    insert = postgresql.insert if dialect == "postgresql" else sqlite.insert
    return insert(SessionEntry).values(row).on_conflict_do_update(index_elements=["key", "field"], set_=changes)
