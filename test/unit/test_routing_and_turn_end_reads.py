"""The reads a routed message and a turn's end make, each once (issue 26): on the one core every stream shares,
each statement costs about a millisecond of CPU under load, and every reply paid for these twice."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from sqlalchemy.exc import IntegrityError

from modules.agents.profiles import MASTER_KIND
from modules.event_catalogue import (
    AgentStateEvent,
    PendingCountEvent,
    RouteEvent,
    SuggestionsEvent,
    TaskCompleteEvent,
    UserMessageEvent,
)
from modules.multi_agent import agent_state
from modules.multi_agent.active_agent import Active, ActiveAgentSessionStore, FastPath
from modules.multi_agent.agent_state import AgentStates
from modules.multi_agent.message_router import INJECTED_INLINE, TRIGGERED_NEW_TURN, PendingMessage, RouteResult
from modules.statuses import MessageSource, Route
from modules.storage import agents as agent_store
from modules.storage import messages as message_store
from modules.storage import pending_messages, unrouted
from modules.storage import tasks as task_store
from modules.storage.db import Database
from modules.storage.group_commit import GroupCommit
from modules.storage.message_meta import MessageMeta
from modules.storage.messages import MessageDraft
from modules.storage.session_store import SessionStore
from modules.tracing import Tracing
from modules.usage.budgets import Budgets
from modules.usage.ledger import UsageLedger
from server.api.request_models import SendMessageBody
from server.chat_service import ChatService
from server.routing_inbox import RoutingInbox
from server.turns.end import _read_facts, _suggest
from server.turns.event_log import EventLog
from server.turns.history import close_open_tool_calls_in
from server.turns.types import SUCCEEDED, Turn, TurnOutcome
from server.turns.waiters import TurnWaiters
from server.user_routing import FAST_PATH, RouteDecision, UserMessageRouting
from test.unit.statement_log import statements
from test.unit.teams import conversation_with_sub_agent
from test.unit.turn_doubles import Transport

CONTINUES = SimpleNamespace(continues=True, reason="continuation")  # a verdict, as far as routing reads one


@pytest.fixture
def team(tmp_path):
    db = Database(f"sqlite:///{tmp_path / 'app.db'}")
    conv, master, sub, _manager = conversation_with_sub_agent(db)
    yield SimpleNamespace(db=db, conv=conv, master=master, sub=sub)
    db.dispose()


class Calls:
    """A stand-in that records its calls and answers `result`."""

    def __init__(self, result=None):
        self.calls: list[tuple] = []
        self._result = result

    def __call__(self, *args, **kwargs):
        self.calls.append(args)
        return self._result


def test_routing_reads_the_active_record_once_and_no_question_while_no_agent_waits(team):
    t = team
    get, questions = Calls(Active(agent_id=t.master.id)), Calls([])
    fast_path = Calls(FastPath(t.master.id, t.master, CONTINUES))
    rt = SimpleNamespace(router=SimpleNamespace(waiting_for_user=lambda _ids: []),
                         user_questions=SimpleNamespace(list=questions), active_agents=SimpleNamespace(get=get),
                         fast_path=SimpleNamespace(decide=fast_path), signals=None)
    agents = agent_store.list_agents(t.db, t.conv.id)

    decision = UserMessageRouting(rt).decide(t.conv, agents, "ok", None)

    assert (decision.route, decision.target.id) == (FAST_PATH, t.master.id)
    assert len(get.calls) == 1 and questions.calls == []


def test_a_question_is_looked_up_while_its_agent_waits(team):
    t = team
    with t.db.write() as s:
        agent_store.set_state_in(s, t.sub.id, agent_store.state_in(s, t.sub.id).version, agent_state.WAITING)
    questions = Calls([])
    rt = SimpleNamespace(router=SimpleNamespace(waiting_for_user=lambda _ids: []),
                         user_questions=SimpleNamespace(list=questions),
                         active_agents=SimpleNamespace(get=lambda _cid: Active(agent_id=t.master.id)),
                         fast_path=SimpleNamespace(decide=Calls(FastPath(t.master.id, t.master, CONTINUES))))

    UserMessageRouting(rt).decide(t.conv, agent_store.list_agents(t.db, t.conv.id), "ok", None)

    assert questions.calls == [(t.conv.id,)]


def test_a_transition_from_a_row_just_read_reads_it_no_second_time_and_a_stale_one_loses(team):
    t = team
    states = AgentStates(t.db)
    with t.db.write() as s:
        row = agent_store.lock_for_turn_in(s, t.master.id)
        with statements(t.db) as seen:
            change = states.transition_in(s, t.master.id, agent_state.RUNNING, read=row)
    assert change is not None and [x.split()[0] for x in seen] == ["UPDATE"]
    with t.db.write() as s:  # `row` is stale now: its version is the one before the change above
        assert states.transition_in(s, t.master.id, agent_state.IDLE, force=True, read=row) is None


def test_a_turns_end_reads_its_conversations_running_work_in_one_statement(team):
    """The sub-agents at work (the flags and the master's busy list) and whether a command runs: one statement,
    two before (`modules/storage/work_counts.py`, `running_work`)."""
    t = team
    turn = SimpleNamespace(conversation_id=t.conv.id, kind=MASTER_KIND, parent_id=None)

    with statements(t.db) as seen:
        facts = _read_facts(SimpleNamespace(db=t.db), turn, TurnOutcome(SUCCEEDED), TurnWaiters())

    assert len(seen) == 1
    assert facts.flags == {"has_running_sub_agents": False, "has_running_background_commands": False}
    with t.db.write() as s:
        agent_store.set_state_in(s, t.sub.id, agent_store.state_in(s, t.sub.id).version, agent_state.RUNNING)
    facts = _read_facts(SimpleNamespace(db=t.db), turn, TurnOutcome(SUCCEEDED), TurnWaiters())
    assert facts.flags["has_running_sub_agents"] is True
    assert [(b["agent_id"], b["summary"]) for b in facts.busy_sub_agents] == [(t.sub.id, "task")]


def test_a_turns_end_events_take_the_index_kept_in_memory(team):
    t = team
    with t.db.write() as s:
        task = task_store.create_task_in(s, conversation_id=t.conv.id, agent_id=t.master.id, task_type="chat")
    log = EventLog(t.db)
    log.begin(task.id)
    log.append_many(task.id, [(UserMessageEvent.TYPE, {"n": 1}), (AgentStateEvent.TYPE, {"n": 2})])

    with log.exclusive(task.id), t.db.write() as s, statements(t.db) as seen:
        first = log.append_in(s, task.id, [(TaskCompleteEvent.TYPE, {})])

    assert first == 2 and not [x for x in seen if "max(task_events.idx)" in x]
    with log.exclusive(task.id), t.db.write() as s:  # after an end the index is read from the log again
        assert log.append_in(s, task.id, [(SuggestionsEvent.TYPE, {})]) == 3


def test_suggestions_after_a_turns_end_take_the_index_the_end_knows_and_read_none(team):
    """The end's events are the task's last but the suggestions': their index followed from the end's, and was
    read back with `max(idx)` (issue 26). A wrong one is refused by the log's unique index, never written twice."""
    t = team
    with t.db.write() as s:
        task = task_store.create_task_in(s, conversation_id=t.conv.id, agent_id=t.master.id, task_type="chat")
    log = EventLog(t.db)
    log.append_many(task.id, [(UserMessageEvent.TYPE, {"n": 1})])
    with log.exclusive(task.id), t.db.write() as s:
        ended = log.append_in(s, task.id, [(AgentStateEvent.TYPE, {}), (TaskCompleteEvent.TYPE, {})])
    log.forget(task.id)

    log.continue_at(task.id, ended + 2)
    with statements(t.db) as seen:
        idx = log.append_many(task.id, [(SuggestionsEvent.TYPE, {})])
    assert (idx, [x for x in seen if "max(task_events.idx)" in x]) == (3, [])

    log.forget(task.id)
    log.continue_at(task.id, 1)  # wrong: 1 is taken
    with pytest.raises(IntegrityError):
        log.append_many(task.id, [(SuggestionsEvent.TYPE, {"again": True})])
    assert log.append_many(task.id, [(SuggestionsEvent.TYPE, {"again": True})]) == 4  # read from the log
    assert [e.idx for e in task_store.list_events(t.db, task.id)] == [0, 1, 2, 3, 4]


@pytest.mark.parametrize(("delivery", "counted"), [(TRIGGERED_NEW_TURN, False), (INJECTED_INLINE, True)])
def test_a_routed_message_that_started_a_turn_here_leaves_the_queue_size_to_that_turn(team, delivery, counted):
    """The turn sends `pending_count` as it starts; the routing's own was a second read and a second send."""
    t = team
    transport = Transport()
    decision = RouteDecision(Route.PIPELINE, t.master)
    rt = SimpleNamespace(db=t.db, tracing=Tracing(), metrics=SimpleNamespace(routes=SimpleNamespace(
        labels=lambda _route: SimpleNamespace(inc=lambda: None))), transport=transport,
        router=SimpleNamespace(release=lambda _message, **_kw: RouteResult(delivery, "task-1")),
        active_agents=SimpleNamespace(set_active_agent=lambda *_a: None),
        writer=SimpleNamespace(call=lambda _step: None), tasks=SimpleNamespace(recorded_active=lambda _task: True))
    inbox = RoutingInbox(rt, SimpleNamespace(decide=lambda *_a: decision))
    held = PendingMessage.new(conversation_id=t.conv.id, target_agent_id=t.master.id, type="message",
                              content="hi", source_display_name="user", meta=MessageMeta(source=MessageSource.USER))

    inbox._route(held)

    assert [e[0] for e in transport.events] == ([PendingCountEvent.TYPE] if counted else []) + [RouteEvent.TYPE]


def _route_to_the_sub_agent(t, delivery, recorded_here, *, claimed=False):
    """Route a held user message to the sub-agent through the inbox, its release answering `delivery` with task-1
    (a turn whose claim recorded the active agent when `recorded_here`; that the release claimed it and wrote the
    meta the inbox gave for that case when `claimed`): the statements it ran, and its parts."""
    writer = GroupCommit(t.db)
    active = ActiveAgentSessionStore(SessionStore(t.db), writer)
    started = Calls(recorded_here)

    def release(message, *, claimed_meta):
        if claimed:
            with t.db.write() as s:
                unrouted.set_meta_in(s, message.id, claimed_meta("task-1"))
        return RouteResult(delivery, "task-1", claimed=claimed)

    rt = SimpleNamespace(db=t.db, tracing=Tracing(), metrics=SimpleNamespace(routes=SimpleNamespace(
        labels=lambda _route: SimpleNamespace(inc=lambda: None))), transport=Transport(),
        router=SimpleNamespace(release=release), active_agents=active, writer=writer,
        tasks=SimpleNamespace(recorded_active=started))
    inbox = RoutingInbox(rt, SimpleNamespace(decide=lambda *_a: RouteDecision(Route.PIPELINE, t.sub)))
    held = PendingMessage.new(conversation_id=t.conv.id, target_agent_id=t.master.id, type="message",
                              content="hi", source_display_name="user", meta=MessageMeta(source=MessageSource.USER))
    with t.db.write() as s:
        unrouted.store_in(s, held.row_values(), routing_process="p1")
    with statements(t.db) as seen:
        inbox._route(held)
    return SimpleNamespace(seen=seen, writer=writer, active=active, started=started, held=held)


def _set_active(t, agent_id):
    with t.db.write() as s:
        ActiveAgentSessionStore(SessionStore(t.db)).set_active_agent_in(s, t.conv.id, agent_id)


@pytest.mark.parametrize("recorded", [False, True])
def test_a_delivery_is_recorded_with_the_active_agent_in_one_batch_without_reading_what_its_release_wrote(
        team, recorded):
    """Issue 26: the active agent was a transaction of its own and the record read back the meta its release had
    just written; now both are one step of a group-commit batch, and the meta is the one the release wrote. When
    the turn the delivery started here recorded its agent as the active one (its claim's transaction, for a turn
    on the user's messages), the record does not write it a second time."""
    t = team
    if recorded:  # as the claim of the turn on this message did
        _set_active(t, t.sub.id)

    r = _route_to_the_sub_agent(t, TRIGGERED_NEW_TURN, recorded)

    assert r.writer.batches == 1 and not [x for x in r.seen if x.startswith("SELECT pending_messages")]
    assert r.started.calls == [("task-1",)]
    assert len([x for x in r.seen if "session_store" in x]) == (0 if recorded else 1)
    assert r.active.get(t.conv.id) == Active(agent_id=t.sub.id)
    meta = MessageMeta.load(pending_messages.get_message(t.db, r.held.id).meta)
    assert meta.source == MessageSource.USER and meta.route == Route.PIPELINE
    assert meta.routed.task_id == "task-1" and meta.routed.agent_id == t.sub.id


def test_a_release_that_claimed_the_turn_recorded_the_delivery_and_leaves_the_inbox_nothing_to_write(team):
    """The release that started the turn wrote the meta the inbox gave for that case (`claimed_meta`), and its claim
    the active agent: no batch of the inbox's own follows (issue 26: a group-commit writer a stream fewer)."""
    t = team
    _set_active(t, t.sub.id)  # as the claim of the turn on this message did

    r = _route_to_the_sub_agent(t, TRIGGERED_NEW_TURN, True, claimed=True)

    assert r.writer.batches == 0 and [x.split()[0] for x in r.seen] == ["SELECT", "UPDATE"]  # its read, the release
    meta = MessageMeta.load(pending_messages.get_message(t.db, r.held.id).meta)
    assert meta.source == MessageSource.USER and meta.route == Route.PIPELINE
    assert (meta.routed.delivery, meta.routed.task_id, meta.routed.agent_id, meta.routed.target_agent) == \
        (TRIGGERED_NEW_TURN, "task-1", t.sub.id, t.sub.display_name)


def test_a_message_injected_into_a_running_turn_records_its_agent_as_the_active_one(team):
    """Only a turn this very delivery started recorded the agent in its claim: a running turn the message joins
    may have started long before another agent answered the user."""
    t = team
    _set_active(t, t.master.id)  # another agent answered the user since the running turn started

    r = _route_to_the_sub_agent(t, INJECTED_INLINE, True)

    assert r.started.calls == [] and r.active.get(t.conv.id) == Active(agent_id=t.sub.id)


def test_a_send_without_a_client_message_id_looks_for_no_earlier_copy_and_tells_the_ledger_its_user(team):
    t = team
    stored = Calls(None)
    ledger = UsageLedger(t.db, GroupCommit(t.db))
    rt = SimpleNamespace(db=t.db, router=SimpleNamespace(stored=stored), budgets=Budgets(t.db, []), ledger=ledger,
                         suggestions=SimpleNamespace(cancel=lambda _cid: None), writer=GroupCommit(t.db),
                         spawn=lambda *_a: None, settings=SimpleNamespace(), rate_limiter=None,
                         membership=SimpleNamespace(process_id="p1"))
    service = ChatService(rt)

    answer = service._deliver(t.conv.user_id, SendMessageBody(message="hi", conversation_id=t.conv.id), None)

    assert stored.calls == [] and [m.content for m in unrouted.unrouted(t.db, t.conv.id)] == ["hi"]
    assert answer.conversation_id == t.conv.id
    with statements(t.db) as seen:
        assert ledger.user_of(t.conv.id) == t.conv.user_id
    assert seen == []


def test_a_turns_suggestions_take_what_the_turn_noted_and_read_nothing(team):
    """Every turn's end read every entry the agent ever had (issue 26), then the turn's own entries (about 1 % of
    500 streams' CPU): the user's last message and the reply are what the turn drained and wrote, noted as it goes
    (`Turn.note_drained`, `Turn.reply`), so the end reads none of them."""
    t = team
    drained = message_store.append_messages(t.db, t.conv.id, t.master.id, [
        MessageDraft(role="user", content="first question", meta=MessageMeta(source=MessageSource.USER)),
        MessageDraft(role="user", content="[a command finished]",
                     meta=MessageMeta(source=MessageSource.BACKGROUND_COMMAND))])
    turn = Turn(task_id="task-1", conversation_id=t.conv.id, agent_id=t.master.id, display_name="MasterAgent",
                profile=None, drained=drained)
    assert turn.user_text == "first question"  # the notice after it is not the user's
    inline = message_store.append_messages(t.db, t.conv.id, t.master.id, [
        MessageDraft(role="user", content="and in French", meta=MessageMeta(source=MessageSource.USER))])
    turn.note_drained(inline)
    turn.reply = ("m-1", "en français")
    asked = []

    def schedule(*, task_id, conversation_id, agent_id, reply_message_id, user_message, reply, next_idx):
        asked.append((user_message, reply, reply_message_id, next_idx))

    with statements(t.db) as seen:
        _suggest(SimpleNamespace(db=t.db, suggestions=SimpleNamespace(schedule=schedule), budgets=Budgets(t.db, []),
                                 ledger=None), turn, 7)

    assert asked == [("and in French", "en français", "m-1", 7)] and seen == []


def test_a_turns_end_looks_for_open_tool_calls_among_its_own_entries_without_their_texts(team):
    """Every turn's end read every tool call and result the agent ever had, texts included (issue 26)."""
    t = team
    call = {"id": "c-old", "type": "function", "function": {"name": "run_command", "arguments": "{}"}}
    message_store.append_messages(t.db, t.conv.id, t.master.id, [
        MessageDraft(role="assistant", content=None, tool_calls=[call]),
        MessageDraft(role="tool", content="x" * 10_000, tool_call_id="c-old", name="run_command")])
    [first] = message_store.append_messages(t.db, t.conv.id, t.master.id, [MessageDraft(role="user", content="go")])
    message_store.append_messages(t.db, t.conv.id, t.master.id, [
        MessageDraft(role="assistant", content=None, tool_calls=[{**call, "id": "c-new"}])])

    with t.db.write() as s, statements(t.db) as seen:
        closed = close_open_tool_calls_in(s, t.conv.id, t.master.id, "stopped", first_seq=first.seq)

    assert [m.tool_call_id for m in closed] == ["c-new"]
    [read] = [x for x in seen if x.startswith("SELECT") and "tool_calls" in x]
    assert "messages.seq >=" in read and "messages.content" not in read

