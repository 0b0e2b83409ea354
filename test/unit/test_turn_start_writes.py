"""A turn's start and the routing of a message, in as few waits and statements as their invariants allow
(issue 26): under load each group-commit wait is a turn of the whole event loop, and each statement CPU on the
one core every stream shares."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from modules.agents.profiles import load_profiles
from modules.event_catalogue import AgentStateEvent, RouteEvent, UserMessageEvent
from modules.multi_agent.active_agent import Active, ActiveAgentSessionStore
from modules.multi_agent.agent_state import AgentStates
from modules.multi_agent.message_router import MessageRouter, PendingMessage
from modules.statuses import MessageSource, Route
from modules.storage import conversations, unrouted
from modules.storage import tasks as task_store
from modules.storage.db import Database
from modules.storage.group_commit import GroupCommit
from modules.storage.message_meta import MessageMeta
from modules.storage.session_store import SessionStore
from modules.storage.users import get_or_create_user
from modules.tracing import Tracing
from server.chat_flow_tool_loop import inject_runtime_user_message
from server.routing_inbox import RoutingInbox
from server.turns.event_log import EventLog
from server.turns.manager import TurnManager
from server.turns.types import SUCCEEDED, StartCheck, Turn, TurnOutcome
from test.unit.statement_log import statements
from test.unit.teams import TOOL_NAMES
from test.unit.turn_doubles import Sender, Transport

PROFILES = load_profiles(None, TOOL_NAMES)


@pytest.fixture
def chat(tmp_path):
    db = Database(f"sqlite:///{tmp_path / 'app.db'}")
    db.migrate()
    conv, master = conversations.create_conversation(db, get_or_create_user(db, "u").id, "t")
    yield SimpleNamespace(db=db, conv=conv, master=master)
    db.dispose()


def user_message(c, content):
    return PendingMessage.new(conversation_id=c.conv.id, target_agent_id=c.master.id, type="message",
                              content=content, source_display_name="user",
                              meta=MessageMeta(source=MessageSource.USER, route=Route.PIPELINE))


def test_a_turns_claim_writes_its_task_running_with_its_first_events_and_its_thread_writes_nothing(chat):
    """The messages it starts on (with their route), the claim's `agent_state` and the status `running`: written
    by the claim's transaction, so the turn's thread starts without a group-commit wait (there were three such
    batches, then one besides the claim's; issue 26). The thread sends those events to the room, counts the queue
    for it, and its first model call reads neither the task's owner nor the queue again (`StartCheck`)."""
    c = chat
    writer = GroupCommit(c.db)
    router = MessageRouter(c.db)
    with c.db.write() as s:
        router.enqueue_in(s, user_message(c, "hi"))
    transport = Transport()
    rt = SimpleNamespace(db=c.db, event_log=EventLog(c.db, writer=writer), transport=transport, tracing=Tracing(),
                         agent_states=AgentStates(c.db), active_agents=ActiveAgentSessionStore(SessionStore(c.db)),
                         metrics=SimpleNamespace(turns_started=SimpleNamespace(inc=lambda: None)),
                         membership=SimpleNamespace(process_id="me"), profile=lambda _role: PROFILES["MasterAgent"],
                         spawn=lambda fn, *args: fn(*args))
    at_run: list[tuple[int, int, str, StartCheck | None, list[str]]] = []

    def run(_rt, turn, _sender):
        count = len(seen)
        task = task_store.get_task(c.db, turn.task_id)
        at_run.append((writer.batches, count, task.status, turn.start_check,
                       [e.type for e in task_store.list_events(c.db, turn.task_id, 0)]))
        assert task.started_at is not None and task.owner == "me"
        return TurnOutcome(SUCCEEDED)

    manager = TurnManager(rt, SimpleNamespace(run=run, poll=None))
    manager._finish = lambda *_args: None  # the end is server/turns/end.py's (test_turn_end.py)

    def collect(s, agent, task_id):
        return router.drain_to_history_in(s, agent.id, agent.conversation_id, task_id, last_starts_work=True)

    with statements(c.db) as seen:
        task_id = manager._claim(c.master.id, collect)

    first = [UserMessageEvent.TYPE, RouteEvent.TYPE, AgentStateEvent.TYPE]
    [(batches, count, status, check, logged)] = at_run
    assert (batches, status, check, logged) == (1, task_store.RUNNING, StartCheck(queued=0), first)
    claim_end = max(i for i, statement in enumerate(seen[:count]) if statement.startswith("INSERT INTO task_events"))
    after_claim = seen[claim_end + 1:count]
    assert len(after_claim) == 1 and after_claim[0].startswith("SELECT count(*)")  # the room's queue count
    sent = [(event_type, data["idx"]) for event_type, data, _room in transport.events if "idx" in data]
    assert sent == [(event_type, idx) for idx, event_type in enumerate(first)]
    assert task_store.next_event_idx(c.db, task_id) == len(first)


@pytest.mark.parametrize("source", [MessageSource.USER, MessageSource.BACKGROUND_COMMAND])
def test_the_claim_of_a_turn_on_the_users_messages_records_its_agent_as_the_active_one(chat, source):
    """In the claim's own transaction (issue 26: the first model request wrote it in a batch of its own); a
    turn on a notice leaves the user with the agent they talk with."""
    c = chat
    store = ActiveAgentSessionStore(SessionStore(c.db))
    rt = SimpleNamespace(db=c.db, active_agents=store, agent_states=AgentStates(c.db),
                         membership=SimpleNamespace(process_id="me"), event_log=EventLog(c.db), transport=Transport())
    manager = TurnManager.__new__(TurnManager)
    manager._rt = rt
    message = PendingMessage.new(conversation_id=c.conv.id, target_agent_id=c.master.id, type="message",
                                 content="hi", source_display_name="user", meta=MessageMeta(source=source))
    router = MessageRouter(c.db)
    with c.db.write() as s:
        router.enqueue_in(s, message)

    def collect(s, agent, task_id):
        return router.drain_to_history_in(s, agent.id, agent.conversation_id, task_id, last_starts_work=True)

    with c.db.write() as s:
        started = manager._start_in(s, c.master.id, "task-1", collect)

    assert started is not None
    assert store.get(c.conv.id) == (Active(agent_id=c.master.id) if source == MessageSource.USER else Active())


def test_a_turn_with_nothing_queued_takes_no_inline_batch_write(chat):
    """The inline batch looks before it drains: a drain of an empty queue was a write batch's wait for nothing
    (the claim drained the queue moments before the turn's first model call)."""
    c = chat
    rt = SimpleNamespace(db=c.db, router=MessageRouter(c.db))
    turn = Turn(task_id="t1", conversation_id=c.conv.id, agent_id=c.master.id, display_name="MasterAgent",
                profile=PROFILES["MasterAgent"])

    with statements(c.db) as seen:
        assert inject_runtime_user_message(rt, turn, Sender()) == 0

    assert [s.split()[0] for s in seen] == ["SELECT"]


class _Inbox(RoutingInbox):
    """The inbox's worker with routing replaced by a record of what it routed (and what it held meanwhile)."""

    def __init__(self, rt, meanwhile=()):
        super().__init__(rt, routing=None)
        self.routed: list[str] = []
        self._meanwhile = list(meanwhile)

    def _route(self, held):
        with self._rt.db.write() as s:
            unrouted.release_in(s, held.id, {"target_agent_id": held.target_agent_id, "type": held.type,
                                             "question_id": None, "meta": held.meta.dump()})
        self.routed.append(held.content)
        if self._meanwhile:  # a send during the routing: stored, then kicked, as ChatService does
            with self._rt.db.write() as s:
                unrouted.store_in(s, self._meanwhile.pop(0).row_values(), routing_process="p1")
            self.kick(held.conversation_id)


def _hold(c, content):
    with c.db.write() as s:
        unrouted.store_in(s, user_message(c, content).row_values(), routing_process="p1")


def test_the_routing_worker_reads_the_held_messages_once_when_no_send_came_meanwhile(chat, monkeypatch):
    c = chat
    reads = []
    real = unrouted.unrouted
    monkeypatch.setattr(unrouted, "unrouted", lambda db, cid: reads.append(cid) or real(db, cid))
    inbox = _Inbox(SimpleNamespace(db=c.db, spawn=lambda fn, *args: fn(*args)))
    _hold(c, "one")

    inbox.kick(c.conv.id)

    assert inbox.routed == ["one"] and reads == [c.conv.id]


def test_a_message_sent_while_the_worker_routes_is_routed_by_the_same_worker(chat):
    c = chat
    inbox = _Inbox(SimpleNamespace(db=c.db, spawn=lambda fn, *args: fn(*args)), meanwhile=[user_message(c, "two")])
    _hold(c, "one")

    inbox.kick(c.conv.id)

    assert inbox.routed == ["one", "two"]
