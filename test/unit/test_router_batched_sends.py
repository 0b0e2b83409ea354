"""Sends that share one group-commit batch (`MessageRouter.route_message`, `GroupCommit.call_batched`): their
receivers are locked in one statement and their messages queued in one, each sender still hears its own
answer (a terminated or unknown receiver fails only its own send), and delivery decides on the receiver's
state read under that lock, without reading the agent again."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
from sqlalchemy import event

from modules.multi_agent import agent_state
from modules.multi_agent.agent_state import AgentStates
from modules.multi_agent.message_router import INJECTED_INLINE, MessageRouter, PendingMessage, RouteError
from modules.statuses import MessageSource
from modules.storage import pending_messages as queue
from modules.storage.db import Database
from modules.storage.group_commit import GroupCommit
from modules.storage.message_meta import MessageMeta
from test.conftest import wait_until
from test.db_urls import fresh_database
from test.unit.teams import conversation_with_sub_agent


@pytest.fixture(params=["sqlite", "postgresql", "mariadb"])
def team(request, tmp_path) -> Iterator[tuple]:
    with fresh_database(request.param, tmp_path) as url:
        db = Database(url, timeout_s=30)
        conv, master, sub, manager = conversation_with_sub_agent(db)
        yield db, conv, master, sub, manager
        db.dispose()


def _message(conv, target_id: str, content: str) -> PendingMessage:
    return PendingMessage.new(conversation_id=conv.id, target_agent_id=target_id, type="message", content=content,
                              source_display_name="user", meta=MessageMeta(source=MessageSource.USER))


def test_sends_of_one_batch_each_hear_their_own_answer(team):
    db, conv, master, sub, manager = team
    AgentStates(db).transition(master.id, agent_state.RUNNING)
    assert manager.mark_terminated(sub.id)
    writer = GroupCommit(db)
    router = MessageRouter(db, writer=writer)
    hold = threading.Event()
    leader = threading.Thread(target=writer.call, args=(lambda s: hold.wait(30),), daemon=True)
    leader.start()
    wait_until(lambda: writer._leading and not writer._queue, what="a batch holding the lead")

    sends = [_message(conv, master.id, "first"), _message(conv, sub.id, "to the terminated"),
             _message(conv, "no-such-agent", "to nobody"), _message(conv, master.id, "second")]
    answers: dict[str, object] = {}

    def send(message: PendingMessage) -> None:
        try:
            answers[message.content] = router.route_message(message.target_agent_id, message)
        except RouteError as exc:
            answers[message.content] = exc

    senders = [threading.Thread(target=send, args=(m,), daemon=True) for m in sends]
    for queued, thread in enumerate(senders, 1):  # one at a time, so the queue holds them in this order
        thread.start()
        wait_until(lambda n=queued: len(writer._queue) == n, what="the send queued behind the held batch")
    batches = writer.batches
    hold.set()
    for thread in [leader, *senders]:
        thread.join(30)
    assert writer.batches == batches + 2  # the held batch, then all four sends in one

    assert answers["first"].delivery == INJECTED_INLINE and answers["second"].delivery == INJECTED_INLINE
    assert str(answers["to the terminated"]) == "InfoAgent_1 was terminated and takes no more messages"
    assert str(answers["to nobody"]) == "no agent no-such-agent"
    assert [m.content for m in queue.list_queued(db, master.id)] == ["first", "second"]
    assert queue.list_queued(db, sub.id) == []


def test_a_send_reads_its_receiver_once_under_the_lock(team):
    db, conv, master, _sub, _manager = team
    AgentStates(db).transition(master.id, agent_state.RUNNING)
    router = MessageRouter(db)
    statements: list[str] = []

    def count(conn, cursor, statement, parameters, context, executemany) -> None:
        statements.append(statement)

    event.listen(db.engine, "before_cursor_execute", count)
    try:
        assert router.route_message(master.id, _message(conv, master.id, "hi")).delivery == INJECTED_INLINE
    finally:
        event.remove(db.engine, "before_cursor_execute", count)
    if db.dialect == "postgresql":  # one statement: the lock in a CTE that the insert reads
        assert len(statements) == 1 and 'FROM "agents"' in statements[0] and "FOR SHARE" in statements[0] \
            and 'INSERT INTO "pending_messages"' in statements[0], statements
        return
    assert len([s for s in statements if "FROM agents" in s]) == 1, statements
    queueing = [s for s in statements if "pending_messages" in s]
    assert len(queueing) == 1 and queueing[0].lstrip().upper().startswith("INSERT"), queueing  # no look first


def test_a_retried_send_is_queued_once_by_its_one_insert(team):
    db, conv, master, _sub, _manager = team
    AgentStates(db).transition(master.id, agent_state.RUNNING)
    router = MessageRouter(db)
    message = _message(conv, master.id, "once")
    for _ in range(2):
        assert router.route_message(master.id, message).delivery == INJECTED_INLINE
    assert [m.content for m in queue.list_queued(db, master.id)] == ["once"]
