"""Engine, sessions and migrations for SQLite, PostgreSQL and MariaDB/MySQL.

SQLite allows one writer at a time; instead of letting green threads spin in
SQLite's busy handler (a C-level wait that stalls every green thread under
eventlet), writers are serialized by an in-process lock, and a write waits for
another process's lock with `BEGIN IMMEDIATE` retried in Python (a green
sleep). Other databases get no lock: their own row locks suffice.

Every wait is bounded by `timeout_s` (DB_TIMEOUT_S): connecting, the pool's
checkout, each statement (server-side where the database has a setting, and
as a whole-transaction deadline under eventlet), SQLite's file lock. A
transaction that fails for want of the database raises DatabaseUnavailable
and makes `health` look at once.

On PostgreSQL and MariaDB the process's heartbeat writes through an engine of its own (`write_control`: one
connection, never shared), so a pool drained by hundreds of streams cannot hold it back until a peer judges
the process gone and takes its work over (README, "Several processes").
"""

from __future__ import annotations

import logging
import math
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config
from sqlalchemy import create_engine, event, text
from sqlalchemy.engine import Connection, Engine, make_url
from sqlalchemy.exc import DBAPIError, InterfaceError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from sqlalchemy.orm import Session, sessionmaker
from sqlalchemy.pool import NullPool

from modules.storage.deadline import DeadlineExceeded, deadline
from modules.storage.health import DatabaseHealth
from modules.storage.statement_counts import StatementCounts

log = logging.getLogger(__name__)

MIGRATIONS_DIR = Path(__file__).resolve().parent / "migrations"
DEFAULT_TIMEOUT_S = 5.0
DEFAULT_POOL_SIZE = 20  # DB_POOL_SIZE: connections kept; as many again may open under load (DB_POOL_OVERFLOW)
SQLITE_BUSY_MS = 100  # the longest C-level wait on SQLite's lock; longer waits are green (see _begin_immediate)
MIGRATION_LOCK_WAIT_S = 120.0
PROBER_TIMEOUT_S = 1.5  # the health prober's patience: a busy machine must not look like an outage
_UNAVAILABLE = (OperationalError, InterfaceError, PoolTimeout, DeadlineExceeded, sqlite3.OperationalError)
# A deadlock ends the one transaction the database chose to roll back, and the database answers: its error is
# raised as the driver gave it (an OperationalError all the same), so the group commit retries each writer of
# that batch alone instead of failing them all as during an outage. PostgreSQL's SQLSTATE; MariaDB's error code.
_DEADLOCK_SQLSTATE = "40P01"
_DEADLOCK_MYSQL = 1213


def deadlocked(exc: BaseException) -> bool:
    """Whether `exc` is the database's report that it rolled back this transaction to break a deadlock."""
    orig = getattr(exc, "orig", None)
    if getattr(orig, "sqlstate", None) == _DEADLOCK_SQLSTATE:
        return True
    args: tuple[Any, ...] = getattr(orig, "args", ())
    return bool(args) and args[0] == _DEADLOCK_MYSQL


def _interrupted(exc: BaseException) -> bool:
    """Whether a deadline's timeout is among the exceptions that led to `exc`."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, DeadlineExceeded) or type(current).__module__.startswith("eventlet"):
            return True
        current = current.__cause__ or current.__context__
    return False


class DatabaseUnavailable(OperationalError):
    """The database did not answer (refused, cut, timed out, locked): a later try may succeed.

    An OperationalError, so code that retries those retries this too."""

    def __init__(self, message: str):
        super().__init__(None, None, Exception(message))
        self.message = message

    def __str__(self) -> str:
        return self.message


class MigrationLockTimeout(RuntimeError):
    """Another process held the migration lock for too long: running migrations anyway could run them twice."""


def _normalise_url(url: str) -> str:
    """Pick the drivers this project pins when a URL names only the database kind."""
    parsed = make_url(url)
    if parsed.drivername == "postgresql":
        parsed = parsed.set(drivername="postgresql+psycopg")
    elif parsed.drivername in ("mysql", "mariadb"):
        parsed = parsed.set(drivername=f"{parsed.drivername}+pymysql")
    return parsed.render_as_string(hide_password=False)


def _connect_args(dialect: str, timeout_s: float, *, statements_bounded: bool) -> dict[str, Any]:
    """Driver settings that bound connecting and, unless for migrations, each statement."""
    connect_s = max(2, math.ceil(timeout_s))  # libpq and PyMySQL take whole seconds (libpq at least 2)
    if dialect == "postgresql":
        args: dict[str, Any] = {"connect_timeout": connect_s}
        if statements_bounded:
            ms = int(timeout_s * 1000)
            # A session that vanished mid-transaction (its client cut off) releases its row locks too.
            args["options"] = f"-c statement_timeout={ms} -c idle_in_transaction_session_timeout={max(ms * 4, 10000)}"
        return args
    if dialect in ("mysql", "mariadb"):
        args = {"charset": "utf8mb4", "connect_timeout": connect_s}
        if statements_bounded:
            args.update(read_timeout=connect_s, write_timeout=connect_s)
        return args
    return {}


class Database:
    def __init__(self, url: str, *, echo: bool = False, timeout_s: float = DEFAULT_TIMEOUT_S,
                 pool_size: int = DEFAULT_POOL_SIZE, pool_overflow: int | None = None):
        self.url = _normalise_url(url)
        parsed = make_url(self.url)
        self.dialect = parsed.get_backend_name()
        self.is_sqlite = self.dialect == "sqlite"
        self.timeout_s = timeout_s
        # No pre-ping (a round trip per checkout): a dead connection fails its transaction, which SQLAlchemy
        # takes as a disconnect and so discards every connection pooled before it (see `_bounded`).
        kwargs: dict[str, Any] = {"echo": echo}
        if self.is_sqlite:
            if parsed.database and parsed.database != ":memory:":
                Path(parsed.database).parent.mkdir(parents=True, exist_ok=True)
            kwargs["connect_args"] = {"check_same_thread": False, "timeout": SQLITE_BUSY_MS / 1000}
        else:
            kwargs.update(pool_size=pool_size, max_overflow=pool_size if pool_overflow is None else pool_overflow,
                          pool_recycle=1800, pool_timeout=timeout_s,
                          connect_args=_connect_args(self.dialect, timeout_s, statements_bounded=True))
        self.engine: Engine = create_engine(self.url, **kwargs)
        if self.is_sqlite:
            event.listen(self.engine, "connect", _sqlite_pragmas)
        self._sessions = sessionmaker(self.engine, expire_on_commit=False)
        # PostgreSQL reads (and writes of one statement) in autocommit: no BEGIN and no COMMIT or ROLLBACK
        # around them (two round trips of three for a one-statement read), and nothing lost, since at READ
        # COMMITTED each statement takes its own snapshot inside a transaction too. SQLite's reads are statements
        # of their own already (the driver begins no transaction); MariaDB's REPEATABLE READ holds one snapshot
        # for a transaction, so its reads keep theirs.
        self._statement_sessions = sessionmaker(
            self.engine.execution_options(isolation_level="AUTOCOMMIT") if self.dialect == "postgresql"
            else self.engine, expire_on_commit=False)
        # SQLite has no pool to drain (its writers queue on one lock, where `first` puts the beat in front).
        self._control_engine: Engine | None = None if self.is_sqlite else create_engine(
            self.url, echo=echo, pool_size=1, max_overflow=0, pool_recycle=1800, pool_timeout=timeout_s,
            connect_args=_connect_args(self.dialect, timeout_s, statements_bounded=True))
        self._control_sessions = sessionmaker(self._control_engine or self.engine, expire_on_commit=False)
        self.statement_counts = StatementCounts()
        for engine in (self.engine, self._control_engine):
            if engine is not None:
                self.statement_counts.watch(engine)
        self._write_lock = threading.RLock() if self.is_sqlite else None
        self._line = threading.Condition()
        self._firsts = 0  # `first` writers waiting for the SQLite write lock
        self.health = DatabaseHealth(lambda: self.probe(PROBER_TIMEOUT_S))

    @property
    def label(self) -> str:
        """The URL without its password, for logs."""
        return make_url(self.url).render_as_string(hide_password=True)

    @contextmanager
    def write(self, *, timeout_s: float | None = None, first: bool = False,
              one_statement: bool = False) -> Iterator[Session]:
        """A short write transaction; committed on success, rolled back on error. `first`: on SQLite, writers
        that come later wait until this one has the lock (the group commit, which writes for many).
        `one_statement`: the caller runs a single statement, which PostgreSQL commits on its own (autocommit:
        no BEGIN and COMMIT round trips); once it is sent, its outcome is the database's."""
        limit = timeout_s or self.timeout_s
        sessions = self._statement_sessions if one_statement else self._sessions
        with self._bounded(limit), self._writer(limit, first), sessions() as session, session.begin():
            if self.is_sqlite:
                _begin_immediate(session, time.monotonic() + limit)
            yield session
        self.statement_counts.committed()

    @contextmanager
    def write_control(self) -> Iterator[Session]:
        """A write that never waits behind ordinary work: the heartbeat's (see the module's docstring). One
        caller at a time (the membership loop's beat)."""
        limit = self.timeout_s
        with self._bounded(limit), self._writer(limit, True), self._control_sessions() as session, session.begin():
            if self.is_sqlite:
                _begin_immediate(session, time.monotonic() + limit)
            yield session
        self.statement_counts.committed()

    @contextmanager
    def read(self, *, timeout_s: float | None = None, transaction: bool = False) -> Iterator[Session]:
        """A session for reading, never committed. On PostgreSQL each of its statements runs on its own
        (autocommit) unless `transaction` is set: a lock that must last until the session ends needs one
        (`pg_advisory_xact_lock`)."""
        sessions = self._sessions if transaction else self._statement_sessions
        with self._bounded(timeout_s or self.timeout_s), sessions() as session:
            yield session

    @contextmanager
    def _bounded(self, limit: float) -> Iterator[None]:
        """The deadline, and one exception type for every way the database can fail to answer."""
        try:
            with deadline(limit):
                yield
        except DatabaseUnavailable:
            self.health.suspect()
            raise
        except _UNAVAILABLE as exc:
            if deadlocked(exc):
                raise
            self.health.suspect()
            raise DatabaseUnavailable(f"the database is unavailable: {_first_line(exc)}") from exc
        except DBAPIError as exc:
            if not _interrupted(exc):
                raise
            # The deadline cut a driver call short (a pre-ping, say) and the driver then refused to clean up
            # ("can't change 'autocommit' now"): that is the database not answering, not a bug.
            self.health.suspect()
            raise DatabaseUnavailable(f"the database is unavailable: {_first_line(exc)}") from exc

    def _writer(self, limit: float, first: bool) -> AbstractContextManager[None]:
        lock = self._write_lock
        if lock is None:
            return nullcontext()
        return self._first_in_line(lock, limit) if first else self._behind_first(lock, limit)

    @contextmanager
    def _first_in_line(self, lock: threading.RLock, limit: float) -> Iterator[None]:
        with self._line:
            self._firsts += 1
        try:
            if not lock.acquire(timeout=limit):
                raise DeadlineExceeded(f"another write held the database for {limit:g} s")
        finally:
            with self._line:
                self._firsts -= 1
                self._line.notify_all()
        try:
            yield
        finally:
            lock.release()

    @contextmanager
    def _behind_first(self, lock: threading.RLock, limit: float) -> Iterator[None]:
        """A plain writer lets a waiting `first` writer take the lock before it (bounded by `limit`)."""
        with self._line:
            self._line.wait_for(lambda: self._firsts == 0, limit)
        with _acquired(lock, limit):
            yield

    def probe(self, timeout_s: float = 0.8) -> str | None:
        """None when the database answers within `timeout_s`, else why not. On SQLite the probe takes the
        write lock, since reads go on while another process holds the file locked."""
        try:
            if self.is_sqlite:
                with self.write(timeout_s=timeout_s):
                    pass
            else:
                with self.read(timeout_s=timeout_s) as s:
                    s.execute(text("SELECT 1"))
            return None
        except DatabaseUnavailable as exc:
            return exc.message
        except Exception as exc:  # an unexpected failure is still no answer
            return _first_line(exc)

    def ping(self, timeout_s: float = 0.8) -> bool:
        return self.probe(timeout_s) is None

    def migrate(self) -> None:
        """Bring the schema to the newest migration; safe when several processes start at once.

        Migrations run on a connection of their own without a statement timeout (a schema change may
        take a while), under a lock that is held, or the start fails: never two migrations at once."""
        cfg = Config()
        cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
        if self.is_sqlite:
            engine, owned = self.engine, False
        else:
            engine = create_engine(self.url, poolclass=NullPool,
                                   connect_args=_connect_args(self.dialect, self.timeout_s, statements_bounded=False))
            owned = True
        try:
            with self._write_lock or nullcontext(), engine.connect() as conn:
                self._lock_migrations(conn)
                try:
                    cfg.attributes["connection"] = conn
                    command.upgrade(cfg, "head")
                    conn.commit()
                finally:
                    self._unlock_migrations(conn)
        finally:
            if owned:
                engine.dispose()

    def _lock_migrations(self, conn: Connection) -> None:
        if self.dialect == "postgresql":
            conn.execute(text("SELECT pg_advisory_lock(727401)"))
        elif self.dialect in ("mysql", "mariadb"):
            waited_until = time.monotonic() + MIGRATION_LOCK_WAIT_S
            while True:
                # 1: ours; 0: still held by another process after the wait; NULL: an error.
                wait = max(1, min(5, math.ceil(waited_until - time.monotonic())))
                got = conn.execute(text("SELECT GET_LOCK('chat_server_migrate', :wait)"), {"wait": wait}).scalar()
                if got == 1:
                    break
                if got is None or time.monotonic() >= waited_until:
                    raise MigrationLockTimeout(
                        "could not take the migration lock 'chat_server_migrate' "
                        f"({'an error' if got is None else f'still held after {MIGRATION_LOCK_WAIT_S:g} s'}); "
                        "another server process may be migrating this database: start again once it is up")
                log.info("another process is migrating the database; waiting for its lock")
        conn.commit()

    def _unlock_migrations(self, conn: Connection) -> None:
        if self.dialect == "postgresql":
            conn.execute(text("SELECT pg_advisory_unlock(727401)"))
        elif self.dialect in ("mysql", "mariadb"):
            conn.execute(text("SELECT RELEASE_LOCK('chat_server_migrate')"))
        conn.commit()

    def dispose(self) -> None:
        self.engine.dispose()
        if self._control_engine is not None:
            self._control_engine.dispose()


@contextmanager
def _acquired(lock: threading.RLock, limit: float) -> Iterator[None]:
    if not lock.acquire(timeout=limit):
        raise DeadlineExceeded(f"another write held the database for {limit:g} s")
    try:
        yield
    finally:
        lock.release()


def _begin_immediate(session: Session, deadline_at: float) -> None:
    """Take SQLite's write lock now, waiting for another process's lock with green sleeps (bounded)."""
    raw = session.connection().connection.driver_connection
    if raw is None:  # the pool invalidated the connection under us
        raise DatabaseUnavailable("the SQLite connection was invalidated")
    while True:
        try:
            raw.execute("BEGIN IMMEDIATE")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) and "busy" not in str(exc):
                raise
            if time.monotonic() >= deadline_at:
                raise DeadlineExceeded("the SQLite database file stayed locked by another connection") from exc
            time.sleep(0.05)


def _first_line(exc: BaseException) -> str:
    cause = getattr(exc, "orig", None) or exc
    return (str(cause).strip().splitlines() or [type(cause).__name__])[0][:300]


def _sqlite_pragmas(dbapi_conn: sqlite3.Connection, _record: object) -> None:
    # Transactions are begun explicitly (BEGIN IMMEDIATE for writes), not by the driver before DML.
    dbapi_conn.isolation_level = None
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute("PRAGMA synchronous=NORMAL")
    cur.execute("PRAGMA foreign_keys=ON")
    cur.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_MS}")
    cur.close()
