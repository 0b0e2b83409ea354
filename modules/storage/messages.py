"""Agent histories: append in order, read back, find tool calls still waiting for a result."""

from __future__ import annotations

import functools
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, cast

from sqlalchemy import Row, Table, TextClause, bindparam, func, select, text
from sqlalchemy.orm import Session
from sqlalchemy.orm.attributes import manager_of_class

from modules.statuses import Visibility
from modules.storage.bulk_insert import column_names, insert_rows, recordset, recordset_params, selected
from modules.storage.db import Database
from modules.storage.message_meta import MessageMeta
from modules.storage.models import Message
from modules.storage.records import new_id, now

HISTORY = cast(Table, Message.__table__)
# An append's statements, built once and executed on the session's connection without the ORM.
_LAST_SEQ = select(func.max(HISTORY.c.seq)).where(HISTORY.c.agent_id == bindparam("agent"))
_APPEND = HISTORY.insert()
# SQLite, one entry (a reply, a tool result, a drained message): numbered by the insert itself, one statement.
_APPEND_ONE = HISTORY.insert().values(
    seq=select(func.coalesce(func.max(HISTORY.c.seq), -1) + 1).where(HISTORY.c.agent_id == bindparam("agent"))
    .scalar_subquery()).returning(HISTORY.c.seq)
# The reads of every turn, built once (modules/storage/agents.py says why).
_OF_AGENT = select(Message).where(Message.agent_id == bindparam("agent")).order_by(Message.seq)
_TAIL = select(Message.seq, Message.role, Message.content, Message.tool_calls, Message.tool_call_id, Message.meta) \
    .where(Message.agent_id == bindparam("agent"), Message.seq > bindparam("after")).order_by(Message.seq)
_CALLS_AND_RESULTS = select(Message.role, Message.tool_calls, Message.tool_call_id) \
    .where(Message.agent_id == bindparam("agent"), Message.role.in_(("assistant", "tool")),
           Message.seq >= bindparam("first")).order_by(Message.seq)
# Pages of a history (`GET .../messages?before=&limit=`) and the batches an export streams.
_SEQ_OF = select(Message.seq).where(Message.agent_id == bindparam("agent"), Message.message_id == bindparam("message"))
_LATEST = select(Message).where(Message.agent_id == bindparam("agent")).order_by(Message.seq.desc()) \
    .limit(bindparam("limit"))
_LATEST_BEFORE = select(Message).where(Message.agent_id == bindparam("agent"), Message.seq < bindparam("before")) \
    .order_by(Message.seq.desc()).limit(bindparam("limit"))
_BATCH_AFTER = select(Message).where(Message.agent_id == bindparam("agent"), Message.seq > bindparam("after")) \
    .order_by(Message.seq).limit(bindparam("limit"))
_RECENT_CHAT = select(Message).where(Message.conversation_id == bindparam("conversation"),
                                     Message.role.in_(("user", "assistant")), Message.content.is_not(None)) \
    .order_by(Message.id.desc()).limit(bindparam("limit"))


@dataclass
class MessageDraft:
    """A history entry about to be written. `meta` carries message_id-independent metadata
    (source, visibility, starts_work, ...: modules/storage/message_meta.py)."""

    role: str
    content: str | None = None
    tool_calls: list[dict[str, Any]] | None = None
    tool_call_id: str | None = None
    name: str | None = None
    meta: MessageMeta = field(default_factory=MessageMeta)
    message_id: str = field(default_factory=new_id)


def append_in(session: Session, conversation_id: str, agent_id: str, drafts: list[MessageDraft]) -> list[Message]:
    """Append inside the caller's transaction, so a caller can couple it with other writes.

    One batched insert; the returned rows are detached copies of what was written (their `id` unset).
    A NUL in a text (a model or a tool can produce one) becomes U+FFFD: PostgreSQL text cannot hold it."""
    if not drafts:
        return []
    conn = session.connection()
    ts = now()
    rows = [
        {"message_id": draft.message_id, "conversation_id": conversation_id, "agent_id": agent_id,
         "role": draft.role, "content": storable(draft.content), "tool_calls": draft.tool_calls,
         "tool_call_id": draft.tool_call_id, "name": draft.name, "metadata": draft.meta.dump(), "created_at": ts}
        for draft in drafts
    ]
    if conn.dialect.name == "postgresql":  # the next seq read by the insert itself: one round trip, not two
        first = min(conn.execute(_numbered_append(tuple(rows[0])), {**recordset_params(HISTORY, rows),
                                                                    "agent": agent_id}).scalars())
        for i, row in enumerate(rows):
            row["seq"] = first + i
    elif len(rows) == 1 and conn.dialect.name == "sqlite":  # (MariaDB refuses a subquery on the inserted table)
        rows[0]["seq"] = conn.execute(_APPEND_ONE, {**rows[0], "agent": agent_id}).scalar_one()
    else:
        last = conn.execute(_LAST_SEQ, {"agent": agent_id}).scalar()
        for i, row in enumerate(rows):
            row["seq"] = (0 if last is None else last + 1) + i
        insert_rows(conn, HISTORY, rows, _APPEND)
    return [_written(row) for row in rows]


_MESSAGE_CLASS = manager_of_class(Message)


def _written(row: dict[str, Any]) -> Message:
    """A detached copy of a row just written, its attributes set as a load sets them: no change tracking
    (it is never added to a session), a tenth of the ORM constructor's cost (~20 us a message on the drain
    path)."""
    message: Message = _MESSAGE_CLASS.new_instance()
    message.__dict__.update(row)
    message.__dict__["meta"] = message.__dict__.pop("metadata")
    return message


@functools.cache
def _numbered_append(columns: tuple[str, ...]) -> TextClause:
    """PostgreSQL: INSERT the rows of `recordset_params` numbered after the agent's last `seq`, which the
    statement reads itself (its snapshot holds none of its own rows); returns their seqs."""
    table, seq, agent = HISTORY.name, HISTORY.c.seq.name, HISTORY.c.agent_id.name
    return text(f'INSERT INTO "{table}" ({column_names(HISTORY, columns)}, "{seq}") '
                f"SELECT {selected(HISTORY, columns, 'r')}, "
                f'(SELECT coalesce(max("{seq}"), -1) FROM "{table}" WHERE "{agent}" = :agent) + r.ord '
                f'FROM {recordset(HISTORY, columns, "r")} ORDER BY r.ord RETURNING "{seq}"')


def storable(text: str | None) -> str | None:
    """The text as the history keeps it: a NUL (a model can produce one; PostgreSQL's text cannot hold it) made
    U+FFFD."""
    return text.replace("\x00", "\ufffd") if text else text


def append_messages(db: Database, conversation_id: str, agent_id: str, drafts: list[MessageDraft]) -> list[Message]:
    with db.write() as s:
        return append_in(s, conversation_id, agent_id, drafts)


def list_messages(db: Database, agent_id: str) -> list[Message]:
    with db.read() as s:
        return list(s.scalars(_OF_AGENT, {"agent": agent_id}))


def messages_before(db: Database, agent_id: str, limit: int,
                    before_message_id: str | None = None) -> list[Message] | None:
    """The `limit` entries just before the agent's message `before_message_id` (without it: its latest), oldest
    first; None when that message is not in this agent's history. Read by the (agent_id, seq) index."""
    with db.read() as s:
        if before_message_id is None:
            rows = list(s.scalars(_LATEST, {"agent": agent_id, "limit": limit}))
        else:
            seq = s.scalar(_SEQ_OF, {"agent": agent_id, "message": before_message_id})
            if seq is None:
                return None
            rows = list(s.scalars(_LATEST_BEFORE, {"agent": agent_id, "before": seq, "limit": limit}))
    return rows[::-1]


def history_batches(db: Database, agent_id: str, batch: int) -> Iterator[list[Message]]:
    """The agent's whole history, oldest first, `batch` entries at a time, each read in a transaction of its own
    (an export streams a long history to a slow client without holding it all, nor a transaction, meanwhile)."""
    after = -1
    while True:
        with db.read() as s:
            rows = list(s.scalars(_BATCH_AFTER, {"agent": agent_id, "after": after, "limit": batch}))
        if rows:
            yield rows
        if len(rows) < batch:
            return
        after = rows[-1].seq


def history_after(db: Database, agent_id: str, after_seq: int) -> list[Row[*tuple[Any, ...]]]:
    """The entries after `after_seq` (a context summary stands for the ones before), with the columns the
    model's view needs: read by the (agent_id, seq) index, so a request's cost follows the tail, not the
    whole history."""
    with db.read() as s:
        return list(s.execute(_TAIL, {"agent": agent_id, "after": after_seq}))


def open_tool_calls_in(session: Session, agent_id: str, first_seq: int = 0) -> list[dict[str, Any]]:
    """Tool calls of the agent's assistant messages from `first_seq` on that have no `tool` result yet (a turn
    starts with none open: the end of the one before, or recovery, closed them); without their texts."""
    rows = session.execute(_CALLS_AND_RESULTS, {"agent": agent_id, "first": first_seq})
    open_calls: dict[str, dict[str, Any]] = {}
    for row in rows:
        if row.role == "assistant":
            for call in row.tool_calls or []:
                open_calls[call["id"]] = call
        elif row.tool_call_id:
            open_calls.pop(row.tool_call_id, None)
    return list(open_calls.values())


def recent_chat(db: Database, conversation_id: str, limit: int = 12) -> list[Message]:
    """The latest user and assistant texts of every agent of a conversation, oldest first."""
    with db.read() as s:
        rows = list(s.scalars(_RECENT_CHAT, {"conversation": conversation_id, "limit": limit * 2}))
    chat = [m for m in rows if m.typed_meta.visibility in (None, Visibility.CHAT)][:limit]
    return list(reversed(chat))



@dataclass(frozen=True)
class LastReply:
    text: str
    message_id: str | None
    task_id: str | None  # the turn that wrote it (its event log holds the chips offered after it)


def last_reply(db: Database, agent_id: str) -> LastReply | None:
    """The agent's newest assistant text: what the user is answering when the agent reasoned last."""
    with db.read() as s:
        row = s.execute(select(Message.content, Message.message_id, Message.meta)
                        .where(Message.agent_id == agent_id, Message.role == "assistant", Message.content.is_not(None))
                        .order_by(Message.seq.desc()).limit(1)).first()
    if row is None:
        return None
    return LastReply(row.content, row.message_id, MessageMeta.load(row.meta).task_id)
