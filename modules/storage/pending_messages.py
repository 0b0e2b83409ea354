"""The durable per-agent queues: enqueue once, drain in arrival order, take one by compare-and-set.

Draining claims rows with a conditional UPDATE tagged by a fresh token and then
reads back what the token got, so two drainers (green threads or processes)
can never both consume one message.
"""

from __future__ import annotations

import functools
import uuid
from typing import Any, Final, cast

from sqlalchemy import Insert, Row, Table, bindparam, delete, exists, func, select, update
from sqlalchemy.dialects.mysql import insert as mysql_insert
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.orm import Session

from modules.statuses import MessageSource, QueueStatus
from modules.storage.bulk_insert import insert_rows
from modules.storage.db import Database
from modules.storage.models import Message, PendingMessageRow
from modules.storage.records import ASK_CONSUMER_PREFIX, now
from modules.storage.results import rowcount

QUEUED: Final = QueueStatus.QUEUED
CONSUMED: Final = QueueStatus.CONSUMED
# The hot statements (a send, a drain) are built once on the table, without the ORM: executed on the session's
# connection, they cost no ORM compilation or object per message.
QUEUE = cast(Table, PendingMessageRow.__table__)
QUEUE_COLUMNS = (QUEUE.c.seq, QUEUE.c.id, QUEUE.c.conversation_id, QUEUE.c.target_agent_id, QUEUE.c.source_agent_id,
                 QUEUE.c.source_display_name, QUEUE.c.type, QUEUE.c.content, QUEUE.c.question_id,
                 QUEUE.c["metadata"].label("meta"), QUEUE.c.created_at)  # rows read as PendingMessageRow's attributes
_RETURNING_DIALECTS = ("sqlite", "postgresql")  # INSERT/UPDATE .. RETURNING (MariaDB's lists duplicates too)
_CONSUME = QUEUE.update().values(status=CONSUMED, consumed_by=bindparam("token"), consumed_at=bindparam("at"))
_DRAIN = _CONSUME.where(QUEUE.c.target_agent_id == bindparam("agent"), QUEUE.c.status == QUEUED) \
    .returning(*QUEUE_COLUMNS)
_QUEUED_FOR = (QUEUE.c.target_agent_id == bindparam("agent")) & (QUEUE.c.status == QUEUED)
_HAS_QUEUED = select(exists().where(_QUEUED_FOR))
# On the tables, not the mapped classes: an ORM-enabled UPDATE is cloned, and its cache key built, at every execution.
_HISTORY = cast(Table, Message.__table__)
_LAST_WRITTEN = select(func.coalesce(func.max(_HISTORY.c.created_at), 0.0)) \
    .where(_HISTORY.c.agent_id == bindparam("agent"))
_REQUEUE_ANSWERS = QUEUE.update().where(  # at every turn's end
    QUEUE.c.target_agent_id == bindparam("agent"), QUEUE.c.status == CONSUMED,
    QUEUE.c.consumed_by.like(f"{ASK_CONSUMER_PREFIX}%"), QUEUE.c.consumed_at > _LAST_WRITTEN.scalar_subquery()) \
    .values(status=QUEUED, consumed_by=None, consumed_at=None)
_QUEUED_COUNT = select(func.count()).select_from(QUEUE).where(_QUEUED_FOR)


@functools.cache
def _insert_new(dialect: str) -> Insert:
    """INSERT .. that skips an id already queued (a retried send), in one statement on each database."""
    if dialect in ("sqlite", "postgresql"):
        insert = sqlite_insert if dialect == "sqlite" else pg_insert
        return insert(QUEUE).on_conflict_do_nothing(index_elements=[QUEUE.c.id])
    upsert = mysql_insert(QUEUE)
    return upsert.on_duplicate_key_update(id=upsert.inserted.id)


def queue_rows(messages: list[dict[str, Any]], status: QueueStatus = QUEUED) -> list[dict[str, Any]]:
    """The table's rows for `PendingMessageRow` column values, each id once (the first), in list order."""
    rows: dict[str, dict[str, Any]] = {}
    for values in messages:
        if values["id"] not in rows:
            row = {**values, "status": status}
            row["metadata"] = row.pop("meta")
            rows[values["id"]] = row
    return list(rows.values())


def queue_in(session: Session, messages: list[dict[str, Any]], status: QueueStatus = QUEUED) -> None:
    """Add the messages whose ids are new, in list order (so in `seq` order), with one statement; a send's,
    which needs no answer of which were new (delivery is the same either way)."""
    rows = queue_rows(messages, status)
    if rows:
        insert_rows(session.connection(), QUEUE, rows, _insert_new(session.get_bind().dialect.name),
                    skip_existing="id")


def enqueue_in(session: Session, values: dict[str, Any]) -> bool:
    """Add a message unless one with its id exists (a retried send is stored once)."""
    return bool(enqueue_many_in(session, [values]))


def enqueue_many_in(session: Session, messages: list[dict[str, Any]]) -> list[str]:
    """Add the messages whose ids are new, in list order (so in `seq` order), with one statement where the
    database has an upsert that reports what it added; returns the ids added. `messages` are column values
    of `PendingMessageRow`. Two concurrent sends of one id store it once, whichever commits first."""
    rows = queue_rows(messages)
    if not rows:
        return []
    dialect = session.get_bind().dialect.name
    conn = session.connection()
    if dialect in _RETURNING_DIALECTS:
        added = set(conn.execute(_insert_new(dialect).returning(QUEUE.c.id), rows).scalars())
    else:  # MySQL/MariaDB: RETURNING would list the duplicates too, so look first; a racing duplicate is a no-op
        known = set(conn.execute(select(QUEUE.c.id).where(QUEUE.c.id.in_([r["id"] for r in rows]))).scalars())
        fresh = [r for r in rows if r["id"] not in known]
        if fresh:
            conn.execute(_insert_new(dialect), fresh)
        added = {r["id"] for r in fresh}
    return [r["id"] for r in rows if r["id"] in added]


def _drained_by(consumed_by: str) -> str:
    """How the `consumed_by` of every message a drain by `consumed_by` took begins (a unique tail follows)."""
    return f"{consumed_by[:27]}:"


def drain_in(session: Session, agent_id: str, consumed_by: str) -> list[Row[*tuple[Any, ...]]]:
    """Consume every queued message of the agent, oldest first."""
    claim = {"token": f"{_drained_by(consumed_by)}{uuid.uuid4().hex}", "at": now()}
    conn = session.connection()
    if _updates_return(session):  # one round trip: UPDATE .. RETURNING
        return sorted(conn.execute(_DRAIN, {**claim, "agent": agent_id}).all(), key=lambda row: row.seq)
    # MariaDB has no UPDATE .. RETURNING; claiming by primary key keeps InnoDB's gap locks off the senders' inserts.
    seqs = list(session.scalars(select(QUEUE.c.seq).where(QUEUE.c.target_agent_id == agent_id,
                                                           QUEUE.c.status == QUEUED).order_by(QUEUE.c.seq)))
    if not seqs:
        return []
    conn.execute(_CONSUME.where(QUEUE.c.seq.in_(seqs), QUEUE.c.status == QUEUED), claim)
    # Plain rows with the row's attribute names: a long queue drains faster without building ORM objects.
    return list(conn.execute(select(*QUEUE_COLUMNS).where(QUEUE.c.consumed_by == claim["token"])
                             .order_by(QUEUE.c.seq)))


def _updates_return(session: Session) -> bool:
    """Whether the database claims and returns in one UPDATE .. RETURNING (MariaDB has none)."""
    return session.get_bind().dialect.name in _RETURNING_DIALECTS


def discard_in(session: Session, agent_id: str, reason: str) -> int:
    """Consume the agent's whole queue without delivering it (the agent was terminated)."""
    return rowcount(session.execute(
        update(PendingMessageRow).where(PendingMessageRow.target_agent_id == agent_id,
                                        PendingMessageRow.status == QUEUED)
        .values(status=CONSUMED, consumed_by=reason[:64], consumed_at=now())
    ))


def requeue_unwritten_answers_in(session: Session, agent_id: str) -> int:
    """Answers that a blocked ask of the agent took after its last history entry: their process died before it
    wrote them into the history as the ask's result, so they go back to the queue (one statement: the last
    entry's time is read by the UPDATE itself)."""
    return rowcount(session.connection().execute(_REQUEUE_ANSWERS, {"agent": agent_id}))


def put_back_in(session: Session, agent_id: str, drained_by: str, message_ids: list[str]) -> int:
    """Undo an inline drain that no model request read (its turn was stopped right after it): the messages that
    `drained_by`'s drains took leave the agent's history and are queued again, in their places (`seq`), for the
    turn that follows the stop."""
    ids = list(session.scalars(select(PendingMessageRow.id).where(
        PendingMessageRow.id.in_(message_ids), PendingMessageRow.target_agent_id == agent_id,
        PendingMessageRow.status == CONSUMED, PendingMessageRow.consumed_by.like(f"{_drained_by(drained_by)}%"))))
    if not ids:
        return 0
    session.execute(delete(Message).where(Message.agent_id == agent_id, Message.message_id.in_(ids)))
    session.execute(update(PendingMessageRow).where(PendingMessageRow.id.in_(ids))
                    .values(status=QUEUED, consumed_by=None, consumed_at=None))
    return len(ids)


def requeue_in(session: Session, message_id: str, consumed_by: str) -> bool:
    """Undo a `take_in` whose taker could not use the message; it keeps its place (`seq`) in the queue."""
    return rowcount(session.execute(
        update(PendingMessageRow).where(PendingMessageRow.id == message_id, PendingMessageRow.status == CONSUMED,
                                        PendingMessageRow.consumed_by == consumed_by[:64])
        .values(status=QUEUED, consumed_by=None, consumed_at=None)
    )) == 1


def take_in(session: Session, message_id: str, consumed_by: str) -> PendingMessageRow | None:
    """Consume one queued message; None when it is gone already."""
    won = rowcount(session.execute(
        update(PendingMessageRow).where(PendingMessageRow.id == message_id, PendingMessageRow.status == QUEUED)
        .values(status=CONSUMED, consumed_by=consumed_by[:64], consumed_at=now())
    )) == 1
    return session.scalars(select(PendingMessageRow).where(PendingMessageRow.id == message_id)).one() if won else None


def has_queued(db: Database, agent_id: str) -> bool:
    with db.read() as s:
        return has_queued_in(s, agent_id)


def has_queued_in(session: Session, agent_id: str) -> bool:
    return bool(session.scalar(_HAS_QUEUED, {"agent": agent_id}))


def list_queued(db: Database, agent_id: str) -> list[PendingMessageRow]:
    with db.read() as s:
        return list(s.scalars(
            select(PendingMessageRow).where(PendingMessageRow.target_agent_id == agent_id,
                                            PendingMessageRow.status == QUEUED)
            .order_by(PendingMessageRow.seq)
        ))


def queued_counts(db: Database, conversation_id: str) -> dict[str, int]:
    with db.read() as s:
        rows = s.execute(
            select(PendingMessageRow.target_agent_id, func.count()).where(
                PendingMessageRow.conversation_id == conversation_id, PendingMessageRow.status == QUEUED,
            ).group_by(PendingMessageRow.target_agent_id)
        )
        return {agent_id: count for agent_id, count in rows}


def agents_with_queued(db: Database) -> list[str]:
    with db.read() as s:
        return list(s.scalars(
            select(PendingMessageRow.target_agent_id).where(PendingMessageRow.status == QUEUED).distinct()
        ))


def find_question(db: Database, question_id: str) -> PendingMessageRow | None:
    """The `ask` that carried a question id (its target is the agent asked, its source the asker)."""
    with db.read() as s:
        return s.scalars(
            select(PendingMessageRow).where(PendingMessageRow.question_id == question_id,
                                            PendingMessageRow.type == "ask")
        ).first()


def get_message(db: Database, message_id: str) -> PendingMessageRow | None:
    with db.read() as s:
        return s.scalars(select(PendingMessageRow).where(PendingMessageRow.id == message_id)).first()


def queued_notices(db: Database, conversation_id: str, source: MessageSource) -> list[PendingMessageRow]:
    """Completion notices of one source (`sub_agent`, `background_command`) not delivered yet."""
    with db.read() as s:
        rows = s.scalars(
            select(PendingMessageRow).where(PendingMessageRow.conversation_id == conversation_id,
                                            PendingMessageRow.status == QUEUED,
                                            PendingMessageRow.type == "notice")
            .order_by(PendingMessageRow.seq)
        )
        return [r for r in rows if r.typed_meta.source == source]


def waiting_user_messages(db: Database, conversation_id: str, statuses: tuple[str, ...]) -> list[PendingMessageRow]:
    """The user's messages of the conversation that no agent has read yet, in the order they were sent:
    queued for their receiver, or (`routing`, see `storage.unrouted`) still waiting for their route."""
    with db.read() as s:
        rows = s.scalars(select(PendingMessageRow).where(PendingMessageRow.conversation_id == conversation_id,
                                                         PendingMessageRow.status.in_(statuses))
                         .order_by(PendingMessageRow.seq))
        return [r for r in rows if r.typed_meta.source == MessageSource.USER]


def queued_count(db: Database, agent_id: str) -> int:
    with db.read() as s:
        return s.scalar(_QUEUED_COUNT, {"agent": agent_id}) or 0


def queued_total(db: Database) -> int:
    """Messages waiting in every agent's queue (the operator's queue depth)."""
    with db.read() as s:
        return s.scalar(select(func.count()).select_from(PendingMessageRow).where(
            PendingMessageRow.status == QUEUED)) or 0
