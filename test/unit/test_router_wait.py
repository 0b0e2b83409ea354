"""A blocked ask's wait on a clock of the test's own (`MessageRouter.wait_for_answer`): how often it looks at its
stop and at its queue, that it ends at its deadline without spinning, and that an answer arriving with the stop
is still handed over (it was taken from the queue: dropping it would lose it). What a router built with its
defaults does, how it refuses a mistargeted message, and what the session store logs when it fails."""

from __future__ import annotations

import logging

import pytest

from modules.multi_agent import agent_state, message_router
from modules.multi_agent.active_agent import ActiveAgentSessionStore
from modules.multi_agent.agent_state import AgentStates
from modules.multi_agent.message_router import (
    INJECTED_INLINE,
    TRIGGERED_NEW_TURN,
    MessageRouter,
    PendingMessage,
    RouteResult,
)
from modules.multi_agent.router_hooks import RouterHooks
from modules.statuses import MessageSource
from modules.storage import pending_messages as queue
from modules.storage.db import Database
from modules.storage.message_meta import MessageMeta
from test.unit.teams import conversation_with_sub_agent


class Clock:
    """`time` for the router: only the waits of the ask, and sleeps, move it; `on_sleep` runs after each sleep."""

    def __init__(self, on_sleep=lambda: None):
        self.now, self.on_sleep = 0.0, on_sleep

    def monotonic(self):
        return self.now

    def sleep(self, seconds):
        assert seconds > 0, "a zero sleep spins"
        self.now += seconds
        self.on_sleep()


class Event:
    """The waiter's event on that clock: a wait passes its whole timeout at once (nothing wakes it)."""

    def __init__(self, clock):
        self.clock, self.waits, self.flag = clock, [], False

    def is_set(self):
        return self.flag

    def set(self):
        self.flag = True

    def wait(self, timeout):
        assert len(self.waits) < 10_000, "the wait spins"
        self.waits.append(timeout)
        self.clock.now += timeout
        return self.flag


@pytest.fixture
def team(tmp_path):
    db = Database(f"sqlite:///{tmp_path / 'app.db'}")
    conv, master, sub, _ = conversation_with_sub_agent(db)
    yield db, conv, master, sub
    db.dispose()


def _clocked_wait(team, monkeypatch, timeout_s, **wait_kwargs):
    """Wait `timeout_s` on the test's clock with nothing to answer; the waits, the queue scans and when."""
    db, _, master, _ = team
    clock = Clock()
    monkeypatch.setattr(message_router, "time", clock)
    router = MessageRouter(db)  # its default rescan period: a second
    scans = []
    take = router._take_queued_answer
    router._take_queued_answer = lambda waiter: scans.append(clock.now) or take(waiter)
    waiter = router.begin_ask(master.id, "q_1", None, from_user=True)
    waiter.event = Event(clock)
    stops = []
    assert router.wait_for_answer(waiter, timeout_s, lambda: stops.append(clock.now) or False, **wait_kwargs) is None
    return clock, waiter.event.waits, scans, stops


def test_a_wait_looks_at_its_stop_every_tenth_of_a_second(team, monkeypatch):
    clock, waits, _, stops = _clocked_wait(team, monkeypatch, 2.0)  # its default poll period
    assert max(waits) == pytest.approx(0.1) and len(stops) >= 20
    assert clock.now == pytest.approx(2.0)


def test_a_wait_rescans_its_queue_once_a_period_and_ends_at_its_deadline_without_spinning(team, monkeypatch):
    clock, waits, scans, _ = _clocked_wait(team, monkeypatch, 3.5, poll_s=0.125)
    assert scans == [0.0, 1.0, 2.0, 3.0]  # at the start, then each rescan period (another process's answers)
    assert clock.now == 3.5 and waits == [0.125] * 28  # no wait of zero at the deadline


def test_an_answer_arriving_with_the_stop_is_still_handed_over(team):
    """The stop is seen after the answer was taken from the queue for this ask: the wait must return it."""
    db, conv, master, _ = team
    router = MessageRouter(db)
    waiter = router.begin_ask(master.id, "q_2", None, from_user=True)
    answer = PendingMessage.new(conversation_id=conv.id, target_agent_id=master.id, type="answer", content="yes",
                                source_display_name="user", question_id="q_2",
                                meta=MessageMeta(source=MessageSource.USER))

    def answered_then_stopped():
        if not waiter.event.is_set():
            router.route_message(master.id, answer)
        return True

    got = router.wait_for_answer(waiter, 30, answered_then_stopped)
    assert got is not None and got.id == answer.id
    assert queue.get_message(db, answer.id).consumed_by == "ask:q_2"


def test_a_message_for_another_agent_is_refused_by_its_exact_reason(team):
    db, conv, master, sub = team
    message = PendingMessage.new(conversation_id=conv.id, target_agent_id=sub.id, type="message", content="x",
                                 source_display_name="user")
    with pytest.raises(ValueError) as err:
        MessageRouter(db).route_message(master.id, message)
    assert str(err.value) == "message target does not match"


class BrokenStore:
    def get(self, key, field):
        raise RuntimeError("store down")

    def set(self, key, field, value):
        raise RuntimeError("store down")


def test_a_failing_session_store_reads_as_no_active_agent_and_says_why(caplog):
    store = ActiveAgentSessionStore(BrokenStore())
    with caplog.at_level(logging.WARNING, logger=message_router.__name__):
        assert store.get_active_agent("c1") is None
        store.set_active_agent("c1", "InfoAgent_1")
    assert [r.getMessage() for r in caplog.records] == [
        "session store unreadable, taking the full pipeline: store down",
        "could not record the active agent InfoAgent_1: store down"]


def _notice(conv, agent):
    return PendingMessage.new(conversation_id=conv.id, target_agent_id=agent.id, type="notice", content="[cmd]",
                              source_display_name="background_command",
                              meta=MessageMeta(source=MessageSource.BACKGROUND_COMMAND))


def test_a_router_with_its_defaults_wakes_an_idle_agent_at_once_and_signals_no_peer(team):
    db, conv, master, sub = team
    woken = []

    def no_settling(*args):
        raise AssertionError("a router holds no notice back unless told to settle")

    router = MessageRouter(db, spawn=no_settling,
                           hooks=RouterHooks(wake=lambda agent_id: woken.append(agent_id) or "task-1"))
    assert router.route_message(master.id, _notice(conv, master)) == RouteResult(TRIGGERED_NEW_TURN, "task-1")
    states = AgentStates(db)
    states.transition(sub.id, agent_state.RUNNING)
    states.transition(sub.id, agent_state.WAITING)  # blocked in an ask of another process, maybe: nobody to tell
    assert router.route_message(sub.id, _notice(conv, sub)).delivery == INJECTED_INLINE
    assert woken == [master.id]


def test_a_settling_router_holds_a_wave_at_most_half_a_second_by_default(team, monkeypatch):
    db, conv, master, _ = team
    spawned, woke_at = [], []
    router = MessageRouter(db, spawn=lambda fn, *args: spawned.append((fn, args)), settle_s=0.05,
                           hooks=RouterHooks(wake=lambda agent_id: woke_at.append(clock.now)))
    clock = Clock(on_sleep=lambda: router.deliver(_notice(conv, master)))  # the wave never pauses
    monkeypatch.setattr(message_router, "time", clock)
    assert router.route_message(master.id, _notice(conv, master)).delivery == TRIGGERED_NEW_TURN
    [(fn, args)] = spawned  # held back: its commands may still run (the default assumes they do)
    fn(*args)
    assert woke_at == [pytest.approx(0.5)] and len(spawned) == 1
