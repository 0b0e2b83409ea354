"""The model endpoint failing mid-turn, through a fault proxy in front of the scripted model: the text streamed
before a failure is kept and marked, Retry-After is honoured, the user sees a clear `error`, nothing hangs."""

from __future__ import annotations

import time
from collections.abc import Iterator
from urllib.parse import urlsplit

import pytest

from modules.event_catalogue import ErrorEvent, TextChunkEvent, TextEndEvent
from modules.statuses import TaskStatus
from test.faults.helpers import MASTER, Ledger, assert_answers_next, assert_settled
from test.faults.proxy import FaultProxy
from test.scripted_llm import error, text

SLOW_ANSWER = "a long answer, streamed slowly, that the network cuts short"


@pytest.fixture
def model_proxy(llm) -> Iterator[FaultProxy]:
    target = urlsplit(llm.base_url)
    with FaultProxy(target.hostname, target.port) as proxy:
        yield proxy


def _server(make_server, proxy: FaultProxy, **env: str):
    return make_server(env={"OPENAI_BASE_URL": f"http://127.0.0.1:{proxy.port}/v1", **env})


def _partial_kept(server, cid: str, task_id: str, code: str) -> None:
    task = server.wait_task(task_id, timeout=20)
    assert task["status"] == TaskStatus.FAILED and task["error"]["code"] == code, task
    streamed = "".join(e["data"]["content"] for e in task["events"] if e["type"] == TextChunkEvent.TYPE)
    assert streamed and SLOW_ANSWER.startswith(streamed) and streamed != SLOW_ANSWER
    [end] = [e["data"] for e in task["events"] if e["type"] == TextEndEvent.TYPE]
    assert end["partial"] is True and end["content"] == streamed and end["error_code"] == code
    assert task["events"][-1]["type"] == ErrorEvent.TYPE and task["events"][-1]["data"]["code"] == code
    reply = [m for m in server.get(f"/api/conversations/{cid}/messages").json()["data"] if m["role"] == "assistant"]
    assert [(m["content"], m["metadata"].get("partial")) for m in reply] == [(streamed, True)]


@pytest.mark.parametrize("fault", ["cut", "blackhole"])
def test_a_stream_that_breaks_off_keeps_its_partial_text(fault, make_server, llm, model_proxy):
    """`cut`: the connection is reset after some chunks; `blackhole`: it stalls past LLM_TIMEOUT_S."""
    server = _server(make_server, model_proxy, LLM_TIMEOUT_S="1")
    llm.script(text(SLOW_ANSWER, chunk_size=4, delay_s=0.15), match=MASTER)
    cid = server.post("/api/conversations", {"title": "model faults"}).json()["conversation_id"]
    ledger = Ledger()
    first = ledger.send(server, "tell me something long", cid).json()
    server.wait_event(first["task_id"], TextChunkEvent.TYPE)
    model_proxy.cut() if fault == "cut" else model_proxy.blackhole()
    _partial_kept(server, cid, first["task_id"], "connection_error" if fault == "cut" else "timeout")
    model_proxy.heal()
    assert_settled(server, cid, ledger)
    assert_answers_next(server, llm, cid, ledger)
    history = llm.agent_requests[-1].body["messages"]
    assert any(m["role"] == "assistant" and SLOW_ANSWER.startswith(m["content"] or "-") for m in history)


def test_rate_limits_follow_retry_after(make_server, llm, model_proxy):
    server = _server(make_server, model_proxy)
    llm.script(error(429, "slow down", retry_after=1), match=MASTER)
    llm.script(text("after the wait"), match=MASTER)
    cid = server.post("/api/conversations", {"title": "rate limits"}).json()["conversation_id"]
    ledger = Ledger()
    first = ledger.send(server, "hello", cid).json()
    assert server.wait_task(first["task_id"])["status"] == TaskStatus.SUCCEEDED
    limited, retried = llm.agent_requests[-2:]
    assert retried.received_at - limited.received_at >= 1.0  # not sooner than asked

    llm.script(error(429, "come back in an hour", retry_after=3600), match=MASTER)
    started = time.monotonic()
    second = ledger.send(server, "and now?", cid).json()
    task = server.wait_task(second["task_id"], timeout=10)
    assert time.monotonic() - started < 10  # neither an hour nor an early retry: a clear answer now
    assert task["status"] == TaskStatus.FAILED and task["error"]["code"] == "rate_limited", task
    err = task["events"][-1]
    assert err["type"] == ErrorEvent.TYPE and "3600" in err["data"]["message"]
    assert len(llm.agent_requests) == 3
    assert_settled(server, cid, ledger)
    assert_answers_next(server, llm, cid, ledger)
