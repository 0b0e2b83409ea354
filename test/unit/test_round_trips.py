"""Round trips to PostgreSQL on the routing path (docs/ARCHITECTURE.md, "Routing"): each is a green wait of the
sender or the receiver, so the path is held to its count. A batch of sends is one statement that commits on
its own (the receivers' lock and the insert in one CTE, in autocommit), a drain into the history is BEGIN,
claim, numbered insert, COMMIT, and a read is its statement alone (autocommit)."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from bench.routing.round_trips import RoundTrips
from modules.context.history_tail import HistoryTail
from modules.multi_agent import agent_state
from modules.multi_agent.agent_state import AgentStates
from modules.multi_agent.message_router import INJECTED_INLINE, MessageRouter, PendingMessage
from modules.statuses import MessageSource
from modules.storage.db import Database
from modules.storage.group_commit import GroupCommit
from modules.storage.message_meta import MessageMeta
from test.conftest import wait_until
from test.db_urls import fresh_database
from test.unit.teams import conversation_with_sub_agent


@pytest.fixture
def team(tmp_path) -> Iterator[tuple]:
    with fresh_database("postgresql", tmp_path) as url:
        db = Database(url, timeout_s=30)
        conv, master, _sub, _manager = conversation_with_sub_agent(db)
        AgentStates(db).transition(master.id, agent_state.RUNNING)
        writer = GroupCommit(db)
        yield db, conv, master, writer, MessageRouter(db, writer=writer), RoundTrips(db.engine)
        db.dispose()


def _message(conv, target_id: str, content: str) -> PendingMessage:
    return PendingMessage.new(conversation_id=conv.id, target_agent_id=target_id, type="message", content=content,
                              source_display_name="user", meta=MessageMeta(source=MessageSource.USER))


def test_a_batch_of_sends_is_one_round_trip(team):
    db, conv, master, writer, router, trips = team
    hold = threading.Event()
    leader = threading.Thread(target=writer.call, args=(lambda s: hold.wait(30),), daemon=True)
    leader.start()
    wait_until(lambda: writer._leading and not writer._queue, what="a batch holding the lead")
    answers: list[object] = []
    senders = [threading.Thread(target=lambda n=n: answers.append(
        router.route_message(master.id, _message(conv, master.id, f"m{n}")).delivery), daemon=True) for n in range(5)]
    for queued, thread in enumerate(senders, 1):
        thread.start()
        wait_until(lambda n=queued: len(writer._queue) == n, what="the send queued behind the held batch")
    trips.reset()
    batches = writer.batches
    hold.set()
    for thread in [leader, *senders]:
        thread.join(30)
    assert answers == [INJECTED_INLINE] * 5 and writer.batches == batches + 2  # the held batch, then the sends
    assert (trips.begins, trips.statements, trips.ends) == (0, 1, 0)


def test_a_drain_into_the_history_is_four_round_trips_and_its_read_one(team):
    db, conv, master, _writer, router, trips = team
    for n in range(3):
        router.route_message(master.id, _message(conv, master.id, f"m{n}"))
    trips.reset()
    drained = router.consume_pending_messages(master.id, conv.id, "turn")
    assert [m.seq for m in drained] == [0, 1, 2]
    assert (trips.begins, trips.statements, trips.ends) == (1, 2, 1)  # BEGIN, claim, insert numbered, COMMIT
    trips.reset()
    assert [r.seq for r in HistoryTail(master.id).read(db, -1)] == [0, 1, 2]
    assert (trips.begins, trips.statements, trips.ends) == (0, 1, 0)
