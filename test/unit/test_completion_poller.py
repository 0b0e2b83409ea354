"""The design card's notification pool at a turn's end: `poll_completion_notifications` collects every pending
completion inside the turn manager's claim, the first N-1 into the history as notices, the last as the trigger."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from modules.multi_agent.message_router import MessageRouter, PendingMessage
from modules.statuses import MessageSource
from modules.storage import conversations
from modules.storage import messages as message_store
from modules.storage import pending_messages as queue
from modules.storage.db import Database
from modules.storage.message_meta import MessageMeta
from modules.storage.users import get_or_create_user
from modules.usage.budgets import Budgets
from server.chat_flow_task_main import poll_completion_notifications


@pytest.fixture
def pool(tmp_path):
    db = Database(f"sqlite:///{tmp_path / 'app.db'}")
    db.migrate()
    conv, master = conversations.create_conversation(db, get_or_create_user(db, "u").id, "t")
    rt = SimpleNamespace(router=MessageRouter(db), budgets=Budgets(db, []))
    yield SimpleNamespace(db=db, rt=rt, conv=conv, master=master)
    db.dispose()


def _notice(pool, content: str) -> None:
    notice = PendingMessage.new(conversation_id=pool.conv.id, target_agent_id=pool.master.id, type="notice",
                                content=content, source_display_name="run_command",
                                meta=MessageMeta(source=MessageSource.BACKGROUND_COMMAND))
    with pool.db.write() as s:
        pool.rt.router.enqueue_in(s, notice)


def test_the_poller_starts_one_turn_on_every_pending_completion_the_last_as_its_trigger(pool):
    claimed = []

    def claim(agent_id, collect):  # the TurnManager's claim: its transaction, its new task
        with pool.db.write() as s:
            claimed.append((agent_id, [m.content for m in collect(s, pool.master, "task-2")]))
        return "task-2"

    assert poll_completion_notifications(pool.rt, pool.master.id, claim) is None and claimed == []  # none pending
    for i in range(3):
        _notice(pool, f"[cmd {i} done]")
    assert poll_completion_notifications(pool.rt, pool.master.id, claim) == "task-2"
    assert claimed == [(pool.master.id, ["[cmd 0 done]", "[cmd 1 done]", "[cmd 2 done]"])]
    history = message_store.list_messages(pool.db, pool.master.id)
    assert [(m.content, m.typed_meta.starts_work) for m in history] == [
        ("[cmd 0 done]", False), ("[cmd 1 done]", False), ("[cmd 2 done]", True)]
    assert queue.list_queued(pool.db, pool.master.id) == []
    assert all(queue.get_message(pool.db, m.message_id).consumed_by.startswith("task-2:") for m in history)


def test_a_claim_that_starts_no_turn_leaves_the_completions_queued(pool):
    _notice(pool, "[cmd done]")
    assert poll_completion_notifications(pool.rt, pool.master.id, lambda agent_id, collect: None) is None
    assert [m.content for m in queue.list_queued(pool.db, pool.master.id)] == ["[cmd done]"]


def test_a_wake_for_a_message_just_queued_goes_to_the_claim_without_reading_the_queue_first(pool):
    """The router wakes an agent right after it committed a message to the agent's queue (issue 26: the look
    before the claim was a statement of every routed message); the claim looks under the agent's lock."""
    _notice(pool, "[cmd done]")
    looked: list[str] = []
    router = pool.rt.router
    pool.rt = SimpleNamespace(router=SimpleNamespace(has_queued=lambda agent_id: looked.append(agent_id) or True,
                                                     drain_to_history_in=router.drain_to_history_in),
                              budgets=Budgets(pool.db, []))
    claims: list[str] = []

    def claim(agent_id, collect):
        claims.append(agent_id)
        return None

    assert poll_completion_notifications(pool.rt, pool.master.id, claim, True) is None
    assert claims == [pool.master.id] and looked == []
    poll_completion_notifications(pool.rt, pool.master.id, claim)  # a turn's end looks first
    assert looked == [pool.master.id]
