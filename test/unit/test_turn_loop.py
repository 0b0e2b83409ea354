"""The turn and tool loops in-process, on a real queue and history, with a scripted model and tools, where a mutation
tester can see them (`make mutate`): model calls and tool rounds in order, the inline batch after the whole tool
block, before the next round's request (none after the last round), the iteration limit, stops, and take-overs."""

from __future__ import annotations

import dataclasses
import json
import logging
import time
from types import SimpleNamespace

import pytest
from sqlalchemy import event

from modules.agents.profiles import load_profiles
from modules.config import Settings
from modules.context.budget import RefusedSizes
from modules.event_catalogue import (
    AiMessageStartEvent,
    PendingCountEvent,
    RouteEvent,
    TextChunkEvent,
    TextEndEvent,
    ToolResultEvent,
    ToolStartEvent,
    UserMessageEvent,
)
from modules.llm import ModelError, ModelReply, ToolCall
from modules.multi_agent.message_router import MessageRouter, PendingMessage
from modules.statuses import Delivery, MessageSource, Route
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
from modules.usage.budgets import DAY, TOKENS, Budget, Budgets
from modules.usage.ledger import UsageLedger
from modules.usage.records import AGENT, OK, CallContext, UsageRecord
from server.chat_flow_task_main import handle_task_with_sender
from server.chat_flow_tool_loop import STOPPED_RESULT, execute_tool_calls, inject_runtime_user_message
from server.turns.types import CLAIM_TRUSTED_S, FAILED, STOPPED, SUCCEEDED, StartCheck, Turn, TurnOutcome
from test.unit.teams import TOOL_NAMES
from test.unit.turn_doubles import PRODUCER, Model, Sender, Tools, Transport, calls

PROFILES = load_profiles(None, TOOL_NAMES)


@pytest.fixture
def flow(tmp_path):
    db = Database(f"sqlite:///{tmp_path / 'app.db'}")
    db.migrate()
    conv, master = conversations.create_conversation(db, get_or_create_user(db, "u").id, "t")
    with db.write() as s:
        task = task_store.create_task_in(s, conversation_id=conv.id, agent_id=master.id, task_type="chat",
                                         owner="me")
    active = []
    rt = SimpleNamespace(db=db, router=MessageRouter(db), membership=SimpleNamespace(process_id="me"),
                         settings=Settings(max_tool_iterations=3, llm_model="the-model"),
                         services=SimpleNamespace(name="the agent services"), transport=Transport(),
                         active_agents=SimpleNamespace(set_active_agent=lambda cid, name: active.append((cid, name))),
                         workspace=lambda cid: tmp_path / "ws" / cid, tools=Tools(), model=Model(),
                         sandbox=Sandbox(mode="off"), refused_sizes=RefusedSizes(), budgets=Budgets(db, []),
                         ledger=UsageLedger(db, GroupCommit(db)), tracing=Tracing(),
                         event_log=SimpleNamespace(writer=GroupCommit(db)))
    turn = Turn(task_id=task.id, conversation_id=conv.id, agent_id=master.id, display_name="MasterAgent",
                    profile=PROFILES["MasterAgent"], from_user=True)
    yield SimpleNamespace(db=db, rt=rt, turn=turn, sender=Sender(), active=active, conv=conv, master=master)
    db.dispose()


def queue_message(f, content, **meta):
    msg = PendingMessage.new(conversation_id=f.conv.id, target_agent_id=f.master.id, type="message",
                             content=content, source_display_name="user",
                             meta=MessageMeta(source=MessageSource.USER, **meta))
    with f.db.write() as s:
        f.rt.router.enqueue_in(s, msg)


def history(f):
    return [(m.role, m.content if m.role != "assistant" else [c["function"]["name"] for c in m.tool_calls or []]
             or m.content) for m in message_store.list_messages(f.db, f.master.id)]


def run(f):
    return handle_task_with_sender(f.rt, f.turn, f.sender)


def test_a_reply_without_calls_ends_the_turn_streamed_and_stored(flow):
    f = flow
    queue_message(f, "hello")
    f.rt.model = Model(ModelReply("Hi there, friend.", [], "stop"))
    assert run(f) == TurnOutcome(SUCCEEDED)
    [request] = f.rt.model.requests
    assert request["messages"][0]["role"] == "system" and "MasterAgent" in request["messages"][0]["content"]
    assert request["messages"][1:] == [{"role": "user", "content": "hello"}]
    assert request["model"] == "the-model"
    assert [t["function"]["name"] for t in request["tools"]] == list(PROFILES["MasterAgent"].tools)
    assert f.active == [(f.conv.id, f.master.id)] and request["stopped"] is False
    assert f.sender.types() == [UserMessageEvent.TYPE, AiMessageStartEvent.TYPE, *[TextChunkEvent.TYPE] * 6,
                                TextEndEvent.TYPE]
    chunks = "".join(d["content"] for t, d in f.sender.events if t == TextChunkEvent.TYPE)
    start, end = f.sender.events[1][1], f.sender.events[-1][1]
    assert chunks == end["content"] == "Hi there, friend." and start["message_id"] == end["message_id"]
    assert {d["message_id"] for t, d in f.sender.events if t == TextChunkEvent.TYPE} == {start["message_id"]}
    assert start["display_name"] == "MasterAgent"
    assert history(f) == [("user", "hello"), ("assistant", "Hi there, friend.")]
    stored = message_store.list_messages(f.db, f.master.id)[-1]
    assert stored.message_id == end["message_id"] and stored.meta["task_id"] == f.turn.task_id
    assert not f.turn.wrote_tool_calls


def test_each_tool_round_runs_in_order_then_takes_the_queue_after_the_whole_block(flow):
    f = flow
    f.rt.model = Model(calls("run_command", "ask_user"), ModelReply("done", [], "stop"))
    f.rt.tools = Tools(during={0: lambda: queue_message(f, "arrived meanwhile")})
    assert run(f) == TurnOutcome(SUCCEEDED)
    assert [(n, json.loads(a)["n"]) for n, a, _ in f.rt.tools.ran] == [("run_command", 0), ("ask_user", 1)]
    assert all(allowed == tuple(PROFILES["MasterAgent"].tools) for _, _, allowed in f.rt.tools.ran)
    assert history(f) == [("assistant", ["run_command", "ask_user"]), ("tool", '{"success": true, "ran": '
                          '"run_command"}'), ("tool", '{"success": true, "ran": "ask_user", "said": "好的"}'),
                          ("user", "arrived meanwhile"), ("assistant", "done")]
    second = f.rt.model.requests[1]["messages"]
    assert [m["role"] for m in second[1:]] == ["assistant", "tool", "tool", "user"]
    assert second[1]["content"] is None and second[2]["tool_call_id"] == "c0-run_command"
    assert f.sender.types() == [AiMessageStartEvent.TYPE, TextEndEvent.TYPE, ToolStartEvent.TYPE, ToolResultEvent.TYPE,
                                ToolStartEvent.TYPE,
                                ToolResultEvent.TYPE, UserMessageEvent.TYPE, AiMessageStartEvent.TYPE,
                                TextChunkEvent.TYPE, TextChunkEvent.TYPE,
                                TextEndEvent.TYPE]
    assert f.sender.events[2][1] == {"tool_call_id": "c0-run_command", "name": "run_command",
                                     "arguments": '{"n": 0}'}
    assert json.loads(f.sender.events[3][1]["result"]) == {"success": True, "ran": "run_command"}
    assert f.sender.events[3][1]["tool_call_id"] == "c0-run_command" and f.sender.events[3][1]["name"] == "run_command"
    assert f.sender.events[5][1]["result"] == '{"success": true, "ran": "ask_user", "said": "好的"}'  # not \\u escaped
    assert f.sender.events[6][1]["starts_work"] is False and f.sender.events[6][1]["message"] == "arrived meanwhile"
    ctx = f.rt.tools.contexts[0]
    assert (ctx.conversation_id, ctx.agent_id, ctx.agent_display_name, ctx.task_id) == (
        f.conv.id, f.master.id, "MasterAgent", f.turn.task_id)
    assert ctx.workspace == f.rt.workspace(f.conv.id) and ctx.settings is f.rt.settings
    assert ctx.services is f.rt.services and ctx.emit == f.sender.emit and ctx.should_stop() is False
    assert ctx.sandbox is f.rt.sandbox
    assert [c.tool_call_id for c in f.rt.tools.contexts] == ["c0-run_command", "c1-ask_user"]
    f.turn.stop_event.set()
    assert ctx.should_stop() is True
    assert [m.name for m in message_store.list_messages(f.db, f.master.id) if m.role == "tool"] == [
        "run_command", "ask_user"]


def test_the_limit_fails_the_turn_and_the_last_round_leaves_the_queue_for_the_next_turn(flow):
    f = flow
    f.rt.model = Model(calls("run_command"), calls("run_command"), calls("run_command"), ModelReply("x", [], "stop"))
    f.rt.tools = Tools(during={1: lambda: queue_message(f, "second round"),
                               2: lambda: queue_message(f, "last round")})
    outcome = run(f)
    assert outcome == TurnOutcome(FAILED, {"code": "iteration_limit",
                                           "message": "stopped after 3 model calls without a final answer"})
    assert len(f.rt.model.requests) == 3 and len(f.rt.tools.ran) == 3
    assert [c for r, c in history(f) if r == "user"] == ["second round"]
    assert [r.content for r in queue.list_queued(f.db, f.master.id)] == ["last round"]


def test_a_model_error_fails_the_turn_with_its_code_and_is_logged(flow, caplog):
    f = flow
    f.rt.model = Model(calls("run_command"), ModelError("rate_limited", "slow down", retryable=True))
    with caplog.at_level(logging.WARNING, logger="server.chat_flow_task_main"):
        assert run(f) == TurnOutcome(FAILED, {"code": "rate_limited", "message": "slow down"})
    assert [r.getMessage() for r in caplog.records if r.name == "server.chat_flow_task_main"] == [
        f"model call failed for task {f.turn.task_id}: rate_limited slow down"]
    assert f.sender.types()[-1] == AiMessageStartEvent.TYPE


def test_what_streamed_before_a_model_error_stays_marked_as_cut_off(flow):
    f = flow
    f.rt.model = Model(ModelError("server_error", "upstream 500", status=500, partial="Half an ans"))
    assert run(f) == TurnOutcome(FAILED, {"code": "server_error", "message": "upstream 500"})
    start, end = f.sender.events[-2], f.sender.events[-1]
    assert start[0] == AiMessageStartEvent.TYPE and end[0] == TextEndEvent.TYPE
    assert end[1] == {"message_id": start[1]["message_id"], "content": "Half an ans", "partial": True,
                      "error_code": "server_error"}
    [stored] = message_store.list_messages(f.db, f.master.id)
    assert (stored.role, stored.content, stored.tool_calls, stored.message_id) == (
        "assistant", "Half an ans", None, start[1]["message_id"])
    assert stored.meta == {"task_id": f.turn.task_id, "partial": True, "error_code": "server_error"}


def test_a_model_error_before_any_text_stores_nothing(flow):
    f = flow
    f.rt.model = Model(ModelError("timeout", "no answer"))
    assert run(f) == TurnOutcome(FAILED, {"code": "timeout", "message": "no answer"})
    assert message_store.list_messages(f.db, f.master.id) == [] and TextEndEvent.TYPE not in f.sender.types()


def test_a_reply_cut_off_by_stop_is_marked_stopped_and_partial(flow):
    f = flow
    f.rt.model = Model(ModelReply("I was say", [], "stopped"), during={0: f.turn.stop_event.set})
    assert run(f) == TurnOutcome(STOPPED)
    mark = {"partial": True, "stopped": True}
    start, end = f.sender.events[-2], f.sender.events[-1]
    assert end == (TextEndEvent.TYPE, {"message_id": start[1]["message_id"], "content": "I was say", **mark})
    [stored] = message_store.list_messages(f.db, f.master.id)
    assert stored.content == "I was say" and stored.meta == {"task_id": f.turn.task_id, **mark, "producer": PRODUCER}


def test_a_whole_reply_carries_no_cut_off_mark(flow):
    f = flow
    f.rt.model = Model(ModelReply("All of it.", [], "stop"))
    assert run(f) == TurnOutcome(SUCCEEDED)
    assert set(f.sender.events[-1][1]) == {"message_id", "content"}
    assert message_store.list_messages(f.db, f.master.id)[0].meta == {"task_id": f.turn.task_id, "producer": PRODUCER}


def test_a_turn_stopped_before_its_model_call_makes_none(flow):
    f = flow
    f.turn.stop_event.set()
    f.rt.model = Model(ModelReply("never", [], "stop"))
    assert run(f) == TurnOutcome(STOPPED)
    assert f.rt.model.requests == []


def test_a_stop_during_the_model_call_drops_its_tool_calls(flow):
    f = flow
    f.rt.model = Model(ModelReply("Let me run it.", [ToolCall("c1", "run_command", "{}")], "tool_calls"),
                       during={0: f.turn.stop_event.set})
    assert run(f) == TurnOutcome(STOPPED)
    assert f.rt.tools.ran == [] and history(f) == [("assistant", "Let me run it.")]
    assert f.sender.types()[-1] == TextEndEvent.TYPE


def test_a_stop_during_a_tool_round_closes_the_rest_and_skips_the_inline_batch(flow):
    f = flow
    f.rt.model = Model(calls("run_command", "ask_user", "run_command"), ModelReply("never", [], "stop"))

    def stop_and_queue():
        f.turn.stop_event.set()
        queue_message(f, "arrived during the round")

    f.rt.tools = Tools(during={0: stop_and_queue})
    assert run(f) == TurnOutcome(STOPPED)
    assert len(f.rt.tools.ran) == 1 and len(f.rt.model.requests) == 1
    results = [json.loads(c) for r, c in history(f) if r == "tool"]
    assert results == [{"success": True, "ran": "run_command"}, STOPPED_RESULT, STOPPED_RESULT]
    assert f.sender.types().count(ToolStartEvent.TYPE) == 3 and f.sender.types().count(ToolResultEvent.TYPE) == 3
    assert [r.content for r in queue.list_queued(f.db, f.master.id)] == ["arrived during the round"]


def test_a_task_taken_over_by_another_process_writes_nothing_more(flow):
    f = flow

    def taken_over():
        with f.db.write() as s:
            s.get(Task, f.turn.task_id).owner = "the-other-process"

    f.rt.model = Model(calls("run_command", "run_command"), ModelReply("never", [], "stop"))
    f.rt.tools = Tools(during={0: taken_over})
    assert run(f) == TurnOutcome(STOPPED)
    assert len(f.rt.tools.ran) == 1 and len(f.rt.model.requests) == 1
    assert history(f) == [("assistant", ["run_command", "run_command"])]  # no result: the new owner closes it

    f.rt.model = Model(ModelReply("late", [], "stop"))
    assert run(f) == TurnOutcome(STOPPED) and f.rt.model.requests == []


def test_a_reply_and_a_tool_result_are_written_in_the_group_commits_batches_with_their_ownership_check(flow):
    """Issue 26: the look at the task's owner was a read of its own, and the write a transaction of its own, for
    every reply of hundreds of streams; now each is one step of the group commit's batches, the check inside."""
    f = flow
    writer = f.rt.event_log.writer
    f.rt.model = Model(calls("run_command"), ModelReply("Done.", [], "stop"))
    assert run(f) == TurnOutcome(SUCCEEDED)
    assert history(f) == [("assistant", ["run_command"]), ("tool", '{"success": true, "ran": "run_command"}'),
                          ("assistant", "Done.")]
    assert writer.batches == 3


def test_a_reply_that_arrives_after_a_take_over_is_not_stored(flow):
    f = flow

    def taken_over():
        with f.db.write() as s:
            s.get(Task, f.turn.task_id).owner = "the-other-process"

    f.rt.model = Model(ModelReply("too late", [], "stop"), during={0: taken_over})
    assert run(f) == TurnOutcome(STOPPED)
    assert history(f) == [] and TextEndEvent.TYPE not in f.sender.types()


def test_the_inline_batch_echoes_each_message_with_its_route_then_the_queue_size(flow):
    f = flow
    queue_message(f, "continue", route=Route.FAST_PATH)
    queue_message(f, "and this", route=Route.HIL)
    inject_runtime_user_message(f.rt, f.turn, f.sender)
    echoed = [(t, d) for t, d in f.sender.events if t in (UserMessageEvent.TYPE, RouteEvent.TYPE)]
    [first, second] = [m.message_id for m in message_store.list_messages(f.db, f.master.id) if m.role == "user"]
    assert [(t, d["message"]) for t, d in echoed if t == UserMessageEvent.TYPE] == [(UserMessageEvent.TYPE, "continue"),
                                                                              (UserMessageEvent.TYPE, "and this")]
    assert [d for t, d in echoed if t == RouteEvent.TYPE] == [
        {"route": Route.FAST_PATH, "delivery": Delivery.INJECTED_INLINE, "target_agent": "MasterAgent",
         "message_id": first},
        {"route": Route.HIL, "delivery": Delivery.INJECTED_INLINE, "target_agent": "MasterAgent", "message_id": second}]
    assert f.rt.transport.events == [(PendingCountEvent.TYPE, {"agent_id": f.master.id, "conversation_id": f.conv.id,
                                                        "pending_count": 0}, f.conv.id)]


def test_an_empty_inline_batch_echoes_nothing(flow):
    f = flow
    execute_tool_calls(f.rt, f.turn, f.sender, [ToolCall("c1", "run_command", "{}")])
    inject_runtime_user_message(f.rt, f.turn, f.sender)
    assert f.sender.types() == [ToolStartEvent.TYPE, ToolResultEvent.TYPE] and f.rt.transport.events == []


def test_a_tool_round_leaves_the_queue_to_the_next_rounds_inline_batch(flow):
    f = flow
    queue_message(f, "waits")
    execute_tool_calls(f.rt, f.turn, f.sender, [ToolCall("c1", "run_command", "{}")])
    assert [r.content for r in queue.list_queued(f.db, f.master.id)] == ["waits"]
    inject_runtime_user_message(f.rt, f.turn, f.sender)
    assert queue.list_queued(f.db, f.master.id) == []


def test_a_turn_on_no_message_of_the_user_records_no_active_agent(flow):
    """A background task's or a notice's turn reasons without taking the user from the agent they talk with."""
    f = flow
    queue_message(f, "[Sub-agent InfoAgent_1 succeeded]")
    f.turn = dataclasses.replace(f.turn, from_user=False)
    f.rt.model = Model(ModelReply("Noted.", [], "stop"))
    assert run(f) == TurnOutcome(SUCCEEDED) and f.active == []


def test_a_turn_whose_start_recorded_the_active_agent_writes_it_from_its_second_request_on(flow):
    """The claim's transaction records the agent a user's turn runs as the active one (issue 26: the first
    request's write was a group-commit batch of its own, for every stream); later rounds write it again."""
    f = flow
    queue_message(f, "run it")
    f.turn = dataclasses.replace(f.turn, active_recorded=True)
    f.rt.model = Model(calls("run_command"), ModelReply("Done.", [], "stop"))
    assert run(f) == TurnOutcome(SUCCEEDED)
    assert len(f.rt.model.requests) == 2 and f.active == [(f.conv.id, f.master.id)]


@pytest.mark.parametrize("late", [False, True])
def test_a_turns_first_request_takes_its_starts_look_at_the_task_and_the_queue_and_later_ones_look_again(flow, late):
    """Issue 26: the claim has just written the task as this process's, and the start read the queue's size; reading
    both again cost every stream two statements. A thread that started late after its claim reads the owner."""
    f, seen, before = flow, [], []
    f.turn.start_check, f.turn.started = StartCheck(queued=0), time.monotonic() - (CLAIM_TRUSTED_S + 1) * late
    f.rt.model = Model(calls("run_command"), ModelReply("Done.", [], "stop"),
                       during={0: lambda: before.append(list(seen)), 1: lambda: before.append(list(seen))})

    def record(_conn, _cursor, statement, *_args):
        seen.append(" ".join(statement.split()))

    event.listen(f.db.engine, "before_cursor_execute", record)
    assert run(f) == TurnOutcome(SUCCEEDED)
    event.remove(f.db.engine, "before_cursor_execute", record)
    first, second = before[0], before[1][len(before[0]):]
    assert bool([s for s in first if "FROM tasks" in s]) == late and not [s for s in first if "pending_mess" in s]
    assert [s for s in second if "FROM tasks" in s] and [s for s in second if "FROM pending_messages" in s], second
    assert f.turn.start_check is None and f.turn.wrote_tool_calls  # (its end looks for calls left open)


def test_a_turn_notes_the_users_last_message_and_its_last_reply_as_stored_for_its_end(flow):
    f = flow  # (what its end needs: the suggestions, a sub-agent's result; issue 26)
    queue_message(f, "and this too")
    f.rt.model = Model(ModelReply("Working on it.", calls("run_command").tool_calls, "tool_calls"),
                       calls("run_command"), ModelReply("Done.\x00", [], "stop"))  # (a NUL: stored as U+FFFD)
    assert run(f) == TurnOutcome(SUCCEEDED) and f.turn.user_text == "and this too"
    last = [m for m in message_store.list_messages(f.db, f.master.id) if m.role == "assistant"][-1]
    assert f.turn.reply == (last.message_id, "Done.\ufffd") == (last.message_id, last.content)


def test_a_start_that_found_messages_queued_drains_them_before_the_first_request(flow):
    f = flow
    queue_message(f, "and this too")
    f.turn.start_check = StartCheck(queued=1)
    f.rt.model = Model(ModelReply("Both.", [], "stop"))
    assert run(f) == TurnOutcome(SUCCEEDED)
    assert f.rt.model.requests[0]["messages"][1:] == [{"role": "user", "content": "and this too"}]


def test_a_turn_that_uses_up_its_users_budget_ends_after_its_round(flow):
    f = flow
    f.rt.budgets = Budgets(f.db, [Budget(TOKENS, DAY, 100)], flush=f.rt.ledger.flush)

    def spend():  # what the round's model request cost, as the ledger records it
        f.rt.ledger.record(UsageRecord(CallContext(AGENT, f.conv.id), f.conv.user_id, "m", OK, False, 90, 10, 0, 0,
                                       None, 0.1, None, time.time()))

    f.rt.model = Model(calls("run_command"), ModelReply("never", [], "stop"))
    f.rt.tools = Tools(during={0: spend})
    outcome = run(f)
    assert outcome.status == FAILED and outcome.error["code"] == "budget_exceeded"
    assert "resets at" in outcome.error["message"] and outcome.error["resets_at"] > time.time()
    assert len(f.rt.model.requests) == 1 and [r for r, _ in history(f)] == ["assistant", "tool"]
