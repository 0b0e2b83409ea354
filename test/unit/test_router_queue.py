"""The message router on its durable queues, with real threads, against SQLite and PostgreSQL.

These tests compose the real `MessageRouter`, `AgentStates` and queue functions
in-process (no server): exactly-once and per-sender order under a fan-in of
concurrent senders, receivers that start and end turns while messages arrive,
early answers and parallel asks.
"""

from __future__ import annotations

import random
import threading
import time
from collections import defaultdict

import pytest

from modules.multi_agent import agent_state
from modules.multi_agent.message_router import (
    INJECTED_INLINE,
    TRIGGERED_NEW_TURN,
    MessageRouter,
)
from modules.multi_agent.router_hooks import RouterHooks
from modules.storage import agents as agent_store
from modules.storage import pending_messages as queue
from test.unit.router_team import DEADLINE_S, Team, router_database, run_threads

SENDERS, PER_SENDER = 50, 20


@pytest.fixture(params=["sqlite", "postgresql"])
def db(request, tmp_path):
    yield from router_database(request.param, tmp_path)


def _sender_order(history) -> dict[str, list[int]]:
    """Per sender, the sequence numbers of its messages in the order the receiver's history holds them."""
    by_sender: dict[str, list[int]] = defaultdict(list)
    for m in history:
        by_sender[m.meta["from_agent"]].append(int((m.content or "").rpartition(" #")[2]))
    return by_sender


def _assert_exactly_once_in_order(team: Team, history, sent_ids: list[str]) -> None:
    ids = [m.message_id for m in history]
    assert len(ids) == len(set(ids)), "a message reached the history twice"
    assert sorted(ids) == sorted(sent_ids), "messages were lost or invented"
    order = _sender_order(history)
    assert len(order) == len(team.subs)
    for sender, numbers in order.items():
        assert numbers == list(range(PER_SENDER)), f"{sender}'s messages were reordered: {numbers}"
    assert queue.list_queued(team.db, team.master.id) == []


class FanIn:
    """Senders that each route `count` numbered messages to the master once a barrier opens,
    recording what was sent and how each was delivered."""

    def __init__(self, team: Team, barrier: threading.Barrier, count: int = PER_SENDER):
        self._team, self._barrier, self._count = team, barrier, count
        self._lock = threading.Lock()
        self.sent_ids: list[str] = []
        self.deliveries: list[str] = []

    def sender(self, agent):
        team = self._team

        def run():
            self._barrier.wait()
            for i in range(self._count):
                msg = team.message(agent, team.master, f"{agent.display_name} #{i}")
                routed = team.router.route_message(team.master.id, msg)
                with self._lock:
                    self.sent_ids.append(msg.id)
                    self.deliveries.append(routed.delivery)
        return run


def test_fifty_senders_to_a_running_master_each_message_once_in_order(db):
    """50 agents each send 20 messages to the running master at once, while it drains between model calls."""
    team = Team(db, SENDERS)
    assert team.states.transition(team.master.id, agent_state.RUNNING) is not None
    barrier = threading.Barrier(SENDERS + 1)
    fan = FanIn(team, barrier)
    done = threading.Event()
    batches: list[int] = []

    def drainer():
        barrier.wait()
        deadline = time.monotonic() + DEADLINE_S
        while time.monotonic() < deadline:
            finished = done.is_set()  # read before draining: what was sent before this point is queued
            got = team.router.consume_pending_messages(team.master.id, team.conv.id, "turn-1")
            if got:
                batches.append(len(got))
            elif finished:
                return
            time.sleep(0.002)  # "the model call"

    def all_senders():
        run_threads([fan.sender(a) for a in team.subs])
        done.set()

    run_threads([all_senders, drainer])
    assert set(fan.deliveries) == {INJECTED_INLINE}
    assert sum(batches) == SENDERS * PER_SENDER
    _assert_exactly_once_in_order(team, team.user_history(team.master), fan.sent_ids)


def test_concurrent_drainers_never_consume_a_message_twice(db):
    """The queue's own guarantee, below the one-writer-per-agent rule: drainers racing on one
    queue while senders fill it each claim disjoint messages, and together all of them."""
    team = Team(db, 4)
    assert team.states.transition(team.master.id, agent_state.RUNNING) is not None
    taken: list[list[str]] = [[] for _ in range(4)]
    done = threading.Event()
    barrier = threading.Barrier(len(team.subs) + len(taken))
    fan = FanIn(team, barrier, count=50)

    def drainer(k: int):
        def run():
            barrier.wait()
            deadline = time.monotonic() + DEADLINE_S
            while time.monotonic() < deadline:
                finished = done.is_set()
                with db.write() as s:
                    rows = queue.drain_in(s, team.master.id, f"drainer-{k}")
                    taken[k].extend(row.id for row in rows)
                if finished and not rows:
                    return
        return run

    def senders():
        run_threads([fan.sender(a) for a in team.subs])
        done.set()

    run_threads([senders, *[drainer(k) for k in range(len(taken))]])
    every = [i for ids in taken for i in ids]
    assert len(every) == len(set(every)), "two drainers consumed the same message"
    assert sorted(every) == sorted(fan.sent_ids)
    assert queue.list_queued(db, team.master.id) == []


class TurnHarness:
    """The server's turn protocol, reduced to the router's part of it: `wake` claims an idle or
    completed agent (compare-and-set) and drains its queue into the history in one transaction;
    the turn drains again before each "model call"; at its end the agent becomes `completed` and
    the end-of-turn check wakes it again when something is queued."""

    def __init__(self, team: Team, agent):
        self.team, self.agent = team, agent
        self.turns = 0
        self.threads: list[threading.Thread] = []
        self.lock = threading.Lock()
        self.rng = random.Random(7)
        team.router = MessageRouter(team.db, hooks=RouterHooks(wake=self.wake))

    def wake(self, agent_id: str) -> str | None:
        team = self.team
        if not team.router.has_queued(agent_id):
            return None
        claim = team.states.transition(agent_id, agent_state.RUNNING)
        if claim is None:
            return None
        with team.db.write() as s:
            drained = team.router.drain_to_history_in(s, agent_id, team.conv.id, "wake", last_starts_work=True)
        if not drained:
            team.states.transition(agent_id, claim.previous)
            return None
        with self.lock:
            self.turns += 1
            rounds = self.rng.randint(0, 3)
        thread = threading.Thread(target=self._turn, args=(rounds,), daemon=True)
        with self.lock:
            self.threads.append(thread)
        thread.start()
        return f"turn-{self.turns}"

    def _turn(self, rounds: int) -> None:
        team = self.team
        for _ in range(rounds):
            time.sleep(0.003)  # a model call
            team.router.consume_pending_messages(self.agent.id, team.conv.id, "inline")
        time.sleep(0.003)  # the last model call; what arrives now waits for the end-of-turn check
        team.states.transition(self.agent.id, agent_state.COMPLETED)
        self.wake(self.agent.id)

    def join(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                alive = [t for t in self.threads if t.is_alive()]
            if not alive:
                return
            alive[0].join(max(0.0, deadline - time.monotonic()))
        raise AssertionError("turns did not finish in time")


def test_fifty_senders_to_an_idle_master_start_few_turns_and_strand_nothing(db):
    """Turns start and end while 1000 messages arrive: each is delivered once, in order per sender,
    none is left queued after the last turn, and the turns are batches (far fewer than messages)."""
    team = Team(db, SENDERS)
    harness = TurnHarness(team, team.master)
    fan = FanIn(team, threading.Barrier(SENDERS))
    run_threads([fan.sender(a) for a in team.subs])
    harness.join(DEADLINE_S)
    assert fan.deliveries.count(TRIGGERED_NEW_TURN) >= 1
    assert set(fan.deliveries) <= {TRIGGERED_NEW_TURN, INJECTED_INLINE}
    history = team.user_history(team.master)
    _assert_exactly_once_in_order(team, history, fan.sent_ids)
    assert 1 <= harness.turns < SENDERS * PER_SENDER // 4
    # one writer at a time: the turns' "starts_work" triggers are as many as the turns
    assert sum(1 for m in history if m.meta.get("starts_work")) == harness.turns
    assert agent_store.get_agent(db, team.master.id).state == agent_state.COMPLETED


def test_several_messages_to_an_idle_agent_start_one_turn_that_sees_all_in_order(db):
    started: list[str] = []
    # the server is "busy": no claim yet
    team = Team(db, 1, hooks=RouterHooks(wake=lambda agent_id: started.append(agent_id) or None))
    worker = team.subs[0]
    msgs = [team.message(team.master, worker, f"step {i}") for i in range(5)]
    for m in msgs:
        assert team.router.route_message(worker.id, m).delivery == INJECTED_INLINE
    harness = TurnHarness(team, worker)
    assert harness.wake(worker.id) is not None
    harness.join(DEADLINE_S)
    assert harness.turns == 1
    history = team.user_history(worker)
    assert [m.message_id for m in history] == [m.id for m in msgs]
    assert [m.meta["starts_work"] for m in history] == [False] * 4 + [True]
