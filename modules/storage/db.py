"""Engine, sessions and migrations for SQLite, PostgreSQL and MariaDB/MySQL.

SQLite allows one writer at a time; instead of letting green threads spin in
SQLite's busy handler (a C-level wait that stalls every green thread under
eventlet), writers are serialized by an in-process lock. Other databases get
no lock: their own row locks suffice.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path

from alembic import command
from alembic.config import Config
from sqlalchemy import create_engine, event, text
from sqlalchemy.engine import Engine, make_url
from sqlalchemy.orm import Session, sessionmaker

MIGRATIONS_DIR = Path(__file__).resolve().parent / "migrations"


def _normalise_url(url: str) -> str:
    """Pick the drivers this project pins when a URL names only the database kind."""
    parsed = make_url(url)
    if parsed.drivername == "postgresql":
        parsed = parsed.set(drivername="postgresql+psycopg")
    elif parsed.drivername in ("mysql", "mariadb"):
        parsed = parsed.set(drivername=f"{parsed.drivername}+pymysql")
    return parsed.render_as_string(hide_password=False)


class Database:
    def __init__(self, url: str, *, echo: bool = False):
        self.url = _normalise_url(url)
        parsed = make_url(self.url)
        self.dialect = parsed.get_backend_name()
        self.is_sqlite = self.dialect == "sqlite"
        kwargs: dict = {"echo": echo, "pool_pre_ping": not self.is_sqlite}
        if self.is_sqlite:
            if parsed.database and parsed.database != ":memory:":
                Path(parsed.database).parent.mkdir(parents=True, exist_ok=True)
            kwargs["connect_args"] = {"check_same_thread": False, "timeout": 30}
        else:
            kwargs.update(pool_size=10, max_overflow=20, pool_recycle=1800)
            if self.dialect in ("mysql", "mariadb"):
                kwargs["connect_args"] = {"charset": "utf8mb4"}
        self.engine: Engine = create_engine(self.url, **kwargs)
        if self.is_sqlite:
            event.listen(self.engine, "connect", _sqlite_pragmas)
        self._sessions = sessionmaker(self.engine, expire_on_commit=False)
        self._write_lock = threading.RLock() if self.is_sqlite else None

    @property
    def label(self) -> str:
        """The URL without its password, for /healthz and logs."""
        return make_url(self.url).render_as_string(hide_password=True)

    @contextmanager
    def write(self) -> Iterator[Session]:
        """A short write transaction; committed on success, rolled back on error."""
        with self._write_lock or nullcontext(), self._sessions() as session, session.begin():
            yield session

    @contextmanager
    def read(self) -> Iterator[Session]:
        with self._sessions() as session:
            yield session

    def migrate(self) -> None:
        """Bring the schema to the newest migration; safe when several processes start at once."""
        cfg = Config()
        cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
        with self._write_lock or nullcontext(), self.engine.connect() as conn:
            if self.dialect == "postgresql":
                conn.execute(text("SELECT pg_advisory_lock(727401)"))
            elif self.dialect in ("mysql", "mariadb"):
                conn.execute(text("SELECT GET_LOCK('chat_server_migrate', 60)"))
            conn.commit()
            try:
                cfg.attributes["connection"] = conn
                command.upgrade(cfg, "head")
                conn.commit()
            finally:
                if self.dialect == "postgresql":
                    conn.execute(text("SELECT pg_advisory_unlock(727401)"))
                elif self.dialect in ("mysql", "mariadb"):
                    conn.execute(text("SELECT RELEASE_LOCK('chat_server_migrate')"))
                conn.commit()

    def ping(self) -> bool:
        try:
            with self.engine.connect() as conn:
                conn.execute(text("SELECT 1"))
            return True
        except Exception:
            return False

    def dispose(self) -> None:
        self.engine.dispose()


def _sqlite_pragmas(dbapi_conn, _record) -> None:
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute("PRAGMA synchronous=NORMAL")
    cur.execute("PRAGMA foreign_keys=ON")
    cur.execute("PRAGMA busy_timeout=30000")
    cur.close()
