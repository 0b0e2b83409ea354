"""Task records and their durable event logs."""

from __future__ import annotations

from functools import lru_cache
from typing import Any, cast

from sqlalchemy import Row, Table, Update, bindparam, func, insert, select, update
from sqlalchemy.orm import Session

from modules.event_catalogue import SuggestionsEvent
from modules.statuses import ACTIVE_TASK_STATUSES, FINAL_TASK_STATUSES, TaskStatus
from modules.storage.bulk_insert import insert_rows
from modules.storage.db import Database
from modules.storage.models import Task, TaskEvent
from modules.storage.records import new_id, now
from modules.storage.results import rowcount
from modules.storage.task_meta import TaskMeta

# A task's states, by their names here (defined once in modules/statuses.py).
PENDING, RUNNING = TaskStatus.PENDING, TaskStatus.RUNNING
SUCCEEDED, FAILED, STOPPED = TaskStatus.SUCCEEDED, TaskStatus.FAILED, TaskStatus.STOPPED
ACTIVE_STATUSES = ACTIVE_TASK_STATUSES
FINAL_STATUSES = FINAL_TASK_STATUSES

# Declarative mapping types `__table__` as a FromClause; a mapped class's is its Table.
TASKS = cast(Table, Task.__table__)
TASK_EVENTS = cast(Table, TaskEvent.__table__)  # (the event log's group commit writes it too)
# Statements every turn runs, built once (modules/storage/agents.py says why).
_STILL_OWNED = select(func.count()).select_from(TASKS).where(
    TASKS.c.id == bindparam("task"), TASKS.c.owner == bindparam("owner"), TASKS.c.status.in_(ACTIVE_STATUSES))
_ACTIVE_OF_AGENT = select(TASKS.c.id).where(TASKS.c.agent_id == bindparam("agent"),
                                            TASKS.c.status.in_(ACTIVE_STATUSES)) \
    .order_by(TASKS.c.created_at.desc()).limit(1)
# Every claim writes a task: the ORM's add and flush for it were about 2 % of 500 streams' CPU (issue 26).
_INSERT_TASK = insert(TASKS)
_INSERT_EVENTS = insert(TASK_EVENTS)


def create_task_in(session: Session, *, conversation_id: str, agent_id: str, task_type: str,
                   trigger_message_id: str | None = None, owner: str | None = None,
                   task_id: str | None = None, meta: TaskMeta | None = None, running: bool = False) -> Task:
    """A pending task (`running`: one that starts now), written inside the caller's transaction (with its trigger
    message); the record returned is not in the session (nothing else of it is written there)."""
    created = now()
    values: dict[str, Any] = dict(
        id=task_id or new_id(), conversation_id=conversation_id, agent_id=agent_id, task_type=task_type,
        status=RUNNING if running else PENDING, trigger_message_id=trigger_message_id, error=None,
        meta=meta.dump() if meta is not None else None, owner=owner, stop_requested=False, created_at=created,
        started_at=created if running else None, finished_at=None,
    )
    session.connection().execute(_INSERT_TASK, values)
    return Task(**values)


def get_task(db: Database, task_id: str) -> Task | None:
    with db.read() as s:
        return s.get(Task, task_id)


def list_tasks(db: Database, conversation_id: str, *, active_only: bool = False) -> list[Task]:
    query = select(Task).where(Task.conversation_id == conversation_id)
    if active_only:
        query = query.where(Task.status.in_(ACTIVE_STATUSES))
    with db.read() as s:
        return list(s.scalars(query.order_by(Task.created_at, Task.id)))


def active_tasks(db: Database) -> list[Row[str, str | None, str]]:
    """The active tasks' `id`, `owner` and `agent_id`, oldest first: what the watchdog's sweep looks at every
    few seconds (whole ORM rows of hundreds of running turns cost it the most of its work, issue 26)."""
    with db.read() as s:
        return list(s.connection().execute(select(Task.id, Task.owner, Task.agent_id)
                                           .where(Task.status.in_(ACTIVE_STATUSES)).order_by(Task.created_at)))


def set_task_status(db: Database, task_id: str, status: str, *, error: dict[str, Any] | None = None,
                    expected: tuple[str, ...] | None = None) -> bool:
    """Compare-and-set the status; False when the task was not in an `expected` status."""
    with db.write() as s:
        return set_task_status_in(s, task_id, status, error=error, expected=expected)


def set_task_status_in(session: Session, task_id: str, status: str, *, error: dict[str, Any] | None = None,
                       expected: tuple[str, ...] | None = None, owner: str | None = None) -> bool:
    """Compare-and-set inside the caller's transaction; with `owner`, only a task that process owns."""
    values: dict[str, Any] = {"status": status}
    if status == RUNNING:
        values["started_at"] = now()
    if status in FINAL_STATUSES:
        values["finished_at"] = now()
    if error is not None:
        values["error"] = error
    statement = _status_update(tuple(values), expected or (), owner is not None)
    params = {f"new_{column}": value for column, value in values.items()}
    return rowcount(session.execute(statement, {**params, "task": task_id, "by_owner": owner})) == 1


@lru_cache(maxsize=64)
def _status_update(columns: tuple[str, ...], expected: tuple[str, ...], by_owner: bool) -> Update:
    """`set_task_status_in`'s statement for one shape of its arguments, built once."""
    query = TASKS.update().where(TASKS.c.id == bindparam("task"))
    if expected:
        query = query.where(TASKS.c.status.in_(expected))
    if by_owner:
        query = query.where(TASKS.c.owner == bindparam("by_owner"))
    return query.values({column: bindparam(f"new_{column}") for column in columns})


def next_event_idx(db: Database, task_id: str) -> int:
    with db.read() as s:
        return next_event_idx_in(s, task_id)


def next_event_idx_in(session: Session, task_id: str) -> int:
    last = session.scalar(select(func.max(TaskEvent.idx)).where(TaskEvent.task_id == task_id))
    return 0 if last is None else last + 1


def insert_events(db: Database, task_id: str, first_idx: int, events: list[tuple[str, dict[str, Any]]]) -> None:
    """Write consecutive events of one task in one transaction."""
    if not events:
        return
    with db.write() as s:
        insert_events_in(s, task_id, first_idx, events)


def event_rows(task_id: str, runs: list[tuple[int, list[tuple[str, dict[str, Any]]]]]) -> list[dict[str, Any]]:
    """The `TASK_EVENTS` rows of a task's runs of consecutive events, each run from its first index on."""
    ts = now()
    return [dict(task_id=task_id, idx=first + i, type=event_type, data=data, ts=ts)
            for first, events in runs for i, (event_type, data) in enumerate(events)]


def insert_events_in(session: Session, task_id: str, first_idx: int, events: list[tuple[str, dict[str, Any]]]) -> None:
    """A task's events from `first_idx` on, in one statement (a turn's start and its end write theirs so)."""
    insert_rows(session.connection(), TASK_EVENTS, event_rows(task_id, [(first_idx, events)]), _INSERT_EVENTS)


def list_events(db: Database, task_id: str, from_idx: int = 0, limit: int = 5000) -> list[TaskEvent]:
    with db.read() as s:
        return list(s.scalars(
            select(TaskEvent).where(TaskEvent.task_id == task_id, TaskEvent.idx >= from_idx)
            .order_by(TaskEvent.idx).limit(limit)
        ))


def request_stop(db: Database, task_id: str) -> bool:
    with db.write() as s:
        return rowcount(s.execute(update(Task).where(Task.id == task_id, Task.status.in_(ACTIVE_STATUSES))
                         .values(stop_requested=True))) == 1


def stop_requested(db: Database, task_ids: list[str]) -> list[str]:
    if not task_ids:
        return []
    with db.read() as s:
        return list(s.scalars(select(Task.id).where(Task.id.in_(task_ids), Task.stop_requested.is_(True))))


def active_task_of_agent(db: Database, agent_id: str) -> str | None:
    with db.read() as s:
        return active_task_of_agent_in(s, agent_id)


def active_task_of_agent_in(s: Session, agent_id: str) -> str | None:
    return s.scalars(_ACTIVE_OF_AGENT, {"agent": agent_id}).first()


def still_owned(db: Database, task_id: str, owner: str) -> bool:
    """Whether the task is still in progress under this owner (not taken over by another process)."""
    with db.read() as s:
        return still_owned_in(s, task_id, owner)


def still_owned_in(session: Session, task_id: str, owner: str) -> bool:
    """`still_owned` inside the caller's transaction (a write that must not follow a takeover)."""
    return session.scalar(_STILL_OWNED, {"task": task_id, "owner": owner}) == 1


def offered_suggestions(db: Database, task_id: str, reply_message_id: str | None) -> list[str]:
    """The chips a task's `suggestions` event offered after the reply `reply_message_id`."""
    with db.read() as s:
        rows = s.scalars(select(TaskEvent.data)
                         .where(TaskEvent.task_id == task_id, TaskEvent.type == SuggestionsEvent.TYPE)
                         .order_by(TaskEvent.idx.desc()))
        for data in rows:
            if isinstance(data, dict) and data.get("message_id") == reply_message_id:
                return [q for q in data.get("questions") or [] if isinstance(q, str)]
    return []


def reread_in(session: Session, task_id: str) -> Task | None:
    """The task as the caller's transaction sees it now (not as its session cached it)."""
    return session.get(Task, task_id, populate_existing=True)
