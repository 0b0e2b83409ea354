"""A user's message released to an idle agent is queued and the agent's turn claimed in one transaction
(`RouterHooks.claims`, issue 26): the release and the claim were two group-commit batches, each a wait for a
commit and a lock read of the agent, and the claim looked at the queue the release had just filled."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from modules.agents.profiles import load_profiles
from modules.event_catalogue import AgentStateEvent, RouteEvent, UserMessageEvent
from modules.multi_agent import agent_state
from modules.multi_agent.active_agent import ActiveAgentSessionStore
from modules.multi_agent.agent_state import AgentStates
from modules.multi_agent.message_router import (
    INJECTED_INLINE,
    TRIGGERED_NEW_TURN,
    MessageRouter,
    PendingMessage,
    _Release,
)
from modules.multi_agent.router_hooks import RouterHooks
from modules.statuses import MessageSource, Route
from modules.storage import agents as agent_store
from modules.storage import conversations, unrouted
from modules.storage import messages as message_store
from modules.storage import pending_messages as queue
from modules.storage import tasks as task_store
from modules.storage.db import Database
from modules.storage.group_commit import GroupCommit
from modules.storage.message_meta import MessageMeta, RoutedTo
from modules.storage.session_store import SessionStore
from modules.storage.users import get_or_create_user
from modules.tracing import Tracing
from modules.usage.budgets import Budgets
from server.chat_flow_task_main import collect_queue, poll_completion_notifications
from server.turns.event_log import EventLog
from server.turns.manager import TurnManager
from server.turns.types import SUCCEEDED, TurnOutcome
from test.unit.teams import TOOL_NAMES
from test.unit.turn_doubles import Transport

PROFILES = load_profiles(None, TOOL_NAMES)


class _Failing(ActiveAgentSessionStore):
    """The active agent's write fails once: the claim's transaction, and the release in it, roll back."""

    def __init__(self, store):
        super().__init__(store)
        self.fail = False

    def set_active_agent_in(self, s, conversation_id, agent_id):
        if self.fail:
            self.fail = False
            raise RuntimeError("the session store failed")
        super().set_active_agent_in(s, conversation_id, agent_id)


@pytest.fixture
def team(tmp_path):
    """A router whose releases claim through a real TurnManager; each turn is recorded as it starts."""
    db = Database(f"sqlite:///{tmp_path / 'app.db'}")
    db.migrate()
    conv, master = conversations.create_conversation(db, get_or_create_user(db, "u").id, "t")
    writer = GroupCommit(db)
    rt = SimpleNamespace(db=db, event_log=EventLog(db, writer=writer), transport=Transport(),
                         agent_states=AgentStates(db), active_agents=_Failing(SessionStore(db)),
                         metrics=SimpleNamespace(turns_started=SimpleNamespace(inc=lambda: None)),
                         membership=SimpleNamespace(process_id="me"), profile=lambda _role: PROFILES["MasterAgent"],
                         spawn=lambda fn, *args: fn(*args), tracing=Tracing(), budgets=Budgets(db, []))
    runs: list[tuple[str, int]] = []

    def run(_rt, turn, _sender):
        runs.append((turn.task_id, writer.batches))
        return TurnOutcome(SUCCEEDED)

    manager = TurnManager(rt, SimpleNamespace(run=run, poll=poll_completion_notifications, collect=collect_queue))
    manager._finish = lambda *_args: None  # the end is server/turns/end.py's (test_turn_end.py)
    rt.router = MessageRouter(db, writer=writer, hooks=RouterHooks(wake=manager.wake, claims=manager,
                                                                  active_task_of=manager.active_task_of_agent))
    yield SimpleNamespace(db=db, conv=conv, master=master, writer=writer, rt=rt, manager=manager, runs=runs)
    db.dispose()


def held(t, content):
    """A user's message held for routing, and the message its route releases to the master."""
    message = PendingMessage.new(conversation_id=t.conv.id, target_agent_id=t.master.id, type="message",
                                 content=content, source_display_name="user",
                                 meta=MessageMeta(source=MessageSource.USER, route=Route.PIPELINE))
    with t.db.write() as s:
        unrouted.store_in(s, message.row_values(), routing_process="p1")
    return message


def test_a_message_released_to_an_idle_agent_starts_its_turn_in_the_releases_one_commit(team):
    t = team
    message = held(t, "hello")
    ours_while_claimed = []
    start_in = t.manager._start_in

    def watched(s, agent_id, task_id, collect, **kwargs):
        ours_while_claimed.append(t.manager.runs_here(task_id))  # the watchdog never takes it for an orphan
        return start_in(s, agent_id, task_id, collect, **kwargs)

    t.manager._start_in = watched

    routed = t.rt.router.release(message)

    assert routed.delivery == TRIGGERED_NEW_TURN and routed.task_id is not None
    assert t.runs == [(routed.task_id, 1)]  # the turn ran after one commit: its release and its claim
    assert ours_while_claimed == [True]
    task = task_store.get_task(t.db, routed.task_id)
    assert task.status == task_store.RUNNING and task.trigger_message_id == message.id
    assert [e.type for e in task_store.list_events(t.db, task.id, 0)] == \
        [UserMessageEvent.TYPE, RouteEvent.TYPE, AgentStateEvent.TYPE]
    assert [m.content for m in message_store.list_messages(t.db, t.master.id)] == ["hello"]
    assert agent_store.get_agent(t.db, t.master.id).state == agent_state.RUNNING
    assert not queue.has_queued(t.db, t.master.id) and unrouted.unrouted(t.db, t.conv.id) == []


def test_the_second_of_two_releases_in_one_batch_to_an_idle_agent_is_queued_for_the_turn_the_first_claimed(team):
    t = team
    first, second = held(t, "one"), held(t, "two")

    with t.manager.claiming("t-1"), t.manager.claiming("t-2"), t.db.write() as s:
        outcomes = t.rt.router._release_batch(s, [_Release(first, "t-1"), _Release(second, "t-2")])

    claim, claimed_before = outcomes
    assert claim.start() == "t-1"
    # read again after the commit, the agent is running: the message waits for its turn's next model call
    assert t.rt.router._deliver_stored(second, None).delivery == INJECTED_INLINE
    assert claimed_before.name == "CLAIMED_BEFORE"
    assert [m.content for m in message_store.list_messages(t.db, t.master.id)] == ["one"]
    assert [row.content for row in queue.list_queued(t.db, t.master.id)] == ["two"]
    assert [task_id for task_id, _ in t.runs] == ["t-1"]


def test_a_release_whose_claim_fails_is_released_alone_and_its_agent_woken_after_the_commit(team):
    """The claim's failure rolls its transaction back, the release with it; the message must not wait held for
    routing (and the conversation's later messages behind it): it is released alone, then woken as without
    `claims`, and nothing of the failed claim stays this process's."""
    t = team
    message = held(t, "hello")
    t.rt.active_agents.fail = True  # the failed batch: its release, and its claim's task

    routed = t.rt.router.release(message)

    assert routed.delivery == TRIGGERED_NEW_TURN and t.runs == [(routed.task_id, 2)]  # release, then the wake's claim
    assert unrouted.unrouted(t.db, t.conv.id) == [] and [m.content for m in message_store.list_messages(
        t.db, t.master.id)] == ["hello"]
    assert [task.id for task in task_store.list_tasks(t.db, t.conv.id)] == [routed.task_id]
    assert not t.manager._starting


def test_without_claims_a_release_wakes_its_agent_after_its_commit(team):
    """A router alone (no `claims`): the release commits, then the wake claims in a commit of its own."""
    t = team
    t.rt.router._hooks = RouterHooks(wake=t.manager.wake, active_task_of=t.manager.active_task_of_agent)
    message = held(t, "hello")

    routed = t.rt.router.release(message)

    assert routed.delivery == TRIGGERED_NEW_TURN and t.runs == [(routed.task_id, 2)]


def _routed(task_id):
    return RoutedTo(route=Route.PIPELINE, delivery=TRIGGERED_NEW_TURN, task_id=task_id, agent_id="m")


def _meta_of(t, message):
    return MessageMeta.load(queue.get_message(t.db, message.id).meta)


def test_a_release_that_claims_keeps_the_meta_its_caller_gave_for_the_claim(team):
    """The routing inbox's record of where the message went is written by the release itself (issue 26): no write
    of its own after it. The agent's history copy leaves it out, as it leaves out every record of a route."""
    t = team
    message = held(t, "hello")

    routed = t.rt.router.release(message, claimed_meta=lambda task_id: message.meta.merged(routed=_routed(task_id)))

    assert routed.claimed and routed.delivery == TRIGGERED_NEW_TURN
    assert _meta_of(t, message).routed == _routed(routed.task_id) and t.runs == [(routed.task_id, 1)]
    (entry,) = message_store.list_messages(t.db, t.master.id)
    assert entry.typed_meta.routed is None and entry.typed_meta.source == MessageSource.USER


@pytest.mark.parametrize("how", ["no turn to claim", "the claim fails", "the agent is busy"])
def test_a_release_that_does_not_claim_keeps_the_messages_own_meta(team, how):
    t = team
    message = held(t, "hello")
    if how == "no turn to claim":
        t.manager.claim_in = lambda *_args: None
    elif how == "the claim fails":
        t.rt.active_agents.fail = True
    else:
        with t.db.write() as s:
            agent_store.set_state_in(s, t.master.id, agent_store.state_in(s, t.master.id).version,
                                     agent_state.RUNNING)

    routed = t.rt.router.release(message, claimed_meta=lambda task_id: message.meta.merged(routed=_routed(task_id)))

    assert not routed.claimed
    meta = queue.get_message(t.db, message.id).meta
    assert MessageMeta.load(meta) == message.meta and "routed" not in meta
