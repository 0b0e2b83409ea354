"""Keyset pages of the conversation list and of a history, and the batches an export reads (docs/API.md),
against SQLite, PostgreSQL and MariaDB."""

from __future__ import annotations

import base64

import pytest
from sqlalchemy import update

from modules.storage import conversations, messages
from modules.storage.conversation_pages import ConversationCursor
from modules.storage.db import Database
from modules.storage.messages import MessageDraft
from modules.storage.models import Conversation
from modules.storage.users import get_or_create_user
from test.db_urls import fresh_database
from test.unit.teams import conversation_with_sub_agent


@pytest.fixture(params=["sqlite", "postgresql", "mariadb"])
def db(request, tmp_path):
    with fresh_database(request.param, tmp_path) as url:
        database = Database(url)
        database.migrate()
        yield database
        database.dispose()


def _walk(db: Database, user_id: int, limit: int, query: str | None = None,
          between_pages=lambda page: None) -> list[str]:
    """Every page's conversation ids in order, following each page's cursor."""
    seen: list[str] = []
    cursor = None
    for page_number in range(100):
        page = conversations.list_conversations(db, user_id, limit, query, cursor)
        assert len(page.conversations) <= limit
        seen += [c.id for c in page.conversations]
        if page.next_cursor is None:
            return seen
        between_pages(page_number)
        cursor = ConversationCursor.decode(page.next_cursor.encode())  # as a client passes it back
    raise AssertionError("the pages never ended")


def _set_updated_at(db: Database, conversation_id: str, at: float) -> None:
    with db.write() as s:
        s.execute(update(Conversation).where(Conversation.id == conversation_id).values(updated_at=at))


def test_pages_list_every_conversation_once_newest_first_ties_by_id(db):
    alice, bob = get_or_create_user(db, "alice").id, get_or_create_user(db, "bob").id
    ids = [conversations.create_conversation(db, alice, f"trip {n}")[0].id for n in range(9)]
    conversations.create_conversation(db, bob, "trip of bob")
    for cid in ids[2:6]:  # four with the same last activity: the id orders them, across page boundaries
        _set_updated_at(db, cid, 1_765_000_000.123456)
    conversations.mark_deleted(db, ids[8], alice)
    everything = conversations.list_conversations(db, alice).conversations
    assert len(everything) == 8 and conversations.list_conversations(db, alice).next_cursor is None
    for limit in (1, 2, 3, 7, 8, 200):
        assert _walk(db, alice, limit) == [c.id for c in everything], limit
    tied = [c.id for c in everything if c.updated_at == 1_765_000_000.123456]
    assert tied == sorted(ids[2:6])
    assert _walk(db, alice, 2, query="TRIP 1") == [ids[1]]
    assert _walk(db, bob, 1) != [] and set(_walk(db, bob, 1)).isdisjoint(ids)


def test_new_and_touched_conversations_between_pages_repeat_none_and_skip_none_that_stayed(db):
    alice = get_or_create_user(db, "alice").id
    ids = [conversations.create_conversation(db, alice, f"c{n}")[0].id for n in range(10)]
    before = [c.id for c in conversations.list_conversations(db, alice).conversations]
    touched = before[7]
    added: list[str] = []

    def meanwhile(page_number: int) -> None:
        if page_number == 0:
            added.append(conversations.create_conversation(db, alice, "new")[0].id)
            conversations.rename_conversation(db, touched, alice, "moved to the top")

    seen = _walk(db, alice, 3, between_pages=meanwhile)
    assert len(seen) == len(set(seen))  # no conversation twice
    assert seen == [cid for cid in before if cid != touched]  # each that kept its place, in order
    assert [c.id for c in conversations.list_conversations(db, alice, 2).conversations] == [touched, added[0]]
    assert set(ids) == set(before)


@pytest.mark.parametrize("db", ["sqlite"], indirect=True)
def test_a_cursor_round_trips_exactly_and_anything_else_is_refused(db):
    cursor = ConversationCursor(1_765_000_000.1234567, "c0ffee00-0000-4000-8000-000000000000")
    assert ConversationCursor.decode(cursor.encode()) == cursor
    assert ConversationCursor.decode(ConversationCursor(5, "x").encode()) == ConversationCursor(5.0, "x")

    def b64(raw: str) -> str:
        return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")

    for bad in ("", "!!!", "bm90IGpzb24", b64("[1]"), b64('["1", "x"]'), b64("[true, \"x\"]"), b64('[1e999, "x"]'),
                b64(f'[{10**400}, "x"]'), b64('[1, ""]'), b64('[1, "x\\u0000"]'), b64(f'[1, "{"x" * 65}"]'),
                b64("{}"), b64("[" * 800), base64.urlsafe_b64encode(b"\xff\xfe").decode()):
        with pytest.raises(ValueError):
            ConversationCursor.decode(bad)


def test_a_page_of_a_history_is_the_messages_just_before_one_of_its_own(db):
    conv, master, sub, _ = conversation_with_sub_agent(db)
    written = messages.append_messages(db, conv.id, master.id, [MessageDraft("user", f"m{n}") for n in range(10)])
    foreign = messages.append_messages(db, conv.id, sub.id, [MessageDraft("user", "the sub-agent's")])[0]
    ids = [m.message_id for m in written]

    def contents(page):
        return None if page is None else [m.content for m in page]

    assert contents(messages.messages_before(db, master.id, 3)) == ["m7", "m8", "m9"]
    assert contents(messages.messages_before(db, master.id, 3, ids[5])) == ["m2", "m3", "m4"]
    assert contents(messages.messages_before(db, master.id, 3, ids[2])) == ["m0", "m1"]
    assert contents(messages.messages_before(db, master.id, 3, ids[0])) == []
    assert contents(messages.messages_before(db, master.id, 100)) == [f"m{n}" for n in range(10)]
    assert messages.messages_before(db, master.id, 3, foreign.message_id) is None
    assert messages.messages_before(db, master.id, 3, "no-such-message") is None


def test_an_export_reads_a_history_in_batches_oldest_first(db):
    conv, master, sub, _ = conversation_with_sub_agent(db)
    messages.append_messages(db, conv.id, master.id, [MessageDraft("user", f"m{n}") for n in range(9)])
    for batch, sizes in ((3, [3, 3, 3]), (4, [4, 4, 1]), (9, [9]), (50, [9])):
        batches = list(messages.history_batches(db, master.id, batch))
        assert [len(b) for b in batches] == sizes
        assert [m.content for b in batches for m in b] == [f"m{n}" for n in range(9)]
    assert list(messages.history_batches(db, sub.id, 3)) == []
