"""Fresh, throw-away databases on the servers this machine kind runs (SQLite, PostgreSQL, MariaDB)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg
import pymysql

from modules.storage.db import Database

PG_ADMIN = "host=127.0.0.1 port=5432 user=postgres dbname=test"
MARIADB = {"host": "127.0.0.1", "port": 3306, "user": "root", "password": ""}


@contextmanager
def fresh_database(kind: str, tmp_path: Path) -> Iterator[str]:
    """Yield the URL of an empty database of `kind`; drop it afterwards."""
    name = f"t_{uuid.uuid4().hex[:12]}"
    if kind == "sqlite":
        yield f"sqlite:///{tmp_path / (name + '.db')}"
    elif kind == "postgresql":
        with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        try:
            yield f"postgresql+psycopg://postgres@127.0.0.1:5432/{name}"
        finally:
            with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    elif kind == "mariadb":
        conn = pymysql.connect(**MARIADB, autocommit=True)
        try:
            conn.cursor().execute(f"CREATE DATABASE `{name}` CHARACTER SET utf8mb4")
        finally:
            conn.close()
        try:
            yield f"mysql+pymysql://root@127.0.0.1:3306/{name}"
        finally:
            conn = pymysql.connect(**MARIADB, autocommit=True)
            try:
                conn.cursor().execute(f"DROP DATABASE IF EXISTS `{name}`")
            finally:
                conn.close()
    else:
        raise ValueError(kind)


@contextmanager
def migrated_database(kind: str, tmp_path: Path) -> Iterator[Database]:
    """A fresh database of `kind` with the project's schema, disposed of and dropped afterwards."""
    with fresh_database(kind, tmp_path) as url:
        database = Database(url)
        try:
            database.migrate()
            yield database
        finally:
            database.dispose()
