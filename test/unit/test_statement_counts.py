"""The database's own counts of what it was sent (modules/storage/statement_counts.py): each statement once, by its
verb, an executemany as one, a savepoint's statements apart; a write transaction counted when it commits."""

from __future__ import annotations

import pytest
from sqlalchemy import text

from modules.storage import conversations, messages
from modules.storage.messages import MessageDraft
from modules.storage.statement_counts import StatementCounts
from modules.storage.users import get_or_create_user
from server.metrics import Metrics
from test.db_urls import migrated_database


@pytest.fixture(params=["sqlite", "postgresql"])
def db(request, tmp_path):
    with migrated_database(request.param, tmp_path) as database:
        yield database


def _since(before: dict[str, int], counts: StatementCounts) -> dict[str, int]:
    return {verb: n - before[verb] for verb, n in counts.statements().items() if n != before[verb]}


def test_statements_are_counted_by_verb_and_commits_by_write(db):
    counts = db.statement_counts
    conv, master = conversations.create_conversation(db, get_or_create_user(db, "alice").id, "t")
    before, commits = counts.statements(), counts.commits()

    assert conversations.get_conversation(db, conv.id) is not None
    assert _since(before, counts) == {"select": 1}

    before = counts.statements()
    with db.write() as s:
        messages.append_in(s, conv.id, master.id, [MessageDraft(role="user", content=f"m{k}") for k in range(3)])
        with s.begin_nested():  # (as a session store's write on PostgreSQL: SessionStore.set_in)
            s.execute(text("SELECT 1"))
    written = _since(before, counts)
    assert written.get("savepoint") == 2  # SAVEPOINT and RELEASE around the statement
    assert written.get("insert", 0) >= 1  # the messages (in one executemany or one each)
    assert counts.commits() == commits + 1

    with pytest.raises(RuntimeError), db.write() as s:
        s.execute(text("SELECT 1"))
        raise RuntimeError("rolled back")
    assert counts.commits() == commits + 1  # a write that rolled back committed nothing


def test_the_counts_reach_the_metrics_exposition(db):
    metrics = Metrics()
    metrics.watch_database(db.statement_counts.statements, db.statement_counts.commits)
    conversations.create_conversation(db, get_or_create_user(db, "alice").id, "t")
    body = metrics.exposition().decode()
    selects = db.statement_counts.statements()["select"]
    assert f'chat_database_statements_total{{verb="select"}} {float(selects)}' in body
    assert f"chat_database_commits_total {float(db.statement_counts.commits())}" in body
    assert db.statement_counts.commits() >= 2  # the user and the conversation with its master
