"""The held messages of a process that died are taken over by one live process (modules/storage/unrouted.py,
server/routing_inbox.py): only once its process is forgotten, by one survivor only (a compare-and-set), never
where another live process's worker routes the conversation, and routed in send order; a resume whose read
fails tries again until it succeeds."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from modules.multi_agent.message_router import PendingMessage
from modules.statuses import MessageSource, Route
from modules.storage import conversations, processes, unrouted
from modules.storage.db import Database, DatabaseUnavailable
from modules.storage.deadline import DeadlineExceeded
from modules.storage.message_meta import MessageMeta
from modules.storage.models import PendingMessageRow, ServerProcess
from modules.storage.users import get_or_create_user
from server import routing_inbox
from server.cluster import Membership
from test.db_urls import migrated_database
from test.unit.routing_inbox_double import Inbox


@pytest.fixture(params=["sqlite", "postgresql", "mariadb"])
def db(request, tmp_path):
    with migrated_database(request.param, tmp_path) as database:
        yield database


def conversation(db: Database, name: str = "t"):
    return conversations.create_conversation(db, get_or_create_user(db, "u").id, name)


def hold(db: Database, conv, master, content: str, process: str) -> str:
    message = PendingMessage.new(conversation_id=conv.id, target_agent_id=master.id, type="message",
                                 content=content, source_display_name="user",
                                 meta=MessageMeta(source=MessageSource.USER, route=Route.PIPELINE))
    with db.write() as s:
        unrouted.store_in(s, message.row_values(), routing_process=process)
    return message.id


def routing_processes(db: Database, conv) -> list[str | None]:
    with db.read() as s:
        return [row.routing_process for row in s.query(PendingMessageRow)
                .filter_by(conversation_id=conv.id).order_by(PendingMessageRow.seq)]


def test_a_forgotten_processs_held_messages_go_to_one_survivor_only(db):
    dead, first, second = (processes.register(db) for _ in range(3))
    conv, master = conversation(db)
    hold(db, conv, master, "one", dead)
    hold(db, conv, master, "two", dead)
    assert unrouted.claim_orphans(db, first) == []  # its process is registered still: its worker routes them
    processes.forget(db, {dead})
    assert unrouted.orphaned_conversations(db, second) == [conv.id]  # both survivors see them
    assert unrouted.claim_orphans(db, first) == [conv.id]
    with db.write() as s:  # the second claims on what it read before the first claimed: nothing is left
        assert not unrouted.claim_orphans_in(s, conv.id, second)
    assert unrouted.claim_orphans(db, second) == []
    assert routing_processes(db, conv) == [first, first]
    assert unrouted.conversations_routed_by(db, first) == [conv.id]
    assert unrouted.conversations_routed_by(db, second) == []


def test_a_conversation_another_live_process_routes_is_left_to_it(db):
    dead, live, me = (processes.register(db) for _ in range(3))
    conv, master = conversation(db)
    hold(db, conv, master, "left by the dead one", dead)
    hold(db, conv, master, "sent through a live one", live)  # its worker routes both, in send order
    mine, my_master = conversation(db, "mine")
    hold(db, mine, my_master, "mine already", me)
    hold(db, mine, my_master, "left by the dead one", dead)
    processes.forget(db, {dead})
    assert unrouted.claim_orphans(db, me) == [mine.id]
    assert routing_processes(db, conv) == [dead, live] and routing_processes(db, mine) == [me, me]
    processes.forget(db, {live})  # once the live one is gone too, its conversation is an orphan as well
    assert unrouted.claim_orphans(db, me) == [conv.id] and routing_processes(db, conv) == [me, me]


def test_messages_held_before_the_routing_process_was_recorded_are_orphans(db):
    me = processes.register(db)
    conv, master = conversation(db)
    message = hold(db, conv, master, "from an older version", me)
    with db.write() as s:
        s.query(PendingMessageRow).filter_by(id=message).update({"routing_process": None})
    assert unrouted.claim_orphans(db, me) == [conv.id] and routing_processes(db, conv) == [me]


@pytest.fixture
def sqlite_db(tmp_path):
    database = Database(f"sqlite:///{tmp_path / 'app.db'}")
    database.migrate()
    yield database
    database.dispose()


def survivor(db: Database, spawn=lambda fn, *args: fn(*args)) -> Inbox:
    inbox = Inbox(db, spawn)
    inbox._rt.membership = SimpleNamespace(process_id=processes.register(db))
    return inbox


def test_the_membership_sweep_hands_the_forgotten_processs_messages_to_the_inbox_in_send_order(sqlite_db):
    db = sqlite_db
    membership = Membership(db)
    inbox = survivor(db)
    inbox._rt.membership = membership
    membership.on_take_over(inbox.take_over)
    conv, master = conversation(db)
    with db.write() as s:  # a process whose heartbeat stopped long ago (killed, never restarted)
        s.add(ServerProcess(id="dead", host="elsewhere", pid=1, started_at=0.0, heartbeat_at=0.0))
    for content in ("first", "second", "third"):
        hold(db, conv, master, content, "dead")
    membership.take_over(SimpleNamespace(recover_interrupted=lambda gone: 0))
    assert inbox.routed == ["first", "second", "third"]
    assert unrouted.unrouted(db, conv.id) == []
    membership.take_over(SimpleNamespace(recover_interrupted=lambda gone: 0))
    assert inbox.routed == ["first", "second", "third"]  # routed once


def test_resume_routes_its_own_and_the_orphans_but_not_a_live_peers(sqlite_db):
    db = sqlite_db
    inbox = survivor(db)
    me, peer = inbox._rt.membership.process_id, processes.register(db)
    for name, process in (("mine", me), ("orphan", "forgotten"), ("peer's", peer)):
        conv, master = conversation(db, name)
        hold(db, conv, master, name, process)
    inbox.resume()
    assert sorted(inbox.routed) == ["mine", "orphan"]


def test_a_resume_whose_read_fails_tries_again_until_it_succeeds(sqlite_db, monkeypatch):
    db = sqlite_db
    inbox = survivor(db)
    conv, master = conversation(db)
    hold(db, conv, master, "held across the outage", inbox._rt.membership.process_id)
    waits: list[float] = []
    monkeypatch.setattr(routing_inbox, "time", SimpleNamespace(sleep=waits.append))
    real, calls = unrouted.conversations_routed_by, []

    def read(database, process_id):
        calls.append(1)
        if len(calls) <= 9:  # the database did not answer yet, just after an outage ended
            raise DeadlineExceeded("the database did not answer within 5 s")
        return real(database, process_id)

    monkeypatch.setattr(unrouted, "conversations_routed_by", read)
    inbox.resume()
    assert inbox.routed == ["held across the outage"] and len(calls) == 10
    assert waits == [1, 2, 4, 8, 16, 32] + [routing_inbox.RETRY_MAX_S] * 3  # doubling, never past the cap


def test_a_claim_that_fails_leaves_no_conversation_claimed_but_unrouted(sqlite_db, monkeypatch):
    db = sqlite_db
    inbox = survivor(db)
    for name in ("a", "b", "c"):
        conv, master = conversation(db, name)
        hold(db, conv, master, name, "forgotten")
    real, calls = unrouted.claim_orphans_in, []

    def claim(session, conversation_id, me):
        calls.append(conversation_id)
        if len(calls) == 2:  # the database stopped answering after the first claim committed
            raise DeadlineExceeded("the database did not answer within 5 s")
        return real(session, conversation_id, me)

    monkeypatch.setattr(unrouted, "claim_orphans_in", claim)
    with pytest.raises(DatabaseUnavailable):
        inbox.take_over()
    first = calls[0]
    assert unrouted.conversations_routed_by(db, inbox._rt.membership.process_id) == []  # nothing claimed waits
    assert len(inbox.routed) == 2  # the claimed one, and the one whose claim failed (its commit is unknown)
    inbox.take_over()  # the next sweep claims the rest
    assert sorted(inbox.routed) == ["a", "b", "c"] and unrouted.unrouted(db, first) == []
