"""The usage ledger in-process, on a real database (docs/API.md, "Usage and budgets"): what one metered
model request records (reported, estimated, failed), that its row rides the next write of the group
commit (no commit of its own), prices, budget periods and the budget check over the ledger."""

from __future__ import annotations

import time
from datetime import UTC, datetime

import pytest
from sqlalchemy import select

from modules.config import ConfigError, Settings
from modules.event_catalogue import TextEndEvent
from modules.llm import ModelError, ModelReply, ToolCall, Usage
from modules.llm.openai_model import FALLBACK_MODEL
from modules.llm.tokens import count_messages, count_tokens
from modules.storage import conversations
from modules.storage import tasks as task_store
from modules.storage import usage as usage_store
from modules.storage.db import Database
from modules.storage.group_commit import GroupCommit
from modules.storage.models import ModelUsage, TaskEvent
from modules.storage.users import get_or_create_user
from modules.usage.budgets import COST, DAY, MONTH, TOKENS, Budget, Budgets, budgets_from, period_bounds
from modules.usage.ledger import UsageLedger
from modules.usage.metered_model import MeteredChatModel
from modules.usage.prices import Price, PriceTable, load_prices
from modules.usage.records import AGENT, FAILED, OK, UNATTRIBUTED, CallContext
from test.db_urls import migrated_database
from test.provider_replies import ended_early
from test.scripted_llm import StepUsage, error, text
from test.unit.scripted_client import USER, make_model


class Model:
    label = "scripted"

    def __init__(self, *replies):
        self.replies = list(replies)

    def stream_chat(self, *, messages, tools=None, model=None, on_text, should_stop, on_reasoning, on_failed_attempt):
        reply = self.replies.pop(0)
        if isinstance(reply, Exception):
            raise reply
        on_text(reply.content)
        return reply


@pytest.fixture
def led(tmp_path):
    db = Database(f"sqlite:///{tmp_path / 'app.db'}")
    db.migrate()
    user = get_or_create_user(db, "u")
    conv, master = conversations.create_conversation(db, user.id, "t")
    writer = GroupCommit(db)
    ledger = UsageLedger(db, writer, grace_s=60)  # the flusher stays out of the way unless a test flushes
    yield db, writer, ledger, user, conv, master
    db.dispose()


def _rows(db):
    with db.read() as s:
        return list(s.scalars(select(ModelUsage).order_by(ModelUsage.id)))


def _meter(ledger, *replies, prices=None):
    return MeteredChatModel(Model(*replies), ledger, prices or PriceTable({}), "default-model")


def test_reported_tokens_are_recorded_as_reported_with_who_asked(led):
    db, _writer, ledger, user, conv, _master = led
    prices = PriceTable({"m-1": Price(2.0, 0.5, 8.0)})
    reply = ModelReply("hi", [], "stop", usage=Usage(100, 20, 40, 5), model="m-1", latency_s=0.3, first_token_s=0.1)
    ctx = CallContext(AGENT, conv.id, agent="MasterAgent", agent_id="a1", task_id="t1")
    assert _meter(ledger, reply, prices=prices).bound(ctx).stream_chat(messages=[]) is reply
    ledger.flush()
    [row] = _rows(db)
    assert (row.user_id, row.conversation_id, row.task_id, row.agent, row.purpose, row.model, row.status) == (
        user.id, conv.id, "t1", "MasterAgent", AGENT, "m-1", OK)
    assert (row.prompt_tokens, row.completion_tokens, row.cached_tokens, row.reasoning_tokens) == (100, 20, 40, 5)
    assert not row.estimated and (row.latency_s, row.first_token_s) == (0.3, 0.1)
    assert row.cost == pytest.approx((60 * 2.0 + 40 * 0.5 + 20 * 8.0) / 1e6)
    task = ledger.take_task("t1")
    assert (task.prompt_tokens, task.requests, task.estimated) == (100, 1, 0)
    assert ledger.take_task("t1").requests == 0  # taken once, at the turn's end


def test_a_price_for_the_model_asked_for_prices_the_snapshot_that_answered(led):
    db, _writer, ledger, _user, conv, _master = led
    prices = PriceTable({"gpt-4o": Price(2.5, 1.25, 10.0)})
    reply = ModelReply("hi", [], "stop", usage=Usage(1000, 100), model="gpt-4o-2024-08-06")
    _meter(ledger, reply, prices=prices).bound(CallContext(AGENT, conv.id)).stream_chat(messages=[], model="gpt-4o")
    ledger.flush()
    [row] = _rows(db)
    assert row.model == "gpt-4o-2024-08-06"  # the model that answered, as the provider named it
    assert row.cost == pytest.approx((1000 * 2.5 + 100 * 10.0) / 1e6)


def test_without_reported_usage_the_tokens_are_estimated_and_marked(led):
    db, _writer, ledger, _user, conv, _master = led
    reply = ModelReply("a reply of some words", [ToolCall("c1", "run_command", '{"command": "ls"}')], "tool_calls")
    messages = [{"role": "system", "content": "You are an agent."}, {"role": "user", "content": "list files"}]
    _meter(ledger, reply).bound(CallContext(AGENT, conv.id)).stream_chat(messages=messages)
    ledger.flush()
    [row] = _rows(db)
    assert row.estimated and row.prompt_tokens > 0 and row.completion_tokens > 0 and row.cost is None
    assert row.model == "default-model" and row.first_token_s is not None  # measured here: the first text


def test_a_failed_request_is_recorded_with_its_estimated_prompt_and_raised(led):
    db, _writer, ledger, _user, conv, _master = led
    meter = _meter(ledger, ModelError("server_error", "boom", partial="Half"))
    with pytest.raises(ModelError):
        meter.bound(CallContext(AGENT, conv.id)).stream_chat(messages=[{"role": "user", "content": "hello"}])
    ledger.flush()
    [row] = _rows(db)
    assert row.status == FAILED and row.estimated and row.prompt_tokens > 0 and row.completion_tokens > 0


def test_the_thinking_a_failed_request_streamed_counts_in_its_estimated_completion(led):
    db, _writer, ledger, _user, conv, _master = led
    thinking = "Let me think about the files this user wants, step by step, before I answer. " * 20
    meter = _meter(ledger, ModelError("server_error", "boom", partial="", partial_reasoning=thinking))
    with pytest.raises(ModelError):
        meter.bound(CallContext(AGENT, conv.id)).stream_chat(messages=[{"role": "user", "content": "hello"}])
    ledger.flush()
    [row] = _rows(db)
    assert row.status == FAILED and row.estimated and row.completion_tokens >= 200


def test_a_failed_request_without_llm_model_is_recorded_under_the_model_the_client_asked_for(led, llm):
    db, _writer, ledger, _user, conv, _master = led
    llm.script(error(400, "bad request"))
    meter = MeteredChatModel(make_model(llm, default_model=""), ledger, PriceTable({}), "")  # LLM_MODEL unset
    with pytest.raises(ModelError):
        meter.bound(CallContext(AGENT, conv.id)).stream_chat(messages=USER)
    ledger.flush()
    [row] = _rows(db)
    assert (row.status, row.model) == (FAILED, FALLBACK_MODEL)  # not the endpoint's URL


def test_an_attempt_that_failed_mid_stream_and_was_asked_again_is_a_failed_row_of_its_own(led, llm):
    """The provider had begun to answer (a call's arguments streamed, then the body ended), and may bill it: the
    retried attempt is a failed row of its own, estimated from what was sent and what came back; the answer that
    followed is the call's own row, as reported."""
    db, _writer, ledger, _user, conv, _master = led
    llm.script(ended_early(call_arguments='{"path": "READ'), text("Done.", usage=StepUsage(40, 3)))
    llm.script(error(500, "overloaded"), text("Again.", usage=StepUsage(40, 4)))  # refused: not an answer begun
    meter = MeteredChatModel(make_model(llm), ledger, PriceTable({}), "")
    bound = meter.bound(CallContext(AGENT, conv.id, task_id="t1"))

    assert [bound.stream_chat(messages=USER).content for _ in range(2)] == ["Done.", "Again."]

    ledger.flush()
    assert [(r.status, r.estimated, r.prompt_tokens, r.completion_tokens) for r in _rows(db)] == [
        (FAILED, True, count_messages(USER), count_tokens('read_file{"path": "READ')), (OK, False, 40, 3),
        (OK, False, 40, 4)]
    assert ledger.take_task("t1").requests == 3


def test_a_call_that_fails_after_a_retried_attempt_has_one_row_per_attempt(led, llm):
    db, _writer, ledger, _user, conv, _master = led
    llm.script(ended_early("", call_arguments='{"pa'), ended_early("", call_arguments='{"path'))
    meter = MeteredChatModel(make_model(llm, max_retries=1), ledger, PriceTable({}), "")

    with pytest.raises(ModelError) as caught:
        meter.bound(CallContext(AGENT, conv.id)).stream_chat(messages=USER)

    ledger.flush()
    assert caught.value.code == "connection_error" and len(llm.requests) == 2
    assert [r.status for r in _rows(db)] == [FAILED, FAILED]  # the last attempt is the call's own row, once


def test_a_stop_while_the_client_waits_to_ask_again_counts_the_failed_attempt_once(led, llm):
    """The user stopped during the backoff after an attempt that had begun to answer: that attempt is the
    request's one row (failed); the stop sent nothing more, so the request's prompt is not counted a second time."""
    db, _writer, ledger, _user, conv, _master = led
    llm.script(ended_early(call_arguments='{"path": "READ'), text("never asked for"))
    stopped: list[object] = []
    meter = MeteredChatModel(make_model(llm, backoff_base_s=5, backoff_max_s=5), ledger, PriceTable({}), "")

    reply = meter.bound(CallContext(AGENT, conv.id, task_id="t1")).stream_chat(
        messages=USER, should_stop=lambda: bool(stopped), on_failed_attempt=stopped.append)

    ledger.flush()
    assert reply.finish_reason == "stopped" and len(llm.requests) == 1 and len(stopped) == 1
    assert [(r.status, r.prompt_tokens) for r in _rows(db)] == [(FAILED, count_messages(USER))]
    assert ledger.take_task("t1").requests == 1


def test_a_request_stopped_before_it_was_sent_is_not_recorded(led, llm):
    db, _writer, ledger, _user, conv, _master = led
    meter = MeteredChatModel(make_model(llm), ledger, PriceTable({}), "")
    reply = meter.bound(CallContext(AGENT, conv.id)).stream_chat(messages=USER, should_stop=lambda: True)
    ledger.flush()
    assert reply.finish_reason == "stopped" and llm.requests == []
    assert _rows(db) == []  # nothing went out: no tokens to count against the user's budget


def test_a_request_whose_streaming_failed_on_our_side_is_still_recorded(led):
    db, _writer, ledger, _user, conv, _master = led

    def on_text(_chunk):
        raise RuntimeError("the event log's database went away")

    meter = _meter(ledger, ModelReply("Half of a reply the provider billed", [], "stop"))
    with pytest.raises(RuntimeError):
        meter.bound(CallContext(AGENT, conv.id)).stream_chat(messages=[{"role": "user", "content": "hi"}],
                                                             on_text=on_text)
    ledger.flush()
    [row] = _rows(db)
    assert row.status == FAILED and row.estimated and row.prompt_tokens > 0 and row.completion_tokens > 0


def test_an_unbound_call_is_still_recorded_as_unattributed(led):
    db, _writer, ledger, _user, _conv, _master = led
    _meter(ledger, ModelReply("x", [], "stop")).stream_chat(messages=[])
    ledger.flush()
    assert [(r.purpose, r.user_id) for r in _rows(db)] == [(UNATTRIBUTED, None)]


def test_the_row_rides_the_next_write_and_costs_no_commit_of_its_own(led):
    db, writer, ledger, _user, conv, master = led
    _meter(ledger, ModelReply("x", [], "stop", usage=Usage(1, 1))).bound(CallContext(AGENT, conv.id)).stream_chat(
        messages=[])
    assert writer.has_deferred() and _rows(db) == []
    with db.write() as s:
        task = task_store.create_task_in(s, conversation_id=conv.id, agent_id=master.id, task_type="chat", owner="me")
    before = writer.batches
    writer.insert(TaskEvent.__table__, [dict(task_id=task.id, idx=0, type=TextEndEvent.TYPE, data={}, ts=0.0)])
    assert writer.batches == before + 1 and len(_rows(db)) == 1 and not writer.has_deferred()
    ledger.flush()
    assert writer.batches == before + 1  # nothing left: the flush wrote nothing


def test_the_flusher_writes_a_row_no_other_write_followed(led):
    db, writer, _ledger, _user, conv, _master = led
    ledger = UsageLedger(db, writer, grace_s=0.01)
    _meter(ledger, ModelReply("x", [], "stop")).bound(CallContext(AGENT, conv.id)).stream_chat(messages=[])
    deadline = time.monotonic() + 10
    while not _rows(db) and time.monotonic() < deadline:  # the flusher's batch, once committed
        time.sleep(0.005)
    assert len(_rows(db)) == 1 and not writer.has_deferred()


def test_prices_from_toml_and_their_errors(tmp_path):
    path = tmp_path / "prices.toml"
    path.write_text('[models."gpt-x"]\ninput = 3\noutput = 15\n[models.cheap]\ninput = 0\ncached_input = 0\n'
                    'output = 0.5\n')
    table = load_prices(path)
    assert table.cost("gpt-x", 1_000_000, 0, 0) == 3.0 and table.cost("gpt-x", 10, 10, 0) == 30 / 1e6
    assert table.cost("cheap", 5, 5, 2_000_000) == 1.0 and table.cost("unknown", 1, 0, 1) is None
    for bad in ('[models.m]\ninput = 1\n', '[models.m]\ninput = -1\noutput = 1\n',
                '[models.m]\ninput = "1"\noutput = 1\n', 'models = 3\n', 'not toml ['):
        path.write_text(bad)
        with pytest.raises(ConfigError):
            load_prices(path)


@pytest.mark.parametrize("budget", ["BUDGET_COST_PER_DAY", "BUDGET_COST_PER_MONTH"])
def test_a_cost_budget_without_prices_is_refused_at_start(tmp_path, budget):
    with pytest.raises(ConfigError, match="MODEL_PRICES"):
        Settings.from_env({budget: "5"})
    prices = tmp_path / "prices.toml"
    prices.write_text('[models."gpt-x"]\ninput = 3\noutput = 15\n')
    assert Settings.from_env({budget: "5", "MODEL_PRICES": str(prices)}).model_prices_path == prices


def test_budget_periods_are_utc_days_and_months():
    at = datetime(2026, 12, 31, 23, 59, tzinfo=UTC).timestamp()
    assert period_bounds(DAY, at) == (datetime(2026, 12, 31, tzinfo=UTC).timestamp(),
                                      datetime(2027, 1, 1, tzinfo=UTC).timestamp())
    assert period_bounds(MONTH, at) == (datetime(2026, 12, 1, tzinfo=UTC).timestamp(),
                                        datetime(2027, 1, 1, tzinfo=UTC).timestamp())
    feb = datetime(2028, 2, 10, tzinfo=UTC).timestamp()
    assert period_bounds(MONTH, feb)[1] == datetime(2028, 3, 1, tzinfo=UTC).timestamp()
    assert budgets_from(tokens_per_day=None, tokens_per_month=5, cost_per_day=1.5, cost_per_month=None) == [
        Budget(COST, DAY, 1.5), Budget(TOKENS, MONTH, 5)]


def test_a_budget_counts_the_users_own_rows_of_its_period(led):
    db, writer, ledger, user, conv, _master = led
    other = get_or_create_user(db, "other")
    now = datetime(2026, 6, 15, 12, tzinfo=UTC).timestamp()
    yesterday = now - 86400
    rows = [dict(user_id=user.id, created_at=now, prompt_tokens=600, completion_tokens=300, cost=0.5),
            dict(user_id=user.id, created_at=yesterday, prompt_tokens=5000, completion_tokens=0, cost=9.0),
            dict(user_id=other.id, created_at=now, prompt_tokens=9000, completion_tokens=0, cost=None)]
    writer.insert(ModelUsage.__table__, [dict(
        conversation_id=conv.id, task_id=None, agent_id=None, agent="A", purpose=AGENT, model="m", status=OK,
        estimated=False, cached_tokens=0, reasoning_tokens=0, latency_s=0.1, first_token_s=None, **r) for r in rows])
    tokens = Budgets(db, [Budget(TOKENS, DAY, 1000)], clock=lambda: now)
    assert tokens.exceeded(user.id) is None  # 900 today: yesterday's 5,000 are another day
    over = Budgets(db, [Budget(TOKENS, DAY, 900)], clock=lambda: now).exceeded(user.id)
    assert over is not None and over.used == 900 and over.resets_at == period_bounds(DAY, now)[1]
    monthly = Budgets(db, [Budget(COST, MONTH, 9.5)], clock=lambda: now).exceeded(user.id)
    assert monthly is not None and monthly.used == 9.5 and "month" in monthly.message
    assert Budgets(db, [Budget(COST, DAY, 0.01)], clock=lambda: now).exceeded(other.id) is None  # no price: no cost
    assert Budgets(db, [], clock=lambda: now).exceeded(user.id) is None
    usage = usage_store.user_usage_by_day(db, user.id, yesterday - 3600 * 12, now + 1)
    assert sorted((d, t.prompt_tokens) for d, t in usage.items()) == [(int(yesterday // 86400), 5000),
                                                                     (int(now // 86400), 600)]


def test_over_a_days_and_a_months_budget_the_answer_is_when_sending_works_again(led):
    db, writer, _ledger, user, conv, _master = led
    now = datetime(2026, 6, 15, 12, tzinfo=UTC).timestamp()
    writer.insert(ModelUsage.__table__, [dict(
        user_id=user.id, conversation_id=conv.id, task_id=None, agent_id=None, agent="A", purpose=AGENT, model="m",
        status=OK, estimated=False, prompt_tokens=900, completion_tokens=100, cached_tokens=0, reasoning_tokens=0,
        cost=None, latency_s=0.1, first_token_s=None, created_at=now)])
    over = Budgets(db, [Budget(TOKENS, DAY, 500), Budget(TOKENS, MONTH, 800)], clock=lambda: now).exceeded(user.id)
    # Past midnight the month's budget still refuses: its reset is when the user may send again.
    assert over is not None and over.budget == Budget(TOKENS, MONTH, 800)
    assert over.resets_at == period_bounds(MONTH, now)[1]


@pytest.fixture(params=["sqlite", "postgresql", "mariadb"])
def any_db(request, tmp_path):
    with migrated_database(request.param, tmp_path) as database:
        yield database


def test_the_ledgers_sums_on_every_database(any_db):
    db = any_db
    user = get_or_create_user(db, "alice")
    conv, _master = conversations.create_conversation(db, user.id, "t")
    at = datetime(2026, 3, 4, 10, tzinfo=UTC).timestamp()
    base = dict(user_id=user.id, conversation_id=conv.id, agent_id=None, model="m", status=OK, cached_tokens=0,
                reasoning_tokens=0, latency_s=0.1, first_token_s=0.05)
    rows = [dict(task_id="t1", agent="MasterAgent", purpose=AGENT, estimated=False, prompt_tokens=100,
                 completion_tokens=10, cost=0.25, created_at=at),
            dict(task_id="t1", agent="MasterAgent", purpose=AGENT, estimated=True, prompt_tokens=50,
                 completion_tokens=5, cost=None, created_at=at + 1),
            dict(task_id=None, agent="RoutingAgent", purpose="routing", estimated=True, prompt_tokens=20,
                 completion_tokens=2, cost=None, created_at=at + 86400)]
    GroupCommit(db).insert(ModelUsage.__table__, [{**base, **r} for r in rows])
    found = usage_store.conversation_usage(db, conv.id)
    assert found.totals.as_dict() == {"prompt_tokens": 170, "completion_tokens": 17, "cached_tokens": 0,
                                      "reasoning_tokens": 0, "requests": 3, "estimated": 2, "cost": 0.25}
    assert found.by_purpose["routing"].as_dict()["cost"] is None and found.by_purpose["routing"].estimated == 1
    assert set(found.by_agent) == {"MasterAgent", "RoutingAgent"} and set(found.by_task) == {"t1"}
    assert found.by_task["t1"].requests == 2
    assert usage_store.user_usage_since(db, user.id, at + 0.5).total_tokens == 55 + 22
    days = usage_store.user_usage_by_day(db, user.id, at - 3600, at + 2 * 86400)
    assert [(d, t.requests) for d, t in sorted(days.items())] == [(int(at // 86400), 2), (int(at // 86400) + 1, 1)]
