"""Key/field/JSON-value store shared by every server process (the active agent lives here)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select, update
from sqlalchemy.exc import IntegrityError

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
        """Upsert written portably: update first, insert when no row, retry once on a race."""
        for _ in range(2):
            with self._db.write() as s:
                changed = s.execute(
                    update(SessionEntry).where(SessionEntry.key == key, SessionEntry.field == field)
                    .values(value=value, updated_at=now())
                ).rowcount
                if changed:
                    return
            try:
                with self._db.write() as s:
                    s.add(SessionEntry(key=key, field=field, value=value, updated_at=now()))
                return
            except IntegrityError:
                continue
        raise RuntimeError(f"session store could not write {key}/{field}")

    def delete(self, key: str, field: str) -> None:
        with self._db.write() as s:
            row = s.get(SessionEntry, (key, field))
            if row is not None:
                s.delete(row)
