"""The router's receiver-decided step on its own: how each state takes a message, how a queued message reads
in its receiver's history, and the settle window that turns a wave of completion notices into one wake."""

from __future__ import annotations

import threading
from types import SimpleNamespace

import pytest

from modules.multi_agent import agent_state, message_router
from modules.multi_agent.agent_state import AgentStates
from modules.multi_agent.message_router import (
    INJECTED_INLINE,
    TRIGGERED_NEW_TURN,
    AskWaiter,
    MessageRouter,
    PendingMessage,
    RouteError,
    RouteResult,
    history_draft,
    history_text,
)
from modules.multi_agent.router_hooks import RouterHooks
from modules.statuses import Delivery, MessageSource, Route, Visibility
from modules.storage import messages as message_store
from modules.storage import pending_messages as queue
from modules.storage.db import Database
from modules.storage.message_meta import MessageMeta
from test.unit.teams import conversation_with_sub_agent


def msg(type_="message", source="agent_message", content="hi", question_id=None, **meta):
    return PendingMessage.new(conversation_id="c", target_agent_id="a", type=type_, content=content,
                              source_display_name="InfoAgent_1", source_agent_id="s", question_id=question_id,
                              meta=MessageMeta.load({"source": source, **meta}))


@pytest.mark.parametrize(("message", "text"), [
    (msg(source=MessageSource.USER, content="go"), "go"),
    (msg(source=MessageSource.USER, content="go", rewritten_query="go to Paris"), "go\n\n[Understood as: go to Paris]"),
    (msg(source=MessageSource.SUB_AGENT, type_="notice", content="[Sub-agent done]"), "[Sub-agent done]"),
    (msg(source=MessageSource.BACKGROUND_COMMAND, type_="notice", content="[cmd]"), "[cmd]"),
    (msg(type_="task", content="do it"), "do it"),
    (msg(type_="ask", content="why?", question_id="q_1"),
     "[Question q_1 from InfoAgent_1] why?\n(Reply with your answer tool, question_id=q_1.)"),
    (msg(type_="answer", content="because", question_id="q_1"), "[Answer to q_1 from InfoAgent_1] because"),
    (msg(source=MessageSource.GUIDANCE, content="faster"), "[Message from InfoAgent_1] faster"),
])
def test_how_a_queued_message_reads_in_the_history(message, text):
    assert history_text(message) == text


def test_the_history_entry_keeps_the_messages_id_and_says_where_it_came_from():
    draft = history_draft(msg(type_="ask", question_id="q_9", visibility=Visibility.COMPACT, route=Route.HIL, extra=1),
                          starts_work=True)
    assert draft.role == "user" and draft.message_id is not None
    assert draft.meta.dump() == {"route": Route.HIL, "extra": 1, "source": MessageSource.AGENT_MESSAGE,
                                 "visibility": Visibility.COMPACT,
                                 "starts_work": True, "message_type": "ask", "from_agent": "InfoAgent_1",
                                 "question_id": "q_9"}
    plain = history_draft(msg(), starts_work=False).meta
    assert plain.visibility == Visibility.CHAT and plain.starts_work is False and plain.question_id is None
    with pytest.raises(ValueError):
        msg(type_="shout")


def test_which_messages_answer_a_blocked_ask():
    asked = AskWaiter("a", "q_1", "s")
    assert asked.matches(msg(type_="answer", question_id="q_1"))
    assert not AskWaiter("a", "q_1", "someone else").matches(msg(type_="answer", question_id="q_2"))
    assert asked.matches(msg())  # anything the asked agent sends after the ask began
    early = msg()
    object.__setattr__(early, "created_at", asked.since - 1)
    assert not asked.matches(early)
    from_user = AskWaiter("a", "q_3", None, from_user=True)
    assert from_user.matches(msg(source=MessageSource.USER)) and not from_user.matches(msg())
    assert not AskWaiter("a", "q_4", None).matches(msg())


@pytest.fixture
def host():
    """What the server would do for the router; a test changes an answer by setting it here."""
    return SimpleNamespace(wake=None, more_completions_expected=lambda agent_id: True)


@pytest.fixture
def team(tmp_path, host):
    db = Database(f"sqlite:///{tmp_path / 'app.db'}")
    conv, master, sub, manager = conversation_with_sub_agent(db)
    spawned: list[tuple] = []  # the settle timers, run by the test when it chooses (no race with the clock)

    def spawn(fn, *args):
        spawned.append((fn, args))

    woken, peers = [], []
    host.wake = lambda agent_id: woken.append(agent_id) or f"task-of-{agent_id}"
    hooks = RouterHooks(wake=lambda agent_id: host.wake(agent_id),
                        active_task_of=lambda agent_id: f"running-{agent_id}",
                        more_completions_expected=lambda agent_id: host.more_completions_expected(agent_id),
                        notify_peers=peers.append)
    router = MessageRouter(db, spawn=spawn, settle_s=0.05, max_settle_s=0.5, hooks=hooks)
    yield db, conv, master, sub, router, manager, woken, peers, spawned
    db.dispose()


def to(conv, agent, type_="message", content="hi", source="user"):
    return PendingMessage.new(conversation_id=conv.id, target_agent_id=agent.id, type=type_, content=content,
                              source_display_name="user", meta=MessageMeta(source=source))


def test_each_state_takes_a_message_its_own_way(team):
    db, conv, master, sub, router, _, woken, peers, _ = team
    states = AgentStates(db)
    assert router.route_message(master.id, to(conv, master)) == RouteResult(TRIGGERED_NEW_TURN, f"task-of-{master.id}")
    assert woken == [master.id]
    states.transition(master.id, agent_state.RUNNING)
    assert router.route_message(master.id, to(conv, master)) == RouteResult(INJECTED_INLINE, f"running-{master.id}")
    states.transition(master.id, agent_state.WAITING)
    assert router.route_message(master.id, to(conv, master)).delivery == INJECTED_INLINE
    assert peers == [master.id]  # its ask may be blocked in another process
    assert woken == [master.id] and len(queue.list_queued(db, master.id)) == 3
    with pytest.raises(ValueError):
        router.route_message(sub.id, to(conv, master))
    with pytest.raises(RouteError, match="no agent"):
        router.route_message("nobody", PendingMessage.new(conversation_id=conv.id, target_agent_id="nobody",
                                                          type="message", content="x", source_display_name="u"))


def test_a_terminated_agent_takes_nothing_more(team):
    db, conv, master, sub, router, manager, woken, _, _ = team
    with db.write() as s:
        router.enqueue_in(s, to(conv, sub, content="queued before"))
    assert manager.mark_terminated(sub.id)
    with pytest.raises(RouteError, match="InfoAgent_1 was terminated and takes no more messages"):
        router.route_message(sub.id, to(conv, sub, content="after"))
    assert queue.list_queued(db, sub.id) == []  # its queue went with it
    # A notice queued past the termination (a command of the agent that ended after it) is discarded.
    late = to(conv, sub, "notice", "[cmd done]", MessageSource.BACKGROUND_COMMAND)
    with db.write() as s:
        router.enqueue_in(s, late)
    assert router.deliver(late).delivery == INJECTED_INLINE
    assert queue.list_queued(db, sub.id) == [] and woken == []
    assert queue.get_message(db, late.id).consumed_by == "terminated"


def test_a_wave_of_notices_to_an_idle_agent_wakes_it_once_when_quiet(team, host):
    db, conv, master, _, router, _, woken, _, spawned = team
    notices = [to(conv, master, "notice", f"[cmd {i}]", MessageSource.BACKGROUND_COMMAND) for i in range(3)]
    for notice in notices:
        with db.write() as s:
            router.enqueue_in(s, notice)
        assert router.deliver(notice) == RouteResult(TRIGGERED_NEW_TURN, None)
    assert len(spawned) == 1 and woken == [], "one settle timer per wave, and no wake before it fires"
    fn, args = spawned[0]
    fn(*args)
    assert woken == [master.id]
    # A new wave gets a timer of its own; the last completion of all wakes at once.
    host.more_completions_expected = lambda agent_id: False
    last = to(conv, master, "notice", "[last]", MessageSource.BACKGROUND_COMMAND)
    assert router.deliver(last) == RouteResult(TRIGGERED_NEW_TURN, f"task-of-{master.id}")
    assert woken == [master.id, master.id] and len(spawned) == 1
    assert router.deliver(to(conv, master)) == RouteResult(TRIGGERED_NEW_TURN, f"task-of-{master.id}")  # not a notice


def test_the_settle_window_ends_at_its_maximum_even_while_notices_keep_coming(team):
    db, conv, master, _, router, _, woken, _, spawned = team
    router._settle_s, router._max_settle_s = 60.0, 0.2
    router.deliver(to(conv, master, "notice", "[cmd]", MessageSource.BACKGROUND_COMMAND))
    fn, args = spawned[0]
    timer = threading.Thread(target=fn, args=args, daemon=True)
    timer.start()
    timer.join(30)  # well before the 60 s quiet time
    assert not timer.is_alive() and woken == [master.id]


def test_blocked_user_asks_are_listed_oldest_first_and_a_peer_signal_looks_for_their_answer(team):
    db, conv, master, sub, router, _, _, _, _ = team
    second = router.begin_ask(sub.id, "q_2", None, from_user=True)
    first = router.begin_ask(master.id, "q_1", None, from_user=True)
    first.since = second.since - 1
    assert [w.question_id for w in router.waiting_for_user([master.id, sub.id])] == ["q_1", "q_2"]
    router.end_ask(second)
    assert [w.question_id for w in router.waiting_for_user([master.id, sub.id])] == ["q_1"]
    answer = PendingMessage.new(conversation_id=conv.id, target_agent_id=master.id, type="answer", content="yes",
                                source_display_name="user", question_id="q_1",
                                meta=MessageMeta(source=MessageSource.USER))
    with db.write() as s:
        router.enqueue_in(s, answer)  # queued by another process
    router.on_peer_queued(master.id)
    assert first.answer == answer and first.event.is_set()
    assert queue.get_message(db, answer.id).consumed_by == "ask:q_1"
    assert router.take(answer.id, "someone") is None
    router.on_peer_queued(sub.id)  # no ask blocked here: nothing happens


def test_consuming_the_queue_appends_it_to_the_history_once(team):
    db, conv, master, _, router, _, _, _, _ = team
    for i in range(3):
        with db.write() as s:
            router.enqueue_in(s, to(conv, master, content=f"m{i}"))
    drained = router.consume_pending_messages(master.id, conv.id, "task-1")
    assert [m.content for m in drained] == ["m0", "m1", "m2"]
    assert all(m.meta["starts_work"] is False for m in drained)
    assert router.consume_pending_messages(master.id, conv.id, "task-2") == []
    assert [m.content for m in message_store.list_messages(db, master.id)] == ["m0", "m1", "m2"]
    with db.write() as s:
        router.enqueue_in(s, to(conv, master, content="a"))
        router.enqueue_in(s, to(conv, master, content="b"))
    with db.write() as s:
        started = router.drain_to_history_in(s, master.id, conv.id, "task-3", last_starts_work=True)
    assert [(m.content, m.meta["starts_work"]) for m in started] == [("a", False), ("b", True)]
    assert router.stored(started[0].message_id).content == "a" and router.stored("nope") is None


class FakeClock:
    """The router's `time` during a settle test: sleeping advances it, and notices scheduled for a moment
    are delivered when it passes (no race with the machine's clock)."""

    def __init__(self):
        self.now, self.due, self.naps = 0.0, [], 0

    def monotonic(self):
        return self.now

    def sleep(self, seconds):
        self.naps += 1
        assert self.naps < 1000, "the settle loop spins"
        until = self.now + seconds
        while self.due and self.due[0][0] <= until + 1e-9:
            self.now, arrive = self.due.pop(0)
            arrive()
        self.now = until


def _settle_run(team, host, monkeypatch, arrivals, settle_s=0.05, max_settle_s=0.5):
    """Deliver a notice at 0 and at each of `arrivals` (seconds); the time the agent was woken."""
    db, conv, master, _, router, _, _, _, spawned = team
    clock = FakeClock()
    monkeypatch.setattr(message_router, "time", clock)
    router._settle_s, router._max_settle_s = settle_s, max_settle_s
    woke_at = []
    host.wake = lambda agent_id: woke_at.append(clock.now)
    notice = lambda: router.deliver(to(conv, master, "notice", "[cmd]", MessageSource.BACKGROUND_COMMAND))  # noqa: E731
    notice()
    clock.due = [(t, notice) for t in arrivals]
    fn, args = spawned[0]
    fn(*args)
    assert len(spawned) == 1
    return woke_at


def test_the_settle_window_waits_until_no_notice_came_for_settle_s(team, host, monkeypatch):
    assert _settle_run(team, host, monkeypatch, [0.03, 0.06]) == [pytest.approx(0.11)]


def test_the_settle_window_ends_at_its_maximum_while_notices_keep_coming(team, host, monkeypatch):
    arrivals = [0.04 * i for i in range(1, 30)]
    assert _settle_run(team, host, monkeypatch, arrivals) == [pytest.approx(0.5)]


def test_a_message_taken_by_someone_else_does_not_resolve_an_ask(team):
    db, conv, master, _, router, _, _, _, _ = team
    waiter = router.begin_ask(master.id, "q_7", None, from_user=True)
    answer = PendingMessage.new(conversation_id=conv.id, target_agent_id=master.id, type="answer", content="late",
                                source_display_name="InfoAgent_1", source_agent_id=team[3].id, question_id="q_7",
                                meta=MessageMeta(source=MessageSource.AGENT_MESSAGE, visibility=Visibility.COMPACT))
    with db.write() as s:
        router.enqueue_in(s, answer)
    taken = router.take(answer.id, "someone")
    assert taken == answer  # every field read back as it was queued
    assert router.deliver(answer).delivery != Delivery.RESOLVED and waiter.answer is None
    router.end_ask(waiter)
    with pytest.raises(ValueError, match="message target does not match"):
        router.route_message(master.id, to(conv, team[3]))


def test_a_blocked_ask_finds_an_answer_another_process_queued_by_its_rescan(team):
    db, conv, master, _, _, _, _, _, _ = team
    router = MessageRouter(db, rescan_s=0.05)
    waiter = router.begin_ask(master.id, "q_8", None, from_user=True)
    answer = to(conv, master, "answer", "from the other process")
    got, first_scan_done = [], threading.Event()

    def should_stop() -> bool:  # called in the loop, after the scan that opens the wait
        first_scan_done.set()
        return False

    thread = threading.Thread(target=lambda: got.append(router.wait_for_answer(waiter, 60, should_stop)))
    thread.start()
    assert first_scan_done.wait(30)
    with db.write() as s:  # queued without `deliver` here, after the first scan: only a rescan can find it
        router.enqueue_in(s, answer)
    thread.join(30)
    assert not thread.is_alive(), "the rescan never found the answer"
    assert got[0].id == answer.id and queue.get_message(db, answer.id).consumed_by == "ask:q_8"


def test_an_answer_to_a_blocked_ask_names_the_askers_task_and_a_notice_without_settling_wakes_at_once(team, host):
    db, conv, master, _, router, _, woken, _, spawned = team
    waiter = router.begin_ask(master.id, "q_5", None, from_user=True)
    answer = PendingMessage.new(conversation_id=conv.id, target_agent_id=master.id, type="answer", content="yes",
                                source_display_name="user", question_id="q_5",
                                meta=MessageMeta(source=MessageSource.USER))
    assert router.route_message(master.id, answer) == RouteResult("resolved", f"running-{master.id}")
    router.end_ask(waiter)
    asked_about = []
    host.more_completions_expected = lambda agent_id: asked_about.append(agent_id) or True
    router.deliver(to(conv, master, "notice", "[cmd]", MessageSource.BACKGROUND_COMMAND))
    assert asked_about == [master.id] and len(spawned) == 1
    router._settle_s = 0.0  # NOTICE_SETTLE_MS=0: no settle window at all
    assert router.deliver(to(conv, master, "notice", "[cmd]", MessageSource.BACKGROUND_COMMAND)) == RouteResult(
        TRIGGERED_NEW_TURN, f"task-of-{master.id}")
    assert len(spawned) == 1 and woken == [master.id]
    with pytest.raises(ValueError, match="unknown message type 'shout'"):
        to(conv, master, "shout")
