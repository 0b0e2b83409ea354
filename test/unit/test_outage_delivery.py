"""A message stored just before the database went away is acknowledged as `queued`, never as lost, and the
log names it."""

from __future__ import annotations

import logging

from modules.multi_agent import message_router
from modules.multi_agent.message_router import QUEUED, MessageRouter, PendingMessage
from modules.statuses import MessageSource
from modules.storage import conversations
from modules.storage import pending_messages as queue
from modules.storage.db import Database, DatabaseUnavailable
from modules.storage.message_meta import MessageMeta
from modules.storage.users import get_or_create_user


def test_a_message_stored_before_the_database_went_away_is_queued(tmp_path, monkeypatch, caplog):
    db = Database(f"sqlite:///{tmp_path / 'app.db'}")
    db.migrate()
    user = get_or_create_user(db, "alice")
    conv, master = conversations.create_conversation(db, user.id, "outage")
    router = MessageRouter(db)

    def gone(_message, *, receiver=None):
        raise DatabaseUnavailable("the database is unavailable: connection refused")

    monkeypatch.setattr(router, "deliver", gone)
    message = PendingMessage.new(conversation_id=conv.id, target_agent_id=master.id, type="message",
                                 content="hello", source_display_name="user",
                                 meta=MessageMeta(source=MessageSource.USER))
    with caplog.at_level(logging.WARNING, logger=message_router.__name__):
        routed = router.route_message(master.id, message)
    assert routed.delivery == QUEUED and routed.task_id is None
    assert [r.getMessage() for r in caplog.records if r.name == message_router.__name__] == [
        f"message {message.id} is stored, but the database went away before its delivery"]
    assert [row.id for row in queue.list_queued(db, master.id)] == [message.id]
    assert queue.agents_with_queued(db) == [master.id]  # what the sweep after the outage starts turns for
    db.dispose()
