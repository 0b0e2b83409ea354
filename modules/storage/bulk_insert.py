"""Many rows in one INSERT statement on every database, for the batches of the hot path (a batch's sends, a
drain's history entries).

SQLite's executemany loops in C and PyMySQL's rewrites an INSERT into one multi-row statement, but psycopg's
sends one statement per row in pipeline mode, and under eventlet each costs a green wait: on PostgreSQL the
rows go as one array per column instead, `INSERT .. SELECT * FROM unnest(..)`, one statement whose text does
not depend on the row count (so psycopg and the server prepare it once)."""

from __future__ import annotations

import functools
import json
from typing import Any

from sqlalchemy import JSON, Connection, Executable, Table, text
from sqlalchemy.dialects import postgresql
from sqlalchemy.engine import Dialect


def insert_rows(conn: Connection, table: Table, rows: list[dict[str, Any]], statement: Executable,
                *, skip_existing: str | None = None) -> None:
    """Insert `rows` (column values by column key, every row with the same keys) with `statement` (the
    dialect's INSERT of `table`); on PostgreSQL with more than one row, one unnest statement that skips a row
    whose `skip_existing` column collides, as `statement` is expected to."""
    if len(rows) > 1 and conn.dialect.name == "postgresql":
        columns = tuple(rows[0])
        json_columns = {c for c in columns if isinstance(table.c[c].type, JSON)}
        conn.execute(_unnest_insert(table, columns, skip_existing), {
            f"p{i}": [json.dumps(r[c]) if c in json_columns else r[c] for r in rows] for i, c in enumerate(columns)})
    else:
        conn.execute(statement, rows)


@functools.cache
def _unnest_insert(table: Table, columns: tuple[str, ...], skip_existing: str | None) -> Executable:
    dialect: Dialect = postgresql.dialect()  # type: ignore[no-untyped-call]
    arrays = ", ".join(f"CAST(:p{i} AS {_array_type(table, c, dialect)})" for i, c in enumerate(columns))
    names = ", ".join(f'"{table.c[c].name}"' for c in columns)
    conflict = f' ON CONFLICT ("{table.c[skip_existing].name}") DO NOTHING' if skip_existing else ""
    return text(f'INSERT INTO "{table.name}" ({names}) SELECT * FROM unnest({arrays}){conflict}')


def _array_type(table: Table, column: str, dialect: Dialect) -> str:
    kind = table.c[column].type
    if isinstance(kind, JSON):
        return "json[]"
    name = kind.compile(dialect=dialect)
    return "text[]" if name.startswith("VARCHAR") or name == "TEXT" else f"{name}[]"
