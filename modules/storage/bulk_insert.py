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
        conn.execute(_unnest_insert(table, tuple(rows[0]), skip_existing), unnest_params(table, rows))
    else:
        conn.execute(statement, rows)


def unnest_params(table: Table, rows: list[dict[str, Any]]) -> dict[str, list[Any]]:
    """The rows as one array per column, `p0`, `p1`, .. in the order of the first row's keys (the parameters
    of `unnest_rows` and `_unnest_insert`)."""
    columns = tuple(rows[0])
    json_columns = {c for c in columns if isinstance(table.c[c].type, JSON)}
    return {f"p{i}": [json.dumps(r[c]) if c in json_columns else r[c] for r in rows] for i, c in enumerate(columns)}


@functools.cache
def unnest_rows(table: Table, columns: tuple[str, ...], alias: str) -> str:
    """SQL for the arrays of `unnest_params` as a table `alias` in list order: its columns are named as
    `table`'s, and `ord` numbers the rows from 1 (for a statement that orders, or numbers, what it inserts)."""
    names = ", ".join(_names(table, columns))
    return f"unnest({_arrays(table, columns)}) WITH ORDINALITY AS {alias} ({names}, ord)"


def column_names(table: Table, columns: tuple[str, ...], alias: str = "") -> str:
    """The columns' quoted names, comma-separated, each qualified by `alias` when one is given."""
    prefix = f"{alias}." if alias else ""
    return ", ".join(prefix + name for name in _names(table, columns))


@functools.cache
def _unnest_insert(table: Table, columns: tuple[str, ...], skip_existing: str | None) -> Executable:
    conflict = f' ON CONFLICT ("{table.c[skip_existing].name}") DO NOTHING' if skip_existing else ""
    return text(f'INSERT INTO "{table.name}" ({column_names(table, columns)}) '
                f"SELECT * FROM unnest({_arrays(table, columns)}){conflict}")


def _names(table: Table, columns: tuple[str, ...]) -> list[str]:
    return [f'"{table.c[c].name}"' for c in columns]


def _arrays(table: Table, columns: tuple[str, ...]) -> str:
    dialect: Dialect = postgresql.dialect()  # type: ignore[no-untyped-call]
    return ", ".join(f"CAST(:p{i} AS {_array_type(table, c, dialect)})" for i, c in enumerate(columns))


def _array_type(table: Table, column: str, dialect: Dialect) -> str:
    kind = table.c[column].type
    if isinstance(kind, JSON):
        return "json[]"
    name = kind.compile(dialect=dialect)
    return "text[]" if name.startswith("VARCHAR") or name == "TEXT" else f"{name}[]"
