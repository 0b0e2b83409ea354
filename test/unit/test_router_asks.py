"""Blocking asks on the real router and queues, with real threads, against SQLite and PostgreSQL: early
answers, answers racing the wait, messages that do or do not answer, timeouts, stops and parallel asks."""

from __future__ import annotations

import random
import threading
import time

import pytest

from modules.multi_agent import agent_state
from modules.multi_agent.message_router import INJECTED_INLINE, RESOLVED, PendingMessage
from modules.multi_agent.router_hooks import RouterHooks
from modules.storage import pending_messages as queue
from test.unit.router_team import Team, router_database, run_threads

# How long an ask that will be answered may wait: a bound, not a measure (the answer comes in milliseconds on a
# quiet machine; a busy one, with PostgreSQL shared by other suites, may take seconds).
ANSWER_WAIT_S = 30


@pytest.fixture(params=["sqlite", "postgresql"])
def db(request, tmp_path):
    yield from router_database(request.param, tmp_path)


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
        got = team.router.wait_for_answer(waiter, ANSWER_WAIT_S, lambda: False)
        t.join(ANSWER_WAIT_S)
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
    got = team.router.wait_for_answer(waiter, ANSWER_WAIT_S, lambda: False)
    timer.join(ANSWER_WAIT_S)
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
    got = team.router.wait_for_answer(waiter, ANSWER_WAIT_S, lambda: False)
    timer.join(ANSWER_WAIT_S)
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

    run_threads([asker(i, a) for i, a in enumerate(team.subs)] + [master])
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
    woken = []
    team = Team(db, 1, hooks=RouterHooks(wake=lambda agent_id: woken.append(agent_id)))
    sub = team.subs[0]
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
