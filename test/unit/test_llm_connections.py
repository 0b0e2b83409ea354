"""The model client's connections (modules/llm/openai_model.py): one shared pool, each stream read to the end of
its response so its connection is kept alive for the next request, and the reply handed over at `[DONE]`.

The `llm` fixture (test/conftest.py) is a session ScriptedLLMServer, reset around each test; it counts the
connections clients open.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from test.scripted_llm import RawChunksStep, text, tool_calls
from test.unit.scripted_client import USER, make_model

pytestmark = pytest.mark.timeout(30)

RUN_COMMAND_TOOL = {"type": "function", "function": {"name": "run_command", "parameters": {"type": "object"}}}


def test_streamed_replies_one_after_another_reuse_one_connection(llm):
    """The stream is read past `[DONE]` to the end of the response, so its connection goes back to the pool: the
    SDK's own stream closes the response at `[DONE]`, before the body's last chunk, which drops the connection."""
    llm.script(text("first reply"), tool_calls(("run_command", {"command": "ls"})), text("third reply"))
    model = make_model(llm)

    replies = [model.stream_chat(messages=USER, tools=[RUN_COMMAND_TOOL]) for _ in range(3)]

    assert [r.finish_reason for r in replies] == ["stop", "tool_calls", "stop"]
    assert llm.connections == 1


def test_the_reply_is_handed_over_at_done_not_at_the_end_of_the_body(llm):
    """The read past `[DONE]` happens after the reply went to the caller: on a busy server the body's last
    packet came seconds after `[DONE]`."""
    chunk = {"choices": [{"index": 0, "delta": {"content": "whole"}, "finish_reason": "stop"}]}
    llm.script(RawChunksStep((chunk,), end_after_s=3), text("next"))
    model = make_model(llm)

    started = time.monotonic()
    reply = model.stream_chat(messages=USER)
    took = time.monotonic() - started
    llm.wait_for_requests(1)

    assert (reply.content, reply.finish_reason) == ("whole", "stop")
    assert took < 2, took
    assert model.stream_chat(messages=USER).content == "next"


def test_concurrent_streams_share_at_most_max_connections(llm):
    llm.set_default(text("0123456789", chunk_size=2, delay_s=0.01))
    model = make_model(llm, max_connections=2)

    with ThreadPoolExecutor(max_workers=8) as pool:
        replies = list(pool.map(lambda _: model.stream_chat(messages=USER).content, range(8)))

    assert replies == ["0123456789"] * 8
    assert llm.connections == 2


def test_a_stopped_stream_drops_its_connection(llm):
    """Stopping closes the stream's connection: that is how the endpoint learns that nobody reads on."""
    llm.script(text("x" * 200, chunk_size=1, delay_s=0.02), text("next"))
    model = make_model(llm)
    chunks: list[str] = []

    stopped = model.stream_chat(messages=USER, on_text=chunks.append, should_stop=lambda: len(chunks) >= 3)
    after = model.stream_chat(messages=USER)

    assert stopped.finish_reason == "stopped"
    assert after.content == "next"
    assert llm.connections == 2
