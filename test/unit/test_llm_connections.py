"""The model client's connections (modules/llm/openai_model.py): one shared pool, each stream read to the end of
its response so its connection is kept alive for the next request, and the reply handed over at `[DONE]`.

The `llm` fixture (test/conftest.py) is a session ScriptedLLMServer, reset around each test; it counts the
connections clients open.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from test.scripted_llm import RawChunksStep, text, tool_calls
from test.unit.scripted_client import USER, make_model

pytestmark = pytest.mark.timeout(30)

REPO_ROOT = Path(__file__).resolve().parents[2]

RUN_COMMAND_TOOL = {"type": "function", "function": {"name": "run_command", "parameters": {"type": "object"}}}


def test_streamed_replies_one_after_another_reuse_one_connection(llm):
    """The stream is read past `[DONE]` to the end of the response, so its connection goes back to the pool: the
    SDK's own stream closes the response at `[DONE]`, before the body's last chunk, which drops the connection."""
    llm.script(text("first reply"), tool_calls(("run_command", {"command": "ls"})), text("third reply"))
    model = make_model(llm)

    replies = []
    for _ in range(3):
        replies.append(model.stream_chat(messages=USER, tools=[RUN_COMMAND_TOOL]))
        _wait_for_the_read_to_the_end()  # the reply came at `[DONE]`; its connection goes back after the body

    assert [r.finish_reason for r in replies] == ["stop", "tool_calls", "stop"]
    assert llm.connections == 1


def _wait_for_the_read_to_the_end(timeout_s: float = 10) -> None:
    """Until the model client's workers (which read each body to its end, then return its connection) are done:
    on a busy machine the next request could otherwise start first and open a connection of its own."""
    deadline = time.monotonic() + timeout_s
    while any(t.name == "model-request" and t.is_alive() for t in threading.enumerate()):
        assert time.monotonic() < deadline, "the model client's worker did not finish reading"
        time.sleep(0.01)


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


PROBE_SCRIPT = """
import json, socket
import eventlet
import run  # monkey-patches as the server does
from httpcore2._utils import is_socket_readable

def probe():
    ran = []
    eventlet.spawn(ran.append, 1)
    idle, peer = socket.socketpair()
    readable = is_socket_readable(idle)
    peer.sendall(b"x")
    closed_by_server = is_socket_readable(idle)
    return {"switched": bool(ran), "readable": readable, "closed_by_server": closed_by_server}

before = probe()
run.keep_pool_probes_off_the_hub()
print(json.dumps({"before": before, "after": probe()}))
"""


def test_probing_an_idle_pooled_connection_does_not_switch_green_threads():
    """httpcore probes each idle pooled connection before every request, holding the pool's lock; with eventlet's
    green select each probe waited a turn of the whole event loop (run.py, `keep_pool_probes_off_the_hub`)."""
    done = subprocess.run([sys.executable, "-W", "ignore", "-c", PROBE_SCRIPT], cwd=REPO_ROOT, capture_output=True,
                          text=True, timeout=30)

    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["before"]["switched"]  # what the probe did with eventlet's select
    assert result["after"] == {"switched": False, "readable": False, "closed_by_server": True}
