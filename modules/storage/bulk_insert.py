"""Many rows in one INSERT statement on every database, for the batches of the hot path (a batch's sends, a
drain's history entries, the group commit's rows).

SQLite's executemany loops in C and PyMySQL's rewrites an INSERT into one multi-row statement, but psycopg's
sends one statement per row in pipeline mode, and under eventlet each costs a green wait: on PostgreSQL the
rows go as one JSON array instead, `INSERT .. SELECT .. FROM json_to_recordset(..)`, one statement whose text
does not depend on the row count (so psycopg and the server prepare it once). One JSON document, encoded in C,
costs the process a tenth of what arrays per column did (psycopg quotes each element of a text array in
Python: about 40 us a row)."""

from __future__ import annotations

import functools
import json
from typing import Any

from sqlalchemy import JSON, Connection, Executable, Table, text
from sqlalchemy.dialects import postgresql
from sqlalchemy.engine import Dialect

ROWS_PARAM = "rows"  # the JSON array's parameter in the statements of this module


def insert_rows(conn: Connection, table: Table, rows: list[dict[str, Any]], statement: Executable,
                *, skip_existing: str | None = None) -> None:
    """Insert `rows` (column values by column key, every row with the same keys) with `statement` (the
    dialect's INSERT of `table`); on PostgreSQL with more than one row, one recordset statement that skips a
    row whose `skip_existing` column collides, as `statement` is expected to."""
    if len(rows) > 1 and conn.dialect.name == "postgresql":
        conn.execute(_recordset_insert(table, tuple(rows[0]), skip_existing), recordset_params(table, rows))
    else:
        conn.execute(statement, rows)


def recordset_params(table: Table, rows: list[dict[str, Any]]) -> dict[str, str]:
    """The rows as the parameter of `recordset`: one JSON array of objects keyed by column name."""
    names = {key: table.c[key].name for key in rows[0]}
    return {ROWS_PARAM: json.dumps([{names[k]: v for k, v in row.items()} for row in rows])}


@functools.cache
def recordset(table: Table, columns: tuple[str, ...], alias: str) -> str:
    """SQL for the rows of `recordset_params` as a table `alias` in list order: its columns are named as
    `table`'s, and `ord` numbers the rows from 1 (for a statement that orders, or numbers, what it inserts)."""
    dialect: Dialect = postgresql.dialect()  # type: ignore[no-untyped-call]
    definitions = ", ".join(f"{name} {_type(table, c, dialect)}" for c, name in zip(columns, _names(table, columns),
                                                                                    strict=True))
    return (f"ROWS FROM (json_to_recordset(CAST(:{ROWS_PARAM} AS json)) AS ({definitions})) "
            f"WITH ORDINALITY AS {alias} ({', '.join(_names(table, columns))}, ord)")


def column_names(table: Table, columns: tuple[str, ...]) -> str:
    """The columns' quoted names, comma-separated (an INSERT's column list)."""
    return ", ".join(_names(table, columns))


def selected(table: Table, columns: tuple[str, ...], alias: str) -> str:
    """The columns of `recordset` as an INSERT .. SELECT selects them: a JSON column's None stays JSON null,
    as SQLAlchemy stores it (json_to_recordset reads it as SQL NULL)."""
    return ", ".join(f"coalesce({alias}.{name}, 'null')" if isinstance(table.c[c].type, JSON) else f"{alias}.{name}"
                     for c, name in zip(columns, _names(table, columns), strict=True))


@functools.cache
def _recordset_insert(table: Table, columns: tuple[str, ...], skip_existing: str | None) -> Executable:
    conflict = f' ON CONFLICT ("{table.c[skip_existing].name}") DO NOTHING' if skip_existing else ""
    return text(f'INSERT INTO "{table.name}" ({column_names(table, columns)}) '
                f"SELECT {selected(table, columns, 'r')} FROM {recordset(table, columns, 'r')} ORDER BY r.ord"
                f"{conflict}")


def _names(table: Table, columns: tuple[str, ...]) -> list[str]:
    return [f'"{table.c[c].name}"' for c in columns]


def _type(table: Table, column: str, dialect: Dialect) -> str:
    kind = table.c[column].type
    if isinstance(kind, JSON):
        return "json"
    name = kind.compile(dialect=dialect)
    return "text" if name.startswith("VARCHAR") or name == "TEXT" else name
