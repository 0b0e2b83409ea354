"""Many rows in one INSERT on every database (modules/storage/bulk_insert.py): a batch's sends and a drain's
history entries are one statement each, store exactly what an executemany would (JSON, NULLs, floats), and a
send whose id is queued already is skipped."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sqlalchemy import event, insert, select

from modules.statuses import MessageSource
from modules.storage import messages as message_store
from modules.storage import pending_messages as queue
from modules.storage.db import Database
from modules.storage.message_meta import MessageMeta
from modules.storage.messages import HISTORY, MessageDraft
from test.db_urls import fresh_database
from test.unit.teams import conversation_with_sub_agent


@pytest.fixture(params=["sqlite", "postgresql", "mariadb"])
def team(request, tmp_path) -> Iterator[tuple]:
    with fresh_database(request.param, tmp_path) as url:
        db = Database(url, timeout_s=30)
        conv, master, _sub, _manager = conversation_with_sub_agent(db)
        statements: list[str] = []
        event.listen(db.engine, "before_cursor_execute", lambda *a: statements.append(a[2]))
        yield db, conv, master, statements
        db.dispose()


def _send(conv, master, n: int, **values) -> dict:
    return dict(id=f"m{n}", conversation_id=conv.id, target_agent_id=master.id, source_agent_id=None,
                source_display_name="user", type="message", content=f"text {n}", question_id=None,
                meta=MessageMeta(source=MessageSource.USER, question_id=f"q{n}").dump(), created_at=1000.5 + n,
                **values)


def test_a_batch_of_sends_is_one_insert_that_skips_a_queued_id(team):
    db, conv, master, statements = team
    with db.write() as s:
        queue.queue_in(s, [_send(conv, master, 1)])
    statements.clear()
    with db.write() as s:
        queue.queue_in(s, [_send(conv, master, n) for n in (1, 2, 3, 2)])
    assert len([s for s in statements if "pending_messages" in s]) == 1, statements
    stored = queue.list_queued(db, master.id)
    assert [(m.id, m.content, m.source_agent_id, m.created_at) for m in stored] == [
        ("m1", "text 1", None, 1001.5), ("m2", "text 2", None, 1002.5), ("m3", "text 3", None, 1003.5)]
    assert [m.typed_meta.question_id for m in stored] == ["q1", "q2", "q3"]


def test_a_drains_history_entries_are_one_insert_read_back_as_written(team):
    db, conv, master, statements = team
    calls = [{"id": "c1", "type": "function", "function": {"name": "run_command", "arguments": "{}"}}]
    drafts = [MessageDraft(role="user", content="hi"), MessageDraft(role="assistant", tool_calls=calls),
              MessageDraft(role="tool", content='{"ok": true}', tool_call_id="c1", name="run_command")]
    statements.clear()
    written = message_store.append_messages(db, conv.id, master.id, drafts)
    assert len([s for s in statements if "INSERT" in s.upper()]) == 1, statements
    stored = message_store.list_messages(db, master.id)
    assert [(m.seq, m.role, m.content, m.tool_calls, m.tool_call_id, m.name) for m in stored] == [
        (0, "user", "hi", None, None, None), (1, "assistant", None, calls, None, None),
        (2, "tool", '{"ok": true}', None, "c1", "run_command")]
    assert [m.meta for m in stored] == [m.meta for m in written]


def test_a_json_none_is_stored_as_sqlalchemys_own_insert_stores_it(team):
    """JSON null, not SQL NULL, on every database (json_to_recordset reads a JSON null as SQL NULL)."""
    db, conv, master, _statements = team
    message_store.append_messages(db, conv.id, master.id, [MessageDraft(role="user", content=f"{n}") for n in (0, 1)])
    with db.write() as s:
        s.execute(insert(HISTORY), [dict(message_id="plain", conversation_id=conv.id, agent_id=master.id, seq=2,
                                         role="user", content="2", tool_calls=None, metadata={}, created_at=1.0)])
    with db.read() as s:
        stored = s.execute(select(HISTORY.c.seq, HISTORY.c.tool_calls.is_(None))
                           .where(HISTORY.c.agent_id == master.id).order_by(HISTORY.c.seq)).all()
    assert [seq for seq, _ in stored] == [0, 1, 2]
    assert len({is_null for _, is_null in stored}) == 1, stored
