"""A turn's model requests read only the history written since the previous request
(modules/context/history_tail.py), and what they see is what a whole read would give."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from modules.context.history_tail import HistoryTail
from modules.context.view import HistoryRow
from modules.storage import conversations
from modules.storage import messages as message_store
from modules.storage.db import Database
from modules.storage.messages import MessageDraft
from modules.storage.users import get_or_create_user


@pytest.fixture
def history(tmp_path, monkeypatch) -> Iterator[tuple]:
    db = Database(f"sqlite:///{tmp_path / 'app.db'}")
    db.migrate()
    conv, master = conversations.create_conversation(db, get_or_create_user(db, "u").id, "t")
    fetched: list[tuple[int, int]] = []  # (after_seq, rows returned) of each read of the database
    read = message_store.history_after

    def spy(db_, agent_id, after_seq):
        rows = read(db_, agent_id, after_seq)
        fetched.append((after_seq, len(rows)))
        return rows

    monkeypatch.setattr(message_store, "history_after", spy)

    def add(*texts: str) -> None:
        message_store.append_messages(db, conv.id, master.id, [MessageDraft(role="user", content=t) for t in texts])

    def whole(after_seq: int) -> list[HistoryRow]:
        return [HistoryRow.from_row(r) for r in read(db, master.id, after_seq)]

    yield db, master, add, whole, fetched
    db.dispose()


def test_each_read_fetches_only_what_was_written_since_the_last(history):
    db, master, add, whole, fetched = history
    tail = HistoryTail(master.id)
    add("a", "b", "c")
    assert [r.content for r in tail.read(db, -1)] == ["a", "b", "c"]
    add("d", "e")
    assert tail.read(db, -1) == whole(-1)
    assert tail.read(db, -1) == whole(-1)
    assert fetched == [(-1, 3), (2, 2), (4, 0)]


def test_a_newer_summary_drops_what_it_covers_and_an_older_one_reads_anew(history):
    db, master, add, whole, fetched = history
    tail = HistoryTail(master.id)
    add("a", "b", "c", "d")
    tail.read(db, -1)
    add("e")
    assert tail.read(db, 1) == whole(1)  # a summary through seq 1 was written meanwhile
    assert tail.read(db, 6) == whole(6) == []  # one past everything held: nothing is kept
    add("f")
    assert [r.content for r in tail.read(db, -1)] == ["a", "b", "c", "d", "e", "f"]  # no summary any more
    assert fetched == [(-1, 4), (3, 1), (6, 0), (-1, 6)]


def test_a_read_returns_a_copy_the_caller_may_change(history):
    db, master, add, whole, _fetched = history
    tail = HistoryTail(master.id)
    add("a", "b")
    tail.read(db, -1).clear()
    assert tail.read(db, -1) == whole(-1)
