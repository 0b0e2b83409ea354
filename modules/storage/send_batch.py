"""A batch of sends into the durable queues: the receivers share-locked, then the messages of the live ones
queued (docs/ARCHITECTURE.md, "Routing").

On PostgreSQL that is one statement, a data-modifying CTE: its insert reads the receivers' rows as the lock
took them, so a termination committed first keeps its messages out, and one that comes later waits for the
commit and discards them with the queue. Elsewhere the lock and the insert are two statements."""

from __future__ import annotations

import functools
from typing import Any

from sqlalchemy import TextClause, text
from sqlalchemy.orm import Session

from modules.storage import agents as agent_store
from modules.storage import pending_messages as queue
from modules.storage.agents import AGENTS, ReceiverRow
from modules.storage.bulk_insert import column_names, recordset, recordset_params, selected


def one_statement(dialect: str) -> bool:
    """Whether `queue_sends_in` is one statement on this database (a batch of sends alone needs no
    transaction around it: `GroupCommit.call_batched`)."""
    return dialect == "postgresql"


def queue_sends_in(session: Session, receiver_ids: set[str], messages: list[dict[str, Any]]) -> dict[str, ReceiverRow]:
    """Share-lock the receivers and queue the messages (`PendingMessageRow` column values, each id once, in
    list order, an id queued before skipped) whose receiver exists and is not terminated; returns the
    receivers found, by id, as read under the lock."""
    if not one_statement(session.get_bind().dialect.name):
        receivers = agent_store.lock_many_for_queueing_in(session, receiver_ids)
        queue.queue_in(session, [m for m in messages if _live(receivers.get(m["target_agent_id"]))])
        return receivers
    rows = queue.queue_rows(messages)
    params: dict[str, Any] = {"ids": sorted(receiver_ids)}
    if rows:
        params.update(recordset_params(queue.QUEUE, rows))
    result = session.connection().execute(_lock_and_queue(tuple(rows[0]) if rows else ()), params)
    return {row.id: row for row in result}


def _live(receiver: ReceiverRow | None) -> bool:
    return receiver is not None and not receiver.terminated


@functools.cache
def _lock_and_queue(columns: tuple[str, ...]) -> TextClause:
    """The receivers locked FOR SHARE in a CTE that the insert reads (so the locks come first), the rows in
    list order (`seq`, the arrival order, follows it); without rows, the lock alone."""
    a = {c: f'"{AGENTS.c[c].name}"' for c in ("id", "display_name", "terminated", "state")}
    lock = (f'WITH receivers AS MATERIALIZED (SELECT {a["id"]} AS id, {a["display_name"]} AS display_name, '
            f'{a["terminated"]} AS terminated, {a["state"]} AS state FROM "{AGENTS.name}" '
            f'WHERE {a["id"]} = ANY(CAST(:ids AS text[])) FOR SHARE)')
    if not columns:
        return text(f"{lock} SELECT id, display_name, terminated, state FROM receivers")
    table, target = queue.QUEUE, f'm."{queue.QUEUE.c.target_agent_id.name}"'
    return text(
        f"{lock}, queued AS (INSERT INTO \"{table.name}\" ({column_names(table, columns)}) "
        f"SELECT {selected(table, columns, 'm')} FROM {recordset(table, columns, 'm')} "
        f"WHERE EXISTS (SELECT 1 FROM receivers r WHERE r.id = {target} AND NOT r.terminated) ORDER BY m.ord "
        f'ON CONFLICT ("{table.c.id.name}") DO NOTHING) '
        "SELECT id, display_name, terminated, state FROM receivers")
