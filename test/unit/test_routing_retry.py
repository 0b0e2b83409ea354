"""The routing worker tries again when the database did not answer in time (seen under load in a cluster: a
held message waited for its conversation's next send, and its sender for a reply that never came), and never
gives up while messages are held: its waits double up to a cap, and a conversation has one retry waiting at most."""

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
from test.unit.routing_inbox_double import Inbox


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
        unrouted.store_in(s, message.row_values(), routing_process="p1")
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


def test_the_worker_never_gives_up_and_its_waits_stop_growing_at_the_cap(held, monkeypatch):
    monkeypatch.setattr(routing_inbox, "RETRY_S", 1.0)
    waits: list[float] = []
    monkeypatch.setattr(routing_inbox, "time", SimpleNamespace(sleep=waits.append))
    calls = failing(monkeypatch, 12)  # more than twice the five retries it used to give up after
    inbox = Inbox(held.db)
    inbox.kick(held.conv.id)
    assert inbox.routed == ["hi"] and len(calls) == 13
    assert waits == [1, 2, 4, 8, 16, 32] + [routing_inbox.RETRY_MAX_S] * 6
    assert inbox._failures == {} and inbox._working == set() and inbox._retrying == set()


def test_a_conversation_has_one_retry_waiting_however_often_its_worker_fails(held, monkeypatch):
    spawned: list[tuple] = []
    calls = failing(monkeypatch, 3)
    inbox = Inbox(held.db, spawn=lambda fn, *args: spawned.append((fn, args)))
    for _ in range(3):  # the first kick, then two sends while its retry waits
        inbox.kick(held.conv.id)
        fn, args = spawned.pop()
        fn(*args)  # the worker, which fails
    assert [fn.__name__ for fn, _ in spawned] == ["_retry_later"] and len(calls) == 3
    fn, args = spawned.pop()
    fn(*args)  # the retry kicks a worker
    fn, args = spawned.pop()
    fn(*args)
    assert inbox.routed == ["hi"] and spawned == [] and inbox._retrying == set()


def test_a_retry_that_finds_nothing_held_ends(held, monkeypatch):
    inbox = Inbox(held.db)
    inbox.kick(held.conv.id)
    calls = failing(monkeypatch, 0)
    inbox._retry_later(held.conv.id, 0.0)
    assert inbox.routed == ["hi"] and len(calls) == 1 and inbox._working == set()


def test_a_failure_that_lasts_logs_its_stack_trace_once_then_one_line_a_try(held, monkeypatch, caplog):
    """The worker never gives up: an hour-long outage would otherwise log a stack trace a minute per conversation."""
    failing(monkeypatch, 5)
    inbox = Inbox(held.db)
    with caplog.at_level("WARNING", logger=routing_inbox.__name__):
        inbox.kick(held.conv.id)
    tries = [r for r in caplog.records if "routing the held messages of" in r.getMessage()]
    assert inbox.routed == ["hi"] and len(tries) == 5
    assert [r.exc_info is not None for r in tries] == [True, False, False, False, False]
    assert all("did not answer within 5 s" in r.getMessage() for r in tries[1:])
