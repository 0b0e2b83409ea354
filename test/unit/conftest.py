"""Unit tests read SQLite with `reverse_unordered_selects`: a query that forgot its ORDER BY returns its rows
backwards, so a lost `order_by` fails here on SQLite, not only by luck on PostgreSQL."""

from __future__ import annotations

import pytest
from sqlalchemy import event
from sqlalchemy.engine import Engine


def _reverse_unordered(dbapi_connection, _record) -> None:
    if type(dbapi_connection).__module__.startswith("sqlite3"):
        dbapi_connection.execute("PRAGMA reverse_unordered_selects = ON")


@pytest.fixture(autouse=True)
def reverse_unordered_sqlite_selects():
    event.listen(Engine, "connect", _reverse_unordered)
    yield
    event.remove(Engine, "connect", _reverse_unordered)
