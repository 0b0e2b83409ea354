"""Benchmark: a page of `GET /api/conversations` for a user with many conversations (docs/PERFORMANCE.md).

Fills a database with one user's conversations (`--conversations`, default 20,000) and as many of a second
user's, all active after the first user's (the rest of the site, busy since: an index of last activity alone
meets all of them first), then times `list_conversations` for the first page, the page halfway down and the
last page (10,000 and 19,900 conversations down, by their cursors), with the list's index
(`ix_conversations_user_page`, migration 0014) and with the index of `updated_at` alone that it replaced;
prints the median milliseconds of each and the plan the database chose for the page halfway down.

Run: `.venv/bin/python bench/conversation_pages.py [--database-url URL]` (default: a new SQLite file; the
database should be empty: the script creates the schema and leaves its rows there).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

from sqlalchemy import create_engine, insert, text
from sqlalchemy.pool import NullPool

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from modules.storage import conversations  # noqa: E402
from modules.storage.conversation_pages import ConversationCursor  # noqa: E402
from modules.storage.db import Database  # noqa: E402
from modules.storage.models import Conversation  # noqa: E402
from modules.storage.users import get_or_create_user  # noqa: E402

INDEX = "ix_conversations_user_page"
PAGE = 100  # the UI's page


def _fill(db: Database, users: list[int], count: int) -> None:
    for n, user_id in enumerate(users):
        start = 1_765_000_000.0 + n * count
        rows = [{"id": str(uuid.uuid4()), "user_id": user_id, "title": f"conversation {i}", "created_at": start + i,
                 "updated_at": start + i + 0.000123, "deleted_at": None} for i in range(count)]
        with db.write() as s:
            for i in range(0, count, 5000):
                s.execute(insert(Conversation), rows[i:i + 5000])


def _median_ms(db: Database, user_id: int, before: ConversationCursor | None, calls: int) -> float:
    times = []
    for _ in range(calls):
        t = time.perf_counter()
        conversations.list_conversations(db, user_id, PAGE, None, before)
        times.append((time.perf_counter() - t) * 1000)
    return statistics.median(times)


def _plan(db: Database, user_id: int, before: ConversationCursor) -> str:
    """The database's plan of a page's statement with its values bound, as the server runs it (on a connection
    of its own, which sees the index changed)."""
    compiled = conversations.page_select(user_id, PAGE + 1, None, before).compile(db.engine)
    params = tuple(compiled.params[name] for name in compiled.positiontup or ()) if compiled.positional \
        else compiled.params
    engine = create_engine(db.url, poolclass=NullPool)
    try:
        with engine.connect() as conn:
            prefix = "EXPLAIN QUERY PLAN " if db.is_sqlite else "EXPLAIN "
            rows = conn.exec_driver_sql(prefix + str(compiled), params).all()
    finally:
        engine.dispose()
    return "\n".join("    " + " | ".join(str(v) for v in row) for row in rows)


def _indexes(db: Database, of_0014: bool) -> None:
    """The list's index as migration 0014 made it, or the index of `updated_at` alone that it replaced."""
    old = "ix_conversations_updated_at"
    on = " ON conversations" if db.dialect in ("mysql", "mariadb") else ""
    with db.write() as s:
        if of_0014:
            s.execute(text(f"CREATE INDEX {INDEX} ON conversations (user_id, updated_at DESC, id)"))
            s.execute(text(f"DROP INDEX {old}{on}"))
        else:
            s.execute(text(f"CREATE INDEX {old} ON conversations (updated_at)"))
            s.execute(text(f"DROP INDEX {INDEX}{on}"))
    _analyze(db)


def _analyze(db: Database) -> None:
    """Fresh statistics, as a database that has run a while has them."""
    statement = {"postgresql": "ANALYZE conversations", "mysql": "ANALYZE TABLE conversations",
                 "mariadb": "ANALYZE TABLE conversations"}.get(db.dialect)
    if statement:
        with db.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            conn.execute(text(statement))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--conversations", type=int, default=20_000, help="each user's")
    p.add_argument("--calls", type=int, default=30)
    p.add_argument("--database-url", default=None, help="default: a new SQLite file")
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        db = Database(args.database_url or f"sqlite:///{Path(tmp) / 'bench.db'}")
        try:
            db.migrate()
            users = [get_or_create_user(db, name).id for name in ("bench-a", "bench-b")]
            _fill(db, users, args.conversations)
            _analyze(db)
            ordered = conversations.list_conversations(db, users[0], args.conversations, None, None).conversations
            depths = [d for d in (args.conversations // 2, args.conversations - PAGE) if d > 0]
            cursors = [ConversationCursor.after(ordered[d - 1]) for d in depths]
            print(f"{db.dialect}, {args.conversations:,} conversations each of 2 users, pages of {PAGE}:")
            for present in (True, False):
                if not present:
                    _indexes(db, False)
                times = [_median_ms(db, users[0], c, args.calls) for c in (None, *cursors)]
                label = "with 0014's index" if present else "with 0013's (updated_at alone)"
                print(f"  {label}: " + ", ".join(
                    f"{where} {ms:.2f} ms" for where, ms in zip(["first page", *(f"at {d:,}" for d in depths)], times,
                                                                strict=True)))
                if cursors:
                    print(_plan(db, users[0], cursors[0]))
            _indexes(db, True)
        finally:
            db.dispose()
    return 0


if __name__ == "__main__":
    sys.exit(main())
