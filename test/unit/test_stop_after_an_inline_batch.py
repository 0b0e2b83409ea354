"""A stop that lands just after an inline batch drained the queue: no model request read what it drained, so the
turn's end puts those messages back in the queue and the follow-up turn answers them, as it answers the messages
a stop leaves queued (docs/API.md, `POST /api/tasks`: a message injected into a run that then ends without
another model call is seen by the follow-up turn)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from modules.agents.profiles import load_profiles
from modules.config import Settings
from modules.context.budget import RefusedSizes
from modules.llm import ModelReply
from modules.multi_agent import agent_state
from modules.multi_agent.agent_state import AgentStates
from modules.multi_agent.message_router import MessageRouter, PendingMessage
from modules.statuses import MessageSource
from modules.storage import conversations
from modules.storage import messages as message_store
from modules.storage import pending_messages as queue
from modules.storage import tasks as task_store
from modules.storage.db import Database
from modules.storage.group_commit import GroupCommit
from modules.storage.message_meta import MessageMeta
from modules.storage.models import Task
from modules.storage.users import get_or_create_user
from modules.tools.sandbox import Sandbox
from modules.tracing import Tracing
from modules.usage.budgets import Budgets
from modules.usage.ledger import UsageLedger
from server.chat_flow_task_main import handle_task_with_sender
from server.sender import TaskEventSender
from server.turns.end import finish_turn
from server.turns.event_log import EventLog
from server.turns.types import STOPPED, SUCCEEDED, Turn, TurnOutcome
from server.turns.waiters import TurnWaiters
from test.unit.teams import TOOL_NAMES
from test.unit.turn_doubles import Model, Tools, Transport, calls

PROFILES = load_profiles(None, TOOL_NAMES)


@pytest.fixture
def chat(tmp_path):
    """The master's turn in progress in this process ("me"), with what the turn loop and its end need."""
    db = Database(f"sqlite:///{tmp_path / 'app.db'}")
    db.migrate()
    conv, master = conversations.create_conversation(db, get_or_create_user(db, "u").id, "t")
    states, writer = AgentStates(db), GroupCommit(db)
    with db.write() as s:
        states.transition_in(s, master.id, agent_state.RUNNING)
        task = task_store.create_task_in(s, conversation_id=conv.id, agent_id=master.id, task_type="chat",
                                         owner="me", running=True)
    rt = SimpleNamespace(db=db, router=MessageRouter(db), membership=SimpleNamespace(process_id="me"),
                         settings=Settings(max_tool_iterations=3, llm_model="the-model"),
                         services=SimpleNamespace(), transport=Transport(), agent_states=states,
                         active_agents=SimpleNamespace(set_active_agent=lambda cid, agent_id: None),
                         workspace=lambda cid: tmp_path / "ws" / cid, tools=Tools(), model=Model(),
                         sandbox=Sandbox(mode="off"), refused_sizes=RefusedSizes(), budgets=Budgets(db, []),
                         ledger=UsageLedger(db, writer), tracing=Tracing(), event_log=EventLog(db, writer=writer),
                         suggestions=SimpleNamespace(schedule=lambda **kwargs: None))
    turn = Turn(task_id=task.id, conversation_id=conv.id, agent_id=master.id, display_name="MasterAgent",
                profile=PROFILES["MasterAgent"])
    sender = TaskEventSender(rt.event_log, rt.transport, task_id=task.id, conversation_id=conv.id,
                             agent_id=master.id)
    yield SimpleNamespace(db=db, rt=rt, turn=turn, sender=sender, conv=conv, master=master)
    db.dispose()


def _queue(c, content: str) -> str:
    message = PendingMessage.new(conversation_id=c.conv.id, target_agent_id=c.master.id, type="message",
                                 content=content, source_display_name="user",
                                 meta=MessageMeta(source=MessageSource.USER))
    with c.db.write() as s:
        c.rt.router.enqueue_in(s, message)
    return message.id


def _users(c) -> list[str]:
    return [m.content for m in message_store.list_messages(c.db, c.master.id) if m.role == "user"]


def _run_and_end(c) -> TurnOutcome:
    outcome = handle_task_with_sender(c.rt, c.turn, c.sender)
    assert finish_turn(c.rt, c.turn, c.sender, outcome, TurnWaiters()) is True
    return outcome


def test_a_message_drained_just_before_a_stop_waits_in_the_queue_for_the_follow_up(chat):
    c = chat
    c.rt.model = Model(calls("run_command"), ModelReply("never", [], "stop"))
    c.rt.tools = Tools(during={0: lambda: _queue(c, "actually, do it in Lisbon")})
    drain = c.rt.router.consume_pending_messages

    def drained_as_the_stop_comes(*args, **kwargs):
        drained = drain(*args, **kwargs)
        c.turn.stop_event.set()  # the user's stop lands while the inline batch commits
        return drained

    c.rt.router.consume_pending_messages = drained_as_the_stop_comes
    assert _run_and_end(c) == TurnOutcome(STOPPED)
    assert len(c.rt.model.requests) == 1  # no model request read the message
    assert [m.content for m in queue.list_queued(c.db, c.master.id)] == ["actually, do it in Lisbon"]
    assert _users(c) == []  # it enters the history with the turn that answers it
    roles = [m.role for m in message_store.list_messages(c.db, c.master.id)]
    assert roles == ["assistant", "tool"]


def test_a_message_a_model_request_read_stays_in_the_history_after_a_stop(chat):
    c = chat
    c.rt.tools = Tools(during={0: lambda: _queue(c, "and Porto too")})
    c.rt.model = Model(calls("run_command"), ModelReply("Lisbon and Porto.", [], "stop"),
                       during={1: c.turn.stop_event.set})
    assert _run_and_end(c) == TurnOutcome(STOPPED)
    assert queue.list_queued(c.db, c.master.id) == [] and _users(c) == ["and Porto too"]


def test_a_turn_that_answers_what_its_inline_batch_drained_leaves_the_queue_empty(chat):
    c = chat
    c.rt.tools = Tools(during={0: lambda: _queue(c, "and Porto too")})
    c.rt.model = Model(calls("run_command"), ModelReply("Lisbon and Porto.", [], "stop"))
    assert _run_and_end(c) == TurnOutcome(SUCCEEDED)
    assert queue.list_queued(c.db, c.master.id) == [] and _users(c) == ["and Porto too"]


def test_a_turn_taken_over_just_before_its_inline_batch_leaves_the_queue_to_the_new_owner(chat):
    """Another process judged this one gone and took the task over (its recovery released the agent and starts
    the turn of what is queued): the old turn's inline batch must not drain the queue into a turn that ends
    without a model request, or nobody answers what it took."""
    c = chat
    c.rt.model = Model(calls("run_command"), ModelReply("never", [], "stop"))
    c.rt.tools = Tools(during={0: lambda: _queue(c, "for whoever runs the agent now")})
    looked = c.rt.router.has_queued

    def taken_over_after_the_round(agent_id):
        if c.rt.tools.ran:
            with c.db.write() as s:
                s.get(Task, c.turn.task_id).owner = "the-other-process"
        return looked(agent_id)

    c.rt.router.has_queued = taken_over_after_the_round
    assert handle_task_with_sender(c.rt, c.turn, c.sender) == TurnOutcome(STOPPED)
    assert [m.content for m in queue.list_queued(c.db, c.master.id)] == ["for whoever runs the agent now"]
    assert _users(c) == []
