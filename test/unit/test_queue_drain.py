"""Draining a queue on SQLite catches what only PostgreSQL used to: a drain that loses its `status` check
consumes a message twice, one that loses its `order_by(seq)` reorders the queue (see conftest).

The one-statement drain (UPDATE .. RETURNING) orders its rows itself: on SQLite they come in the order of the
(target, status, seq) index whatever the pragma (it reverses SELECTs only), so only PostgreSQL, whose rows
come in heap order (a requeued row moves to the end), shows a drain that lost that sort; hence both here.
MariaDB's own drain (look, then claim by primary key) runs on MariaDB, and forced on the others."""

from __future__ import annotations

import pytest
from sqlalchemy import event
from sqlalchemy.orm import Session

from modules.multi_agent.message_router import MessageRouter
from modules.statuses import MessageSource
from modules.storage import conversations
from modules.storage import pending_messages as queue
from modules.storage.records import new_id, now
from modules.storage.users import get_or_create_user
from test.db_urls import migrated_database


@pytest.fixture(params=["sqlite", "postgresql", "mariadb"])
def agent(request, tmp_path):
    with migrated_database(request.param, tmp_path) as db:
        conv, master = conversations.create_conversation(db, get_or_create_user(db, "u").id, "t")
        yield db, conv, master


def _queue(db, conv, agent, texts):
    ids = []
    with db.write() as s:
        for text in texts:
            ids.append(new_id())
            queue.enqueue_in(s, dict(id=ids[-1], conversation_id=conv.id, target_agent_id=agent.id,
                                     source_agent_id=None, source_display_name="user", type="message",
                                     content=text, question_id=None, meta={"source": MessageSource.USER},
                                     created_at=now()))
    return ids


def test_a_drain_returns_the_whole_queue_in_arrival_order_once(agent):
    db, conv, master = agent
    ids = _queue(db, conv, master, [f"m{i}" for i in range(6)])
    before = now()
    with db.write() as s:
        assert [r.id for r in queue.drain_in(s, master.id, "task-1")] == ids
    drained = queue.get_message(db, ids[0])
    assert drained.status == queue.CONSUMED and drained.consumed_at >= before
    assert drained.consumed_by.startswith("task-1:")
    with db.write() as s:
        assert queue.drain_in(s, master.id, "task-2") == []
    assert queue.list_queued(db, master.id) == []


def test_a_message_taken_between_the_drains_look_and_its_claim_is_not_drained_too(agent, monkeypatch):
    """A blocked ask takes one message (compare-and-set) right after a drainer listed the queue: the drain's
    claim must skip it, or the message is consumed twice (once as the answer, once into the history). The
    look-then-claim drain is MariaDB's (SQLite and PostgreSQL claim in one UPDATE .. RETURNING): forced here."""
    db, conv, master = agent
    monkeypatch.setattr(queue, "_updates_return", lambda _session: False)
    ids = _queue(db, conv, master, ["a", "answer", "c"])
    scalars = Session.scalars

    def listed_then_taken(session, statement, *args, **kwargs):
        if getattr(session, "_taken", False):
            return scalars(session, statement, *args, **kwargs)
        session._taken = True
        listed = list(scalars(session, statement, *args, **kwargs))
        assert queue.take_in(session, ids[1], consumed_by="ask:q1") is not None
        return iter(listed)

    monkeypatch.setattr(Session, "scalars", listed_then_taken)
    with db.write() as s:
        drained = [r.id for r in queue.drain_in(s, master.id, "task-1")]
    monkeypatch.undo()
    assert drained == [ids[0], ids[2]]
    assert queue.get_message(db, ids[1]).consumed_by == "ask:q1"


def test_requeued_messages_keep_their_place(agent):
    db, conv, master = agent
    ids = _queue(db, conv, master, ["a", "b", "c"])
    with db.write() as s:
        queue.take_in(s, ids[1], consumed_by="ask:q")
    with db.write() as s:
        assert queue.requeue_in(s, ids[1], consumed_by="ask:q")
    assert [r.id for r in queue.list_queued(db, master.id)] == ids
    with db.write() as s:
        assert [r.id for r in queue.drain_in(s, master.id, "t")] == ids


@pytest.mark.parametrize("look_then_claim", [False, True], ids=["one-statement", "look-then-claim"])
def test_a_drain_takes_its_own_agents_queue_only(agent, monkeypatch, look_then_claim):
    db, conv, master = agent
    if look_then_claim:
        monkeypatch.setattr(queue, "_updates_return", lambda _session: False)
    other_conv, other = conversations.create_conversation(db, get_or_create_user(db, "v").id, "other")
    theirs = _queue(db, other_conv, other, ["not yours"])
    ours = _queue(db, conv, master, ["a", "b"])
    with db.write() as s:
        assert [r.id for r in queue.drain_in(s, master.id, "task-1")] == ours
    assert [r.id for r in queue.list_queued(db, other.id)] == theirs


def _queries(db, work):
    """The SELECTs and UPDATEs that `work` sends the database, and what `work` returned."""
    statements = []
    listener = lambda conn, cursor, statement, *args: statements.append(statement)  # noqa: E731
    event.listen(db.engine, "before_cursor_execute", listener)
    try:
        result = work()
    finally:
        event.remove(db.engine, "before_cursor_execute", listener)
    return [q for q in statements if q.split()[0].upper() in ("SELECT", "UPDATE")], result


def test_a_drain_is_one_round_trip_where_an_update_returns_its_rows(agent):
    """SQLite and PostgreSQL claim and read the queue in one UPDATE .. RETURNING; MariaDB looks, claims, reads."""
    db, conv, master = agent
    ids = _queue(db, conv, master, ["a", "b", "c"])

    def drain():
        with db.write() as s:
            return [r.id for r in queue.drain_in(s, master.id, "task-1")]

    queries, drained = _queries(db, drain)
    assert drained == ids
    assert len(queries) == (3 if db.dialect == "mysql" else 1), queries


def test_an_empty_inline_batch_reads_no_history(agent):
    """The inline batch after every tool round mostly finds nothing: then it costs the drain's look alone."""
    db, conv, master = agent
    router = MessageRouter(db)
    queries, drained = _queries(db, lambda: router.consume_pending_messages(master.id, conv.id, "task-1"))
    assert drained == [] and len(queries) == 1, queries
