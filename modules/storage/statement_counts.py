"""How many statements this process has sent to its database, by verb, and how many write transactions it
committed.

Much of a turn's cost on the server is its statements (bench/load.py prints them per stream), and a change that
adds a read to every turn (an N+1) shows in no latency at low load. Counted at the engine, so every path is seen,
ORM or Core; the metrics exposition reads the counts at each scrape (docs/API.md, "Metrics").
"""

from __future__ import annotations

from collections import Counter

from sqlalchemy import event
from sqlalchemy.engine import Engine

VERBS = ("select", "insert", "update", "delete", "savepoint")  # the labels; anything else counts as "other"


class StatementCounts:
    """Counts of the engines it `watch`es. A `SAVEPOINT`'s `RELEASE` and `ROLLBACK TO` count as `savepoint`; an
    `executemany` as one statement (one round trip). Commits are counted by the caller that commits
    (`Database.write`).

    Statements are heard through the dialect's events: a listener on the engine's own (`before_cursor_execute`)
    puts every statement on SQLAlchemy's slower path, about 15 µs more each, a fifth of a one-row read on
    SQLite; the dialect's cost about 2 µs."""

    def __init__(self) -> None:
        self._statements: Counter[str] = Counter()
        self._commits = 0

    def watch(self, engine: Engine) -> None:
        event.listen(engine, "do_execute", lambda _cursor, statement, _params, _context: self._count(statement))
        event.listen(engine, "do_executemany", lambda _cursor, statement, _params, _context: self._count(statement))
        event.listen(engine, "do_execute_no_params", lambda _cursor, statement, _context: self._count(statement))

    def committed(self) -> None:
        self._commits += 1

    def statements(self) -> dict[str, int]:
        """By verb, every verb present (0 when none was sent yet)."""
        return {verb: self._statements[verb] for verb in (*VERBS, "other")}

    def commits(self) -> int:
        return self._commits

    def _count(self, statement: str) -> None:
        """Returns None: the dialect runs the statement as it would have."""
        words = statement.split(None, 1)
        verb = words[0].lower() if words else ""
        if verb in ("release", "rollback"):  # RELEASE SAVEPOINT, ROLLBACK TO SAVEPOINT (a transaction's own
            verb = "savepoint"  # rollback is the driver's call, no statement)
        self._statements[verb if verb in VERBS else "other"] += 1
