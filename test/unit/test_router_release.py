"""Releasing a user message held for routing (acknowledged first: docs/ARCHITECTURE.md, "The path of a user
message"): it is queued once, for the receiver routing chose, and delivered by that receiver's state; a second
release (another process routed it first) queues nothing; a terminated or unknown receiver refuses it, and the
message stays held."""

from __future__ import annotations

import threading
from dataclasses import replace

import pytest

from modules.multi_agent.message_router import TRIGGERED_NEW_TURN, MessageRouter, PendingMessage, RouteError
from modules.multi_agent.router_hooks import RouterHooks
from modules.statuses import MessageSource, Route, Visibility
from modules.storage import pending_messages as queue
from modules.storage import unrouted
from modules.storage.db import Database
from modules.storage.group_commit import GroupCommit
from modules.storage.message_meta import MessageMeta
from test.conftest import wait_until
from test.unit.teams import conversation_with_sub_agent


@pytest.fixture
def team(tmp_path):
    db = Database(f"sqlite:///{tmp_path / 'app.db'}")
    conv, master, sub, manager = conversation_with_sub_agent(db)
    woken: list[str] = []
    router = MessageRouter(db, hooks=RouterHooks(wake=lambda agent_id: woken.append(agent_id) or f"task-of-{agent_id}"))
    yield db, conv, master, sub, manager, router, woken
    db.dispose()


def _held(db, conv, master, content="hello") -> PendingMessage:
    """As the inbox stores a sent message: addressed to the master until it is routed."""
    message = PendingMessage.new(conversation_id=conv.id, target_agent_id=master.id, type="message",
                                 content=content, source_display_name="user",
                                 meta=MessageMeta(source=MessageSource.USER, visibility=Visibility.CHAT))
    with db.write() as s:
        unrouted.store_in(s, message.row_values(), routing_process="p1")
    return message


def _routed(message: PendingMessage, agent, **changes) -> PendingMessage:
    fields = dict(type="message", question_id=None, meta=message.meta.merged(route=Route.PIPELINE)) | changes
    return PendingMessage.new(conversation_id=message.conversation_id, target_agent_id=agent.id,
                              content=message.content, source_display_name="user", id=message.id, **fields)


def test_a_released_message_is_queued_once_for_its_receiver_and_wakes_it(team):
    db, conv, master, sub, _, router, woken = team
    held = _held(db, conv, master)
    result = router.release(_routed(held, sub))
    assert (result.delivery, result.task_id) == (TRIGGERED_NEW_TURN, f"task-of-{sub.id}") and woken == [sub.id]
    [row] = queue.list_queued(db, sub.id)
    assert (row.id, row.content, row.meta["route"]) == (held.id, "hello", Route.PIPELINE)
    assert unrouted.unrouted(db, conv.id) == [] and queue.list_queued(db, master.id) == []


def test_a_second_release_of_the_same_message_queues_nothing(team):
    db, conv, master, sub, _, router, woken = team
    held = _held(db, conv, master)
    assert router.release(_routed(held, sub)) is not None
    assert router.release(_routed(held, master)) is None  # another process routed it first
    assert [r.id for r in queue.list_queued(db, sub.id)] == [held.id]
    assert queue.list_queued(db, master.id) == [] and woken == [sub.id]


def test_an_answer_keeps_its_type_and_question(team):
    db, conv, master, sub, _, router, _ = team
    held = _held(db, conv, master, "Lisbon")
    router.release(_routed(held, sub, type="answer", question_id="q_1"))
    [row] = queue.list_queued(db, sub.id)
    assert (row.type, row.question_id) == ("answer", "q_1")


def test_a_terminated_or_unknown_receiver_refuses_and_the_message_stays_held(team):
    db, conv, master, sub, manager, router, woken = team
    held = _held(db, conv, master)
    assert manager.mark_terminated(sub.id)
    with pytest.raises(RouteError, match=f"{sub.display_name} takes no more messages"):
        router.release(_routed(held, sub))
    with pytest.raises(RouteError, match="no-such-agent takes no more messages"):
        router.release(replace(_routed(held, sub), target_agent_id="no-such-agent"))
    assert [r.id for r in unrouted.unrouted(db, conv.id)] == [held.id]
    assert queue.list_queued(db, sub.id) == [] and woken == []
    # The inbox then hands it to the master: released once, at last.
    assert router.release(_routed(held, master)).delivery == TRIGGERED_NEW_TURN
    assert [r.id for r in queue.list_queued(db, master.id)] == [held.id] and woken == [master.id]


def test_releases_of_one_batch_share_a_transaction_and_each_hear_their_own_answer(team):
    """Routing workers of many conversations release at once (issue 26): one transaction for the batch; a
    terminated receiver refuses only its own message, a message released before answers None."""
    db, conv, master, sub, manager, _router, _woken = team
    writer = GroupCommit(db)
    router = MessageRouter(db, writer=writer, hooks=RouterHooks(wake=lambda agent_id: f"task-of-{agent_id}"))
    to_master, to_terminated, twice = (_held(db, conv, master, text) for text in ("one", "two", "three"))
    assert router.release(_routed(twice, master)) is not None
    assert manager.mark_terminated(sub.id)
    hold = threading.Event()
    leader = threading.Thread(target=writer.call, args=(lambda s: hold.wait(30),), daemon=True)
    leader.start()
    wait_until(lambda: writer._leading and not writer._queue, what="a batch holding the lead")
    answers: dict[str, object] = {}

    def release(message: PendingMessage) -> None:
        try:
            answers[message.content] = router.release(message)
        except RouteError as exc:
            answers[message.content] = exc

    releases = [_routed(to_master, master), _routed(to_terminated, sub), _routed(twice, master)]
    threads = [threading.Thread(target=release, args=(m,), daemon=True) for m in releases]
    for queued, thread in enumerate(threads, 1):
        thread.start()
        wait_until(lambda n=queued: len(writer._queue) == n, what="the release queued behind the held batch")
    batches = writer.batches
    hold.set()
    for thread in [leader, *threads]:
        thread.join(30)
    assert writer.batches == batches + 2  # the held batch, then all three releases in one
    assert answers["one"].delivery == TRIGGERED_NEW_TURN
    assert str(answers["two"]) == "InfoAgent_1 takes no more messages"
    assert answers["three"] is None
    assert unrouted.unrouted(db, conv.id)[0].id == to_terminated.id  # still held
