"""The routing worker tries again when the database did not answer in time (seen under load in a cluster: a
held message waited for its conversation's next send, and its sender for a reply that never came)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from modules.multi_agent.message_router import PendingMessage
from modules.statuses import MessageSource, Route
from modules.storage import conversations, unrouted
from modules.storage.db import Database
from modules.storage.deadline import DeadlineExceeded
from modules.storage.message_meta import MessageMeta
from modules.storage.users import get_or_create_user
from server import routing_inbox
from server.routing_inbox import RoutingInbox


class Inbox(RoutingInbox):
    """Routing replaced by a record of what was routed; a task spawned runs at once (its sleep patched to 0)."""

    def __init__(self, db):
        super().__init__(SimpleNamespace(db=db, spawn=lambda fn, *args: fn(*args)), routing=None)
        self.routed: list[str] = []

    def _route(self, held):
        with self._rt.db.write() as s:
            unrouted.release_in(s, held.id, {"target_agent_id": held.target_agent_id, "type": held.type,
                                             "question_id": None, "meta": held.meta.dump()})
        self.routed.append(held.content)


@pytest.fixture
def held(tmp_path, monkeypatch):
    monkeypatch.setattr(routing_inbox, "RETRY_S", 0.0)
    db = Database(f"sqlite:///{tmp_path / 'app.db'}")
    db.migrate()
    conv, master = conversations.create_conversation(db, get_or_create_user(db, "u").id, "t")
    message = PendingMessage.new(conversation_id=conv.id, target_agent_id=master.id, type="message", content="hi",
                                 source_display_name="user",
                                 meta=MessageMeta(source=MessageSource.USER, route=Route.PIPELINE))
    with db.write() as s:
        unrouted.store_in(s, message.row_values())
    yield SimpleNamespace(db=db, conv=conv)
    db.dispose()


def failing(monkeypatch, times: int) -> list[int]:
    calls = []
    real = unrouted.unrouted

    def read(db, cid):
        calls.append(1)
        if len(calls) <= times:
            raise DeadlineExceeded("the database did not answer within 5 s")
        return real(db, cid)

    monkeypatch.setattr(unrouted, "unrouted", read)
    return calls


def test_a_worker_that_lost_the_database_for_a_moment_routes_without_another_send(held, monkeypatch):
    calls = failing(monkeypatch, 2)
    inbox = Inbox(held.db)
    inbox.kick(held.conv.id)
    assert inbox.routed == ["hi"] and len(calls) == 3
    assert inbox._failures == {}  # the count starts again after a success


def test_the_worker_gives_up_after_its_retries_until_the_next_send(held, monkeypatch):
    calls = failing(monkeypatch, 100)
    inbox = Inbox(held.db)
    inbox.kick(held.conv.id)
    assert inbox.routed == [] and len(calls) == routing_inbox.RETRIES + 1
    assert inbox._failures == {} and inbox._working == set()  # the next send's kick starts a worker
