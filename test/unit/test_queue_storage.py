"""The queue functions one by one, on SQLite with unordered selects reversed (see conftest): each message is
taken once, put back only by its taker, in its place, and every listing filters by agent, status and order."""

from __future__ import annotations

import pytest
from sqlalchemy import update

from modules.statuses import MessageSource
from modules.storage import conversations, messages
from modules.storage import pending_messages as queue
from modules.storage.db import Database
from modules.storage.messages import MessageDraft
from modules.storage.models import Message, PendingMessageRow
from modules.storage.records import new_id, now
from modules.storage.unrouted import ROUTING, store_in
from modules.storage.users import get_or_create_user
from test.db_urls import fresh_database
from test.unit.teams import conversation_with_sub_agent

LONG_TAKER = "ask:" + "x" * 96  # longer than the 64-character column: stored and matched cut to 64


@pytest.fixture(params=["sqlite", "postgresql", "mariadb"])
def team(request, tmp_path):
    """On each database: their upserts differ (MariaDB has no RETURNING, so it looks before it inserts)."""
    with fresh_database(request.param, tmp_path) as url:
        db = Database(url)
        conv, master, sub, _ = conversation_with_sub_agent(db)
        yield db, conv, master, sub
        db.dispose()


def _values(conv, agent, content, *, type_="message", source="user", question_id=None, id_=None):
    return dict(id=id_ or new_id(), conversation_id=conv.id, target_agent_id=agent.id, source_agent_id=None,
                source_display_name="x", type=type_, content=content, question_id=question_id,
                meta={"source": source}, created_at=now())


def _queue(db, *values) -> list[str]:
    with db.write() as s:
        return queue.enqueue_many_in(s, list(values))


def _ids(rows):
    return [r.id for r in rows]


def test_enqueue_stores_each_id_once_in_list_order(team):
    db, conv, master, _ = team
    a, b = _values(conv, master, "a"), _values(conv, master, "b")
    assert _queue(db, a, b, dict(a)) == [a["id"], b["id"]]
    assert _queue(db, b) == []
    with db.write() as s:
        assert queue.enqueue_in(s, _values(conv, master, "c", id_="c")) is True
        assert queue.enqueue_in(s, _values(conv, master, "c again", id_="c")) is False
    assert [r.content for r in queue.list_queued(db, master.id)] == ["a", "b", "c"]
    assert _queue(db) == []


def test_take_consumes_once_and_records_who_and_when(team):
    db, conv, master, _ = team
    [mid] = _queue(db, _values(conv, master, "answer"))
    before = now()
    with db.write() as s:
        taken = queue.take_in(s, mid, consumed_by=LONG_TAKER)
        assert taken is not None and taken.id == mid
    with db.write() as s:
        assert queue.take_in(s, mid, consumed_by="someone else") is None
    row = queue.get_message(db, mid)
    assert row.status == queue.CONSUMED and row.consumed_by == LONG_TAKER[:64] and row.consumed_at >= before
    assert not queue.has_queued(db, master.id)


def test_requeue_undoes_only_its_own_take_and_keeps_the_place(team):
    db, conv, master, _ = team
    ids = _queue(db, *[_values(conv, master, c) for c in "abc"])
    with db.write() as s:
        queue.take_in(s, ids[0], consumed_by="ask:q1")
        queue.take_in(s, ids[1], consumed_by=LONG_TAKER)
    with db.write() as s:
        assert queue.requeue_in(s, ids[0], consumed_by="ask:other") is False
        assert queue.requeue_in(s, ids[2], consumed_by="ask:q1") is False  # still queued: nothing to undo
        assert queue.requeue_in(s, ids[1], consumed_by=LONG_TAKER) is True
    assert _ids(queue.list_queued(db, master.id)) == ids[1:]
    row = queue.get_message(db, ids[1])
    assert (row.consumed_by, row.consumed_at) == (None, None)
    assert queue.get_message(db, ids[0]).consumed_by == "ask:q1"


def test_a_drain_put_back_leaves_the_history_and_waits_in_its_place(team):
    """A stopped turn's end puts back what its inline batch drained and no model request read."""
    db, conv, master, sub = team
    ids = _queue(db, *[_values(conv, master, c) for c in "abc"])
    with db.write() as s:
        queue.take_in(s, ids[0], consumed_by="ask:q1")
        drained = queue.drain_in(s, master.id, "task-1")
        messages.append_in(s, conv.id, master.id, [MessageDraft(role="user", content=r.content, message_id=r.id)
                                                   for r in drained])
    with db.write() as s:
        assert queue.put_back_in(s, sub.id, "task-1", ids) == 0  # another agent's: nothing
        assert queue.put_back_in(s, master.id, "task-2", ids) == 0  # another turn's drain: nothing
        assert queue.put_back_in(s, master.id, "task-1", [ids[0], ids[2]]) == 1  # not the one an ask took
    assert _ids(queue.list_queued(db, master.id)) == [ids[2]]
    assert [m.content for m in messages.list_messages(db, master.id)] == ["b"]


def test_answers_taken_by_an_ask_after_the_last_write_go_back(team):
    db, conv, master, sub = team
    ids = _queue(db, *[_values(conv, master, c, type_="answer") for c in "abcd"], _values(conv, sub, "e"))
    with db.write() as s:
        queue.take_in(s, ids[0], consumed_by="ask:early")
    since = now()
    with db.write() as s:
        queue.take_in(s, ids[1], consumed_by="ask:late")
        queue.take_in(s, ids[2], consumed_by="task-1")  # drained into a history, not taken by an ask
        queue.take_in(s, ids[4], consumed_by="ask:late")  # another agent's
        queue.take_in(s, ids[3], consumed_by="ask:same-instant")
        s.execute(update(PendingMessageRow).where(PendingMessageRow.id == ids[3]).values(consumed_at=since))
    [last] = messages.append_messages(db, conv.id, master.id, [MessageDraft(role="user", content="last entry")])
    with db.write() as s:  # taken at the instant of the last write: written with it, so it stays consumed
        s.execute(update(Message).where(Message.message_id == last.message_id).values(created_at=since))
        assert queue.requeue_unwritten_answers_in(s, master.id) == 1
    assert _ids(queue.list_queued(db, master.id)) == [ids[1]]
    assert queue.get_message(db, ids[3]).consumed_by == "ask:same-instant"
    back = queue.get_message(db, ids[1])
    assert (back.consumed_by, back.consumed_at) == (None, None)
    assert queue.get_message(db, ids[4]).status == queue.CONSUMED


def test_discard_consumes_only_that_agents_queue(team):
    db, conv, master, sub = team
    ids = _queue(db, _values(conv, sub, "a"), _values(conv, sub, "b"), _values(conv, master, "m"))
    with db.write() as s:
        queue.take_in(s, ids[0], consumed_by="ask:q")
    before = now()
    with db.write() as s:
        assert queue.discard_in(s, sub.id, "terminated: " + "y" * 80) == 1
    discarded = queue.get_message(db, ids[1])
    assert discarded.consumed_by == ("terminated: " + "y" * 80)[:64] and discarded.consumed_at >= before
    assert queue.get_message(db, ids[0]).consumed_by == "ask:q"
    assert _ids(queue.list_queued(db, master.id)) == [ids[2]]
    assert not queue.has_queued(db, sub.id) and queue.has_queued(db, master.id)


def test_listings_filter_by_agent_status_and_kind_in_arrival_order(team):
    db, conv, master, sub = team
    ids = _queue(db,
                 _values(conv, master, "n1", type_="notice", source=MessageSource.BACKGROUND_COMMAND),
                 _values(conv, sub, "s1"),
                 _values(conv, master, "n2", type_="notice", source=MessageSource.SUB_AGENT),
                 _values(conv, master, "m", source=MessageSource.BACKGROUND_COMMAND),
                 _values(conv, master, "n3", type_="notice", source=MessageSource.BACKGROUND_COMMAND),
                 _values(conv, sub, "q", type_="ask", question_id="q_1"),
                 _values(conv, master, "a", type_="answer", question_id="q_1"))
    with db.write() as s:
        queue.take_in(s, ids[4], consumed_by="t")
    other, other_master = conversations.create_conversation(db, get_or_create_user(db, "v").id, "other")
    _queue(db, _values(other, other_master, "elsewhere", type_="notice", source=MessageSource.BACKGROUND_COMMAND))
    assert _ids(queue.list_queued(db, master.id)) == [ids[0], ids[2], ids[3], ids[6]]
    assert _ids(queue.queued_notices(db, conv.id, MessageSource.BACKGROUND_COMMAND)) == [ids[0]]
    assert _ids(queue.queued_notices(db, conv.id, MessageSource.SUB_AGENT)) == [ids[2]]
    assert queue.queued_counts(db, conv.id) == {master.id: 4, sub.id: 2}
    assert (queue.queued_count(db, master.id), queue.queued_count(db, sub.id)) == (4, 2)
    assert queue.queued_count(db, other_master.id) == 1 and queue.queued_count(db, "nobody") == 0
    assert queue.queued_total(db) == 7  # every conversation's queued messages, not the one taken
    assert sorted(queue.agents_with_queued(db)) == sorted([master.id, sub.id, other_master.id])
    assert queue.find_question(db, "q_1").id == ids[5]  # the ask, not the answer that carries its id
    assert queue.find_question(db, "q_2") is None
    assert queue.get_message(db, ids[1]).content == "s1" and queue.get_message(db, "nope") is None
    with db.write() as s:
        queue.drain_in(s, master.id, "t2")
    assert queue.has_queued(db, sub.id) and not queue.has_queued(db, master.id)
    assert sorted(queue.agents_with_queued(db)) == sorted([sub.id, other_master.id])
    assert queue.queued_counts(db, conv.id) == {sub.id: 2}
    assert queue.queued_count(db, master.id) == 0 and queue.queued_total(db) == 3
    assert queue.queued_notices(db, conv.id, MessageSource.BACKGROUND_COMMAND) == []


def test_the_users_unread_messages_are_those_queued_or_routing_in_send_order(team):
    db, conv, master, sub = team
    ids = _queue(db, _values(conv, master, "first"), _values(conv, sub, "peer", source=MessageSource.SUB_AGENT),
                 _values(conv, sub, "second"), _values(conv, master, "read"))
    with db.write() as s:
        held = _values(conv, master, "still routing")
        store_in(s, held, routing_process="p1")
        store_in(s, {**held, "content": "a retried send"}, routing_process="p1")  # its id is known: stored once
        queue.take_in(s, ids[3], consumed_by="task-1")
    other, other_master = conversations.create_conversation(db, get_or_create_user(db, "v").id, "other")
    _queue(db, _values(other, other_master, "elsewhere"))
    unread = queue.waiting_user_messages(db, conv.id, (ROUTING, queue.QUEUED))
    assert [r.content for r in unread] == ["first", "second", "still routing"]
    assert [r.content for r in queue.waiting_user_messages(db, conv.id, (queue.QUEUED,))] == ["first", "second"]
