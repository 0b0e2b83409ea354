"""Group commit: the writes of many writers of one process, in one transaction per short batch.

A transaction costs far more than the rows in it (the pool checkout, SQLite's writer lock,
the commit), so a process that streams hundreds of replies at once cannot afford one per event.
Writers queue their rows; one of them at a time leads: it takes what is queued (up to
`max_rows` rows), inserts it with one statement per table and commits, then wakes every
writer of the batch, while the next writers queue up for the next batch. A writer returns only
once its rows are durable, so it can deliver them after that, in its own order. A writer may also
hand over a step (a short function of the session), or a value for a batch step, which runs once for
all the values of a batch that name it (the sends of a batch: their receivers locked in one statement,
their messages inserted in one). When a batch fails, its writers are retried one by one, so one bad
row (a duplicate key) fails only its writer. A writer killed while it leads (its green thread, a deadline of
its caller) hands the rest of its batch to the next leader, so it fails none but its own.
Rows may also be deferred: queued without a waiting writer, they go out with the next batch anyone
commits (the usage ledger's row of a model request rides with the turn's next event: no commit of its
own); `flush_deferred` commits them when no other write came.

On SQLite, under load, a leader first waits `gather_s` (GROUP_COMMIT_GATHER_MS) for more writers, as
PostgreSQL's `commit_delay` does. Without it, 500 streams fell in 10 of 25 runs into a convoy: each stream's
steps (its release, its turn's claim, its delivery's record) reached the queue a few at a time, every batch
carried one or two streams' items, and the process committed 800 batches where 90 did otherwise, each with
its own transaction and statements, at up to 80 % more CPU a stream (bench/load.py, "database commits").
The wait applies only while the batches of the last `BUSY_WINDOW_S` carried `BUSY_WRITERS` writers or more, two
a batch on average or more: a quiet server's writes, and a single writer's however fast, commit at once. Other
databases have none: their batches gather by themselves while a commit waits on the network (with the wait,
300 streams on PostgreSQL took 1-2 ms more CPU a stream and 1 s more to complete, twice).
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from sqlalchemy import Table, insert
from sqlalchemy.orm import Session

from modules.storage.bulk_insert import insert_rows
from modules.storage.db import Database, DatabaseUnavailable

T = TypeVar("T")
DEFAULT_MAX_ROWS = 400
STEP_ROWS = 8
BUSY_WINDOW_S = 0.05
BUSY_WRITERS = 20


@dataclass(eq=False)  # compared by identity: two writers' equal rows are two items
class _Pending:
    """One writer's part of a batch: rows for a table, or a step run on the batch's session."""

    table: Table | None = None
    rows: list[dict[str, Any]] = field(default_factory=list)
    step: Callable[[Session], Any] | None = None
    batch_step: Callable[[Session, list[Any]], list[Any]] | None = None  # with `value`: see `call_batched`
    value: Any = None
    one_statement: bool = False  # the batch step runs a single statement (see `call_batched`)
    result: Any = None
    # A flag, not an Event: nobody waits on an item (its writer waits on `wake`), and an Event per row batch
    # (a Condition and its lock) was about 2.5 % of the CPU of 500 streams (issue 26).
    done: bool = False
    error: BaseException | None = None
    wake: threading.Event | None = None  # its writer's: set when the item is done or the writer may lead
    deferred: bool = False  # no writer waits for it (`defer`)

    @property
    def size(self) -> int:
        """Rows, for a batch's bound; a step (a turn's end: several statements) weighs STEP_ROWS."""
        return len(self.rows) or (STEP_ROWS if self.step is not None else 1)


class GroupCommit:
    def __init__(self, db: Database, *, max_rows: int = DEFAULT_MAX_ROWS, gather_s: float = 0.0):
        """`gather_s`: how long a leader waits for more writers while the process is busy, on SQLite (see the
        module)."""
        self._db = db
        self._max_rows = max_rows
        self._gather_s = gather_s if db.is_sqlite else 0.0
        self._recent: deque[tuple[float, int]] = deque()  # (commit time, writers) of recent batches: leaders only
        self._lock = threading.Lock()
        self._queue: list[_Pending] = []
        self._leading = False  # a writer is committing a batch right now
        self.batches = 0  # transactions written, for benchmarks and tests
        self.rows = 0
        self.deferred_lost = 0  # deferred rows a failed batch could not write (other than an outage)

    def insert(self, table: Table, rows: list[dict[str, Any]], *, step: Callable[[Session], Any] | None = None) -> None:
        """Insert `rows` into `table`; returns once they are committed, raises what the write raised. `step`
        (as for `call`) is queued with the rows, so both go out in one batch: one wait instead of two."""
        items = [_Pending(table, rows)] + ([_Pending(step=step)] if step is not None else [])
        self._submit(items)
        error = next((item.error for item in items if item.error is not None), None)
        if error is not None:
            raise error

    def insert_each(self, table: Table, writers: list[list[dict[str, Any]]]) -> list[BaseException | None]:
        """Insert the rows of several writers at once; each succeeds or fails on its own (the error, or None)."""
        items = [_Pending(table, rows) for rows in writers if rows]
        self._submit(items)
        errors = iter([item.error for item in items])
        return [next(errors) if rows else None for rows in writers]

    def defer(self, table: Table, rows: list[dict[str, Any]]) -> None:
        """Queue `rows` for the next batch anyone commits, without waiting for it."""
        if rows:
            with self._lock:
                self._queue.append(_Pending(table, rows, deferred=True))

    def has_deferred(self) -> bool:
        with self._lock:
            return any(item.deferred for item in self._queue)

    def flush_deferred(self) -> None:
        """Commit the deferred rows still queued (none: nothing is written)."""
        if self.has_deferred():
            self.call(_nothing)

    def call(self, step: Callable[[Session], T]) -> T:
        """Run `step` inside a batch's transaction; returns its result once committed. A step may run twice
        (again on its own when another step of its batch failed), so it must do nothing but database work."""
        item = _Pending(step=step)
        self._submit([item])
        if item.error is not None:
            raise item.error
        result: T = item.result
        return result

    def call_batched(self, batch_step: Callable[[Session, list[Any]], list[Any]], value: Any,
                     *, one_statement: bool = False) -> Any:
        """Run `batch_step` once per batch on the values of every writer of the batch that names it (equal
        functions: a bound method names one), in queue order; returns this value's result once committed.
        `batch_step` returns one result per value; an exception it returns for a value is raised to that
        writer alone (one it raises fails the batch, whose writers are then retried one by one, so it may run
        twice, and must do nothing but database work). `one_statement`: the step runs a single statement (on
        this database), so a batch of nothing else is that statement alone (`Database.write`)."""
        item = _Pending(batch_step=batch_step, value=value, one_statement=one_statement)
        self._submit([item])
        if item.error is not None:
            raise item.error
        if isinstance(item.result, BaseException):
            raise item.result
        return item.result

    def _submit(self, items: list[_Pending]) -> None:
        """Queue the items; then either lead (commit what is queued, own items included) or follow (wait for
        the leader of the moment). Alone, a writer commits at once in its own thread, as without batching;
        under load, whoever queued while a batch committed goes out together in the next one."""
        if not items:
            return
        wake = threading.Event()
        for item in items:
            item.wake = wake
        # The leader's transaction is bounded by the database's deadline; this bounds a writer stuck behind it.
        limit = time.monotonic() + self._db.timeout_s * 3 + 1
        with self._lock:
            self._queue.extend(items)
        try:
            while True:
                with self._lock:
                    if _all_done(items):
                        return
                    lead = not self._leading
                    self._leading = True
                if lead:
                    self._lead()
                else:
                    self._follow(items, wake, limit)
        except BaseException:  # this writer was killed (its green thread, a deadline of its caller)
            self._abandon(items)
            raise

    def _lead(self) -> None:
        """Write one batch as its leader. First a yield: under eventlet nothing else runs while a batch is
        written on SQLite (no I/O to wait on), so the writers woken by the previous batch queue up now and
        share this one. A leader killed mid-batch leaves its batch to the next: the others' items go back to
        the queue's front unless the commit had begun (then its outcome is unknown, and they hear so)."""
        batch: list[_Pending] = []
        committing: list[_Pending] = []  # the items of the commit under way, if one is
        try:
            time.sleep(0)
            if self._gather_s > 0 and self._busy():
                time.sleep(self._gather_s)
            with self._lock:
                count = 0
                while self._queue and (not batch or count + self._queue[0].size <= self._max_rows):
                    batch.append(self._queue.pop(0))
                    count += batch[-1].size
            self._write(batch, committing)
        finally:
            unknown = [item for item in committing if not item.done]
            if unknown:
                self._settle(unknown, DatabaseUnavailable("the writer of the batch stopped during its commit"))
            with self._lock:
                self._queue[:0] = [item for item in batch if not item.done]
                self._leading = False
                self._wake_next()

    def _busy(self) -> bool:
        """Whether the batches of the last BUSY_WINDOW_S carried BUSY_WRITERS writers or more, two a batch on
        average or more (leaders only)."""
        since = time.monotonic() - BUSY_WINDOW_S
        while self._recent and self._recent[0][0] < since:
            self._recent.popleft()
        writers = sum(count for _, count in self._recent)
        return writers >= BUSY_WRITERS and writers >= 2 * len(self._recent)

    def _wake_next(self) -> None:
        """The writer of the oldest queued item leads next (deferred items have none); the others sleep on.
        Called with the lock held."""
        next_wake = next((item.wake for item in self._queue if item.wake is not None), None)
        if next_wake is not None:
            next_wake.set()

    def _abandon(self, items: list[_Pending]) -> None:
        """A killed writer's items still queued leave the queue (nobody waits for them), and since the next
        leader may have been woken in its place, one is woken again."""
        with self._lock:
            mine = {id(item) for item in items}
            left = [item for item in self._queue if id(item) in mine]
            self._queue = [item for item in self._queue if id(item) not in mine]
            if not self._leading:
                self._wake_next()
        self._settle(left, DatabaseUnavailable("its writer stopped before the batch"))

    def _follow(self, items: list[_Pending], wake: threading.Event, limit: float) -> None:
        """Sleep until this writer's items are done or it may lead. Past `limit` its queued items fail; items
        already in a batch end with it (the leader's transaction is bounded by the database's deadline)."""
        left = limit - time.monotonic()
        if left > 0:
            wake.wait(left)
        else:
            with self._lock:
                for item in items:
                    if not item.done and item in self._queue:
                        self._queue.remove(item)
                        item.error = DatabaseUnavailable("the database did not take the batch in time")
                        item.done = True
            if not _all_done(items):
                wake.wait()
        wake.clear()

    def _write(self, batch: list[_Pending], committing: list[_Pending]) -> None:
        try:
            self._commit(batch, committing)
        except DatabaseUnavailable as exc:  # the database is away: every writer of the batch hears it
            self._settle(self._requeue_deferred(batch), exc)
            return
        except Exception as exc:
            if len(batch) == 1:
                self._settle(batch, exc)
                return
            for item in batch:  # one bad writer (a duplicate key) must not fail the others
                try:
                    self._commit([item], committing)
                except Exception as one:
                    self._settle([item], one)
                else:
                    self._settle([item], None)
            return
        self._settle(batch, None)

    def _commit(self, batch: list[_Pending], committing: list[_Pending]) -> None:
        """One transaction for the batch; `committing` holds its items once its commit begins."""
        by_table: dict[str, tuple[Table, list[dict[str, Any]]]] = {}
        by_step: dict[Callable[[Session, list[Any]], list[Any]], list[_Pending]] = {}
        for item in batch:
            if item.batch_step is not None:
                by_step.setdefault(item.batch_step, []).append(item)
            elif item.table is not None:
                by_table.setdefault(item.table.name, (item.table, []))[1].extend(item.rows)
        one_statement = len(by_step) == 1 and all(item.one_statement for item in batch)
        with self._db.write(first=True, one_statement=one_statement) as s:
            if one_statement:  # committed once sent
                committing[:] = batch
            # Steps in queue order, a batch step where its first value queued: a drain sees the sends queued
            # before it (plain rows go last: no step reads them).
            for item in batch:
                if item.step is not None:
                    item.result = item.step(s)
                elif item.batch_step is not None and (items := by_step.pop(item.batch_step, None)):
                    for one, result in zip(items, item.batch_step(s, [i.value for i in items]), strict=True):
                        one.result = result
            for table, rows in by_table.values():
                insert_rows(s.connection(), table, rows, insert(table))
            committing[:] = batch
        self.batches += 1
        # Writers, not items: a writer's rows and step are two items, a deferred row rides with one (no wake).
        self._recent.append((time.monotonic(), len({id(item.wake) for item in batch if item.wake is not None})))
        self.rows += sum(len(rows) for _, rows in by_table.values())

    def _requeue_deferred(self, batch: list[_Pending]) -> list[_Pending]:
        """Deferred rows wait in the queue for the database to come back; the rest of the batch is returned."""
        deferred = [item for item in batch if item.deferred]
        if deferred:
            with self._lock:
                self._queue[:0] = deferred
        return [item for item in batch if not item.deferred]

    def _settle(self, batch: list[_Pending], error: BaseException | None) -> None:
        for item in batch:
            if item.deferred and error is not None:
                self.deferred_lost += 1
            item.error = error
            item.done = True
            if item.wake is not None:
                item.wake.set()


def _nothing(_session: Session) -> None:
    """The step of a batch committed only for the deferred rows queued with it."""


def _all_done(items: list[_Pending]) -> bool:
    return all(item.done for item in items)
