"""One lock per user across every server process: the caps on running work (modules/work_caps.py) check
the counts and insert the new row under it, so two processes starting work for one user at the same instant
cannot both pass the last free place (README, "Configuration").

PostgreSQL: a transaction-scoped advisory lock keyed by the user, held until the new row is committed.
MariaDB/MySQL: a named lock (GET_LOCK) on the same connection, released after the insert. SQLite is one
process's database: the caller's lock of the user in this process (`work_caps.USER_LOCKS`) is all there is to hold.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import select, text

from modules.storage.db import Database
from modules.storage.models import Conversation

LOCK_CLASS = 727402  # the first key of PostgreSQL's two-key advisory locks (727401: the migrations')
WAIT_S = 5
NAMED = "CONCAT('chat_work_', DATABASE(), '_', user_id)"  # MariaDB's lock names are the server's, not a database's


class WorkLockTimeout(RuntimeError):
    """Another process held the user's lock past WAIT_S."""


def owner_of(db: Database, conversation_id: str) -> int | None:
    """The conversation's user (None: no such conversation), whose work the lock guards."""
    with db.read() as s:
        return s.scalar(select(Conversation.user_id).where(Conversation.id == conversation_id))


@contextmanager
def user_work_lock(db: Database, conversation_id: str) -> Iterator[None]:
    """Held while the caller checks the caps of the conversation's user and records the new work."""
    if db.is_sqlite:
        yield
        return
    with db.read(timeout_s=WAIT_S * 2, transaction=True) as session:
        if db.dialect == "postgresql":
            session.execute(text("SELECT set_config('lock_timeout', :ms, true)"), {"ms": f"{WAIT_S * 1000}"})
            session.execute(text("SELECT pg_advisory_xact_lock(:cls, user_id) FROM conversations WHERE id = :cid"),
                            {"cls": LOCK_CLASS, "cid": conversation_id})
            try:
                yield
            finally:
                session.rollback()  # ends the transaction and with it the lock
            return
        got = session.execute(text(f"SELECT GET_LOCK({NAMED}, :wait) FROM conversations WHERE id = :cid"),
                              {"wait": WAIT_S, "cid": conversation_id}).scalar()
        if got == 0:
            raise WorkLockTimeout(f"another server process held this user's work lock for over {WAIT_S} s")
        try:
            yield
        finally:
            if got == 1:
                session.execute(text(f"SELECT RELEASE_LOCK({NAMED}) FROM conversations WHERE id = :cid"),
                                {"cid": conversation_id})
