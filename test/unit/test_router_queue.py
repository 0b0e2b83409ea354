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

from modules.agents.profiles import load_profiles
from modules.multi_agent import agent_state
from modules.multi_agent.agent_state import AgentStates
from modules.multi_agent.message_router import (
    INJECTED_INLINE,
    RESOLVED,
    TRIGGERED_NEW_TURN,
    MessageRouter,
    PendingMessage,
)
from modules.storage import agents as agent_store
from modules.storage import conversations
from modules.storage import messages as message_store
from modules.storage import pending_messages as queue
from modules.storage.db import Database
from modules.storage.users import get_or_create_user
from modules.sub_agent.manager import SubAgentManager
from modules.tools.agent_tools import AGENT_TOOLS
from modules.tools.run_command import RUN_COMMAND
from test.db_urls import fresh_database

SENDERS, PER_SENDER = 50, 20
DEADLINE_S = 60


@pytest.fixture(params=["sqlite", "postgresql"])
def db(request, tmp_path):
    with fresh_database(request.param, tmp_path) as url:
        # Fifty threads on two busy cores may wait on the pool longer than the server's 5 s: these tests are
        # about exactly-once delivery, not about the bound (test_database_bounds covers that).
        database = Database(url, timeout_s=60)
        database.migrate()
        yield database
        database.dispose()


class Team:
    """A conversation with its master and `n` InfoAgent sub-agents, on a real router."""

    def __init__(self, db: Database, n: int):
        self.db = db
        self.states = AgentStates(db)
        self.router = MessageRouter(db)
        user = get_or_create_user(db, "alice")
        self.conv, self.master = conversations.create_conversation(db, user.id, "router")
        profiles = load_profiles(None, {t.name for t in (RUN_COMMAND, *AGENT_TOOLS)})
        manager = SubAgentManager(db, profiles)
        self.subs = [manager.create_sub_agent(self.master, "InfoAgent", f"task {i}") for i in range(n)]

    def message(self, source, target, content: str, type_: str = "message", question_id: str | None = None,
                source_kind: str = "agent_message") -> PendingMessage:
        return PendingMessage.new(
            conversation_id=self.conv.id, target_agent_id=target.id, type=type_, content=content,
            source_display_name=source.display_name, source_agent_id=source.id, question_id=question_id,
            meta={"source": source_kind, "visibility": "chat"},
        )

    def user_history(self, agent) -> list:
        return [m for m in message_store.list_messages(self.db, agent.id) if m.role == "user"]


def _run_threads(targets, timeout: float = DEADLINE_S) -> None:
    threads = [threading.Thread(target=t, daemon=True) for t in targets]
    for t in threads:
        t.start()
    deadline = time.monotonic() + timeout
    for t in threads:
        t.join(max(0.0, deadline - time.monotonic()))
    assert not any(t.is_alive() for t in threads), "threads did not finish in time"


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
        _run_threads([fan.sender(a) for a in team.subs])
        done.set()

    _run_threads([all_senders, drainer])
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
        _run_threads([fan.sender(a) for a in team.subs])
        done.set()

    _run_threads([senders, *[drainer(k) for k in range(len(taken))]])
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
        team.router.wake = self.wake

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
    _run_threads([fan.sender(a) for a in team.subs])
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
    team = Team(db, 1)
    worker = team.subs[0]
    started: list[str] = []
    team.router.wake = lambda agent_id: started.append(agent_id) or None  # the server is "busy": no claim yet
    msgs = [team.message(team.master, worker, f"step {i}") for i in range(5)]
    for m in msgs:
        assert team.router.route_message(worker.id, m).delivery == INJECTED_INLINE
    harness = TurnHarness(team, worker)
    assert harness.wake(worker.id) is not None
    harness.join(10)
    assert harness.turns == 1
    history = team.user_history(worker)
    assert [m.message_id for m in history] == [m.id for m in msgs]
    assert [m.meta["starts_work"] for m in history] == [False] * 4 + [True]


# -- blocking asks ---------------------------------------------------------
def test_answer_queued_before_the_waiter_registers_is_taken_once(db):
    team = Team(db, 1)
    asker = team.subs[0]
    team.states.transition(asker.id, agent_state.RUNNING)
    answer = team.message(team.master, asker, "Paris", "answer", question_id="q_000000000001")
    assert team.router.route_message(asker.id, answer).delivery == INJECTED_INLINE  # nobody waits yet
    waiter = team.router.begin_ask(asker.id, "q_000000000001", team.master.id)
    got = team.router.wait_for_answer(waiter, 2, lambda: False)
    assert got is not None and got.id == answer.id and got.content == "Paris"
    # taken by the ask: it is not drained into the history a second time
    assert team.router.consume_pending_messages(asker.id, team.conv.id, "inline") == []
    assert queue.get_message(db, answer.id).consumed_by == "ask:q_000000000001"


def test_answer_arriving_while_the_waiter_registers_resolves_it(db):
    team = Team(db, 1)
    asker = team.subs[0]
    team.states.transition(asker.id, agent_state.RUNNING)
    waiter = team.router.begin_ask(asker.id, "q_000000000002", team.master.id)
    # the answer lands between begin_ask and wait_for_answer
    answer = team.message(team.master, asker, "Berlin", "answer", question_id="q_000000000002")
    assert team.router.route_message(asker.id, answer).delivery == RESOLVED
    # Already resolved: the wait hands it over even when told to stop at once.
    got = team.router.wait_for_answer(waiter, 30, lambda: True)
    assert got is not None and got.content == "Berlin"
    assert team.router.consume_pending_messages(asker.id, team.conv.id, "inline") == []


def test_answer_racing_the_wait_is_never_dropped(db):
    """Many rounds of an answer sent from another thread at the moment the asker starts waiting."""
    team = Team(db, 1)
    asker = team.subs[0]
    team.states.transition(asker.id, agent_state.RUNNING)
    for round_ in range(20):
        qid = f"q_{round_:012x}"
        waiter = team.router.begin_ask(asker.id, qid, team.master.id)
        answer = team.message(team.master, asker, f"answer {round_}", "answer", question_id=qid)
        t = threading.Thread(target=team.router.route_message, args=(asker.id, answer))
        t.start()
        got = team.router.wait_for_answer(waiter, 5, lambda: False)
        t.join(5)
        assert got is not None and got.id == answer.id, f"round {round_}: the answer was dropped"
    assert team.router.consume_pending_messages(asker.id, team.conv.id, "inline") == []


def test_message_from_the_asked_agent_sent_before_the_question_does_not_answer_it(db):
    """Guidance the master sent before the sub-agent asked it is not the answer to the question:
    the ask gets the real answer, the guidance stays queued for the next inline batch."""
    team = Team(db, 1)
    asker = team.subs[0]
    team.states.transition(asker.id, agent_state.RUNNING)
    guidance = team.message(team.master, asker, "also check the weekend", source_kind="guidance")
    assert team.router.route_message(asker.id, guidance).delivery == INJECTED_INLINE
    qid = "q_00000000abcd"
    waiter = team.router.begin_ask(asker.id, qid, team.master.id)
    answer = team.message(team.master, asker, "use the train", "answer", question_id=qid)
    timer = threading.Timer(0.3, team.router.route_message, args=(asker.id, answer))
    timer.start()
    got = team.router.wait_for_answer(waiter, 5, lambda: False)
    timer.join(5)
    assert got is not None and got.id == answer.id
    inline = team.router.consume_pending_messages(asker.id, team.conv.id, "inline")
    assert [m.message_id for m in inline] == [guidance.id]


def test_any_message_from_the_asked_agent_while_waiting_resolves_the_ask(db):
    team = Team(db, 1)
    asker = team.subs[0]
    team.states.transition(asker.id, agent_state.RUNNING)
    waiter = team.router.begin_ask(asker.id, "q_00000000beef", team.master.id)
    reply = team.message(team.master, asker, "just use the train", source_kind="guidance")
    timer = threading.Timer(0.1, team.router.route_message, args=(asker.id, reply))
    timer.start()
    got = team.router.wait_for_answer(waiter, 5, lambda: False)
    timer.join(5)
    assert got is not None and got.id == reply.id


def test_ask_times_out_and_a_stop_ends_the_wait(db):
    team = Team(db, 1)
    asker = team.subs[0]
    waiter = team.router.begin_ask(asker.id, "q_0000000000aa", team.master.id)
    started = time.monotonic()
    assert team.router.wait_for_answer(waiter, 0.3, lambda: False) is None
    assert 0.25 <= time.monotonic() - started < 15  # it waited, and ended (bound: any busy machine)
    stop = threading.Event()
    waiter = team.router.begin_ask(asker.id, "q_0000000000bb", team.master.id)
    threading.Timer(0.2, stop.set).start()
    started = time.monotonic()
    assert team.router.wait_for_answer(waiter, 60, stop.is_set) is None
    assert time.monotonic() - started < 30, "the stop did not end the wait; the timeout did"
    # a late answer is not lost: it stays queued for the asker's next model call
    late = team.message(team.master, asker, "late", "answer", question_id="q_0000000000bb")
    team.states.transition(asker.id, agent_state.RUNNING)
    assert team.router.route_message(asker.id, late).delivery == INJECTED_INLINE
    assert [m.message_id for m in team.router.consume_pending_messages(asker.id, team.conv.id, "x")] == [late.id]


def test_parallel_asks_of_several_agents_never_cross(db):
    """Eight sub-agents ask the master at once; the master answers in a shuffled order; each
    asker gets the answer to its own question."""
    team = Team(db, 8)
    team.states.transition(team.master.id, agent_state.RUNNING)
    for agent in team.subs:
        team.states.transition(agent.id, agent_state.RUNNING)
    results: dict[str, PendingMessage | None] = {}
    questions: dict[str, str] = {}
    barrier = threading.Barrier(len(team.subs))

    def asker(i: int, agent):
        def run():
            qid = f"q_{i:04d}{random.getrandbits(32):08x}"
            questions[agent.id] = qid
            waiter = team.router.begin_ask(agent.id, qid, team.master.id)
            barrier.wait()
            team.router.route_message(team.master.id, team.message(agent, team.master, f"secret of {i}?", "ask",
                                                                   question_id=qid))
            results[agent.id] = team.router.wait_for_answer(waiter, 20, lambda: False)
        return run

    def master():
        answered = 0
        deadline = time.monotonic() + 20
        while answered < len(team.subs) and time.monotonic() < deadline:
            asks = team.router.consume_pending_messages(team.master.id, team.conv.id, "master")
            random.shuffle(asks)
            for ask in asks:
                qid = ask.meta["question_id"]
                row = queue.find_question(db, qid)
                target = next(a for a in team.subs if a.id == row.source_agent_id)
                routed = team.router.route_message(target.id, team.message(
                    team.master, target, f"answer to {row.content}", "answer", question_id=qid))
                assert routed.delivery == RESOLVED
                answered += 1
            time.sleep(0.005)

    _run_threads([asker(i, a) for i, a in enumerate(team.subs)] + [master])
    for i, agent in enumerate(team.subs):
        got = results[agent.id]
        assert got is not None, f"{agent.display_name} got no answer"
        assert got.question_id == questions[agent.id]
        assert got.content == f"answer to secret of {i}?"
        assert got.target_agent_id == agent.id


def test_an_answer_taken_just_as_its_ask_ends_goes_back_to_the_queue(db, monkeypatch):
    """The asker's timeout lands while the router takes the answer: the answer is not lost with the ask."""
    team = Team(db, 1)
    sub = team.subs[0]
    waiter = team.router.begin_ask(sub.id, "q_1", team.master.id)
    take_in = queue.take_in

    def take_as_the_ask_times_out(session, message_id, consumed_by):
        team.router.end_ask(waiter)
        return take_in(session, message_id, consumed_by)

    monkeypatch.setattr(queue, "take_in", take_as_the_ask_times_out)
    answer = team.message(team.master, sub, "Lisbon", "answer", question_id="q_1")
    routed = team.router.route_message(sub.id, answer)
    assert routed.delivery != RESOLVED and waiter.answer is None
    assert [row.id for row in queue.list_queued(db, sub.id)] == [answer.id]


def test_an_answer_put_back_after_a_peer_signal_is_delivered_again(db, monkeypatch):
    """The answer came from another process (found by the signal's rescan, not by `deliver`): once put back,
    the receiver still gets it, here by a new turn of the now idle agent."""
    team = Team(db, 1)
    sub = team.subs[0]
    woken = []
    team.router.wake = lambda agent_id: woken.append(agent_id)
    waiter = team.router.begin_ask(sub.id, "q_2", team.master.id)
    answer = team.message(team.master, sub, "Porto", "answer", question_id="q_2")
    with db.write() as s:
        team.router.enqueue_in(s, answer)
    take_in = queue.take_in

    def take_as_the_ask_is_stopped(session, message_id, consumed_by):
        team.router.end_ask(waiter)
        return take_in(session, message_id, consumed_by)

    monkeypatch.setattr(queue, "take_in", take_as_the_ask_is_stopped)
    team.router.on_peer_queued(sub.id)
    assert waiter.answer is None and woken == [sub.id]
    assert [row.id for row in queue.list_queued(db, sub.id)] == [answer.id]
