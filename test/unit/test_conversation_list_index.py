"""The conversation list's pages read one user's rows in page order from the cursor on (migration 0014's
`ix_conversations_user_page`), never sorting the user's conversations nor skipping those before the cursor."""

from __future__ import annotations

from modules.storage import conversations
from modules.storage.conversation_pages import ConversationCursor
from modules.storage.db import Database
from modules.storage.users import get_or_create_user


def _plan(db: Database, user_id: int, before: ConversationCursor | None) -> str:
    """SQLite's plan of the page's statement with its values bound, as the server runs it (values written into
    the statement would let SQLite see the cursor's time twice and plan differently)."""
    compiled = conversations.page_select(user_id, 101, None, before).compile(db.engine)
    params = tuple(compiled.params[name] for name in compiled.positiontup or ())
    with db.read() as s:
        rows = s.connection().exec_driver_sql("EXPLAIN QUERY PLAN " + str(compiled), params)
        return "\n".join(row[-1] for row in rows)


def test_a_page_is_a_range_of_the_lists_index_in_its_order(tmp_path):
    db = Database(f"sqlite:///{tmp_path / 'app.db'}")
    try:
        db.migrate()
        user = get_or_create_user(db, "alice")
        for i in range(3):
            conversations.create_conversation(db, user.id, f"t{i}", "MasterAgent")
        first = conversations.list_conversations(db, user.id, 1)
        assert first.next_cursor is not None

        assert "USING INDEX ix_conversations_user_page (user_id=?)" in _plan(db, user.id, None)
        deeper = _plan(db, user.id, first.next_cursor)
        assert "USING INDEX ix_conversations_user_page (user_id=? AND updated_at<?)" in deeper  # from the cursor on
        assert "TEMP B-TREE" not in deeper  # in the index's order: no sort
    finally:
        db.dispose()
