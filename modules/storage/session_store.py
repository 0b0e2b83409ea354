"""Key/field/JSON-value store shared by every server process (the active agent lives here)."""

from __future__ import annotations

import functools
import logging
from typing import Any, cast

from sqlalchemy import Executable, Table, bindparam, select
from sqlalchemy.dialects import mysql, postgresql, sqlite
from sqlalchemy.exc import DBAPIError, SQLAlchemyError
from sqlalchemy.orm import Session

from modules.storage.db import Database
from modules.storage.models import SessionEntry
from modules.storage.records import now

log = logging.getLogger(__name__)

_TABLE = cast(Table, SessionEntry.__table__)
# Read and written with every routed message (the active agent): built once (modules/storage/agents.py says why).
_GET = select(SessionEntry.value).where(SessionEntry.key == bindparam("k"), SessionEntry.field == bindparam("f"))


class SessionStore:
    """A failing store (its table gone) must not fail the writes it shares a transaction with: the database
    layer reads a statement's OperationalError as an outage, which every writer of a group commit's batch
    hears. So `set` is a transaction of its own, and `set_in` writes inside the caller's behind a savepoint (on
    SQLite without one: see `set_in`)."""

    def __init__(self, db: Database):
        self._db = db

    def get(self, key: str, field: str) -> Any:
        with self._db.read() as s:
            return s.scalars(_GET, {"k": key, "f": field}).first()

    def fields(self, key: str) -> dict[str, Any]:
        with self._db.read() as s:
            return {row.field: row.value for row in s.scalars(select(SessionEntry).where(SessionEntry.key == key))}

    def set(self, key: str, field: str, value: Any) -> None:
        """One statement, the database's own upsert: no read first, so no race to retry."""
        with self._db.write() as s:
            self._upsert_in(s, key, field, value)

    def set_in(self, session: Session, key: str, field: str, value: Any) -> bool:
        """`set` inside the caller's transaction (a group commit's batch: no commit of its own); False, with the
        caller's writes unharmed, when the statement failed. When the transaction itself is gone (the connection
        lost; a deadlock, which ends the whole of it on MariaDB) the statement's error is raised, and the caller's
        writes fail with it rather than go on in a transaction that no longer holds them.

        On SQLite without a savepoint: a statement that fails there undoes only itself and the transaction goes
        on, unless SQLite rolled the whole of it back (a full disk, an I/O error), which its connection then says.
        The SAVEPOINT and RELEASE were two more statements and about 80 us for each write of the active agent, two
        a routed message (issue 26)."""
        savepoint = None if self._db.is_sqlite else session.begin_nested()
        try:
            self._upsert_in(session, key, field, value)
        except SQLAlchemyError as exc:
            if isinstance(exc, DBAPIError) and exc.connection_invalidated:
                raise  # the connection is gone, the caller's transaction with it: an outage, for every writer
            if savepoint is None:
                if not _in_transaction(session):
                    raise  # SQLite ended the transaction, and the caller's writes with it
            else:
                try:
                    savepoint.rollback()
                except SQLAlchemyError:
                    raise exc from None  # the statement's own error: the database layer reads an outage from it
            log.warning("session store: could not write %s/%s: %s", key, field, exc)
            return False
        if savepoint is not None:
            savepoint.commit()
        return True

    def _upsert_in(self, session: Session, key: str, field: str, value: Any) -> None:
        session.connection().execute(_upsert(self._db.dialect), {"k": key, "f": field, "v": value, "at": now()})

    def delete(self, key: str, field: str) -> None:
        with self._db.write() as s:
            row = s.get(SessionEntry, (key, field))
            if row is not None:
                s.delete(row)


def _in_transaction(session: Session) -> bool:
    """Whether the DB-API connection under the session's transaction still has it open (sqlite3's own view)."""
    raw = session.connection().connection.dbapi_connection
    return bool(getattr(raw, "in_transaction", False))


@functools.cache
def _upsert(dialect: str) -> Executable:
    """INSERT ... ON CONFLICT DO UPDATE (PostgreSQL, SQLite) or ON DUPLICATE KEY UPDATE (MySQL, MariaDB), built
    once per dialect, on the table (an ORM-enabled INSERT is cloned, and its cache key built, at every execution)."""
    row: dict[str, Any] = {"key": bindparam("k"), "field": bindparam("f"), "value": bindparam("v"),
                           "updated_at": bindparam("at")}
    if dialect in ("mysql", "mariadb"):
        upsert = mysql.insert(_TABLE).values(row)
        return upsert.on_duplicate_key_update(value=upsert.inserted.value, updated_at=upsert.inserted.updated_at)
    insert = postgresql.insert if dialect == "postgresql" else sqlite.insert
    statement = insert(_TABLE).values(row)
    return statement.on_conflict_do_update(index_elements=["key", "field"], set_={
        "value": statement.excluded.value, "updated_at": statement.excluded.updated_at})
