"""The receiver's row lock while a message is queued (`MessageRouter.route_message`): a termination in flight
holds the sender until it commits, so no message is queued behind it and lost; and one sender never waits for
another. PostgreSQL only: SQLite locks the whole database for a write, so the row lock has nothing to show there."""

from __future__ import annotations

import threading
from collections.abc import Callable

import psycopg
import pytest

from modules.multi_agent.message_router import MessageRouter, PendingMessage, RouteError
from modules.statuses import MessageSource
from modules.storage import pending_messages as queue
from modules.storage.db import Database
from modules.storage.message_meta import MessageMeta
from test.conftest import wait_until
from test.db_urls import fresh_database
from test.unit.teams import conversation_with_sub_agent


@pytest.fixture
def pg(tmp_path):
    with fresh_database("postgresql", tmp_path) as url:
        db = Database(url, timeout_s=60)
        conv, _, sub, _ = conversation_with_sub_agent(db)
        with psycopg.connect(url.replace("postgresql+psycopg://", "postgresql://")) as other:
            yield db, conv, sub, other
        db.dispose()


def _message(conv, agent) -> PendingMessage:
    return PendingMessage.new(conversation_id=conv.id, target_agent_id=agent.id, type="message", content="hi",
                              source_display_name="user", meta=MessageMeta(source=MessageSource.USER))


def _in_thread(fn: Callable[[], object]) -> tuple[threading.Thread, dict]:
    out: dict = {}

    def run() -> None:
        try:
            out["result"] = fn()
        except Exception as exc:  # noqa: BLE001 - the test reads what the sender met
            out["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, out


def _waits_on_a_lock(other) -> bool:
    """Whether a session of this database waits for a lock (asked on a session of its own: `other` is inside
    its transaction)."""
    with psycopg.connect(other.info.dsn, autocommit=True) as probe:
        return probe.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                             "AND wait_event_type = 'Lock'").fetchone()[0] > 0


def test_a_send_meeting_a_termination_in_flight_waits_for_it_and_queues_nothing(pg):
    db, conv, sub, other = pg
    other.execute("UPDATE agents SET terminated = true WHERE id = %s", (sub.id,))  # uncommitted, row locked
    router = MessageRouter(db)
    thread, out = _in_thread(lambda: router.route_message(sub.id, _message(conv, sub)))
    wait_until(lambda: _waits_on_a_lock(other) or not thread.is_alive(), 30, what="the sender to meet the lock")
    assert thread.is_alive(), f"the sender went past the termination in flight: {out}"
    other.commit()
    thread.join(30)
    assert isinstance(out.get("error"), RouteError) and "terminated" in str(out["error"])
    assert queue.list_queued(db, sub.id) == []


def test_a_sender_does_not_wait_for_another_sender_queueing_to_the_same_agent(pg):
    db, conv, sub, other = pg
    other.execute("SELECT id FROM agents WHERE id = %s FOR SHARE", (sub.id,))  # as a sender mid-queueing holds it
    router = MessageRouter(db)
    thread, out = _in_thread(lambda: router.route_message(sub.id, _message(conv, sub)))
    wait_until(lambda: _waits_on_a_lock(other) or not thread.is_alive(), 30, what="the sender to finish or wait")
    assert not thread.is_alive(), "the sender waits for another sender's share lock"
    assert "error" not in out, out
    other.rollback()
    assert [row.content for row in queue.list_queued(db, sub.id)] == ["hi"]
