"""The statements every stream runs are built once (issue 26): on SQLite, building a SELECT or an UPDATE (its clauses,
their coercions, its cache key) cost about 150 µs of CPU, more than running it (about 100 µs), and a streamed reply
ran some forty of them."""

from __future__ import annotations

import threading
from collections import Counter

import pytest
from sqlalchemy.sql import dml, selectable

from modules.multi_agent.message_router import TRIGGERED_NEW_TURN, PendingMessage
from modules.statuses import AgentState, MessageSource, Route, Visibility
from modules.storage import agents, commands, conversations, messages, pending_messages, summaries, tasks, unrouted
from modules.storage.db import Database
from modules.storage.message_meta import MessageMeta, RoutedTo
from modules.storage.session_store import SessionStore
from test.unit.teams import conversation_with_sub_agent

BUILDERS = {"Select.where": selectable.Select, "Update.where": dml.Update, "Update.values": dml.Update,
            "Insert.values": dml.Insert}


@pytest.fixture
def built(monkeypatch):
    """How often each builder method ran on the test's own thread (a thread an earlier test left behind, a
    cluster's membership loop, builds its own statements meanwhile)."""
    counts: Counter[str] = Counter()
    mine = threading.get_ident()
    for name, cls in BUILDERS.items():
        method = name.split(".")[1]
        original = getattr(cls, method)

        def counting(self, *args, _name=name, _original=original, **kwargs):
            if threading.get_ident() == mine:
                counts[_name] += 1
            return _original(self, *args, **kwargs)

        monkeypatch.setattr(cls, method, counting)
    return counts


def test_a_streams_reads_and_writes_build_no_statement(tmp_path, built):
    db = Database(f"sqlite:///{tmp_path / 'app.db'}")
    conv, master, sub, _manager = conversation_with_sub_agent(db)
    store = SessionStore(db)
    meta = MessageMeta(source=MessageSource.USER, visibility=Visibility.CHAT)

    def held(n: int) -> dict:
        return PendingMessage.new(conversation_id=conv.id, target_agent_id=master.id, type="message", content="hi",
                                  source_display_name="user", meta=meta, id=f"m{n}").row_values()

    def one_stream(n: int) -> str:
        """What a routed message and its turn read and write, by the storage functions they call."""
        with db.write() as s:
            conversations.touch_conversation_in(s, conv.id)
            unrouted.store_in(s, held(n), routing_process="p1")
        sent = conversations.get_conversation_and_master(db, conv.id, conv.user_id)
        assert sent is not None and (sent[0].id, sent[1]) == (conv.id, master.id)
        routed = conversations.get_conversation_and_agents(db, conv.id)
        assert routed is not None and [a.id for a in routed[1]] == [master.id, sub.id]
        assert [r.id for r in unrouted.unrouted(db, conv.id)] == [f"m{n}"]
        store.set("active", conv.id, {"agent": sub.id})
        assert store.get("active", conv.id) == {"agent": sub.id}
        with db.write() as s:
            assert unrouted.release_in(s, f"m{n}", {"target_agent_id": sub.id, "type": "message",
                                                     "question_id": None, "meta": meta.dump()})
            unrouted.record_delivery_in(s, f"m{n}", meta, RoutedTo(route=Route.FAST_PATH, delivery=TRIGGERED_NEW_TURN))
            agent = agents.lock_for_turn_in(s, sub.id)
            assert agent is not None and pending_messages.has_queued_in(s, sub.id)
            assert agents.set_state_in(s, sub.id, agent.version, AgentState.RUNNING)
            task = tasks.create_task_in(s, conversation_id=conv.id, agent_id=sub.id, task_type="sub_agent",
                                        owner="me")
        assert pending_messages.queued_count(db, sub.id) >= 1
        with db.write() as s:
            assert tasks.set_task_status_in(s, task.id, tasks.RUNNING, expected=(tasks.PENDING,))
        assert tasks.still_owned(db, task.id, "me") and not tasks.still_owned(db, task.id, "another")
        assert summaries.latest(db, sub.id) is None
        assert messages.history_after(db, sub.id, -1) == []
        assert not commands.any_running(db, conv.id)
        assert agents.list_of_kind(db, conv.id, "sub_agent")[0].id == sub.id
        assert messages.recent_chat(db, conv.id) == []
        with db.write() as s:
            assert tasks.active_task_of_agent_in(s, sub.id) == task.id
            assert messages.open_tool_calls_in(s, sub.id) == []
            assert pending_messages.requeue_unwritten_answers_in(s, sub.id) == 0
            assert tasks.set_task_status_in(s, task.id, tasks.SUCCEEDED, expected=tasks.ACTIVE_STATUSES,
                                            owner="me")
            assert not tasks.set_task_status_in(s, task.id, tasks.FAILED, error={"code": "x"},
                                                expected=tasks.ACTIVE_STATUSES, owner="me")
            read = agents.state_in(s, sub.id)
            assert read is not None and (read.state, read.version) == (AgentState.RUNNING, agent.version + 1)
            assert agents.set_state_in(s, sub.id, read.version, AgentState.IDLE)
        assert messages.list_messages(db, sub.id) == []
        return task.id

    one_stream(1)  # the first may build the statements of a shape (cached from then on)
    built.clear()
    task_id = one_stream(2)
    assert built == Counter()
    assert tasks.get_task(db, task_id).status == tasks.SUCCEEDED
    row = pending_messages.get_message(db, "m2")
    assert row is not None and row.target_agent_id == sub.id and row.typed_meta.routed is not None
    db.dispose()
