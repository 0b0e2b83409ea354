"""OpenAIChatModel against the real scripted HTTP server: streaming, tool calls, retries, stop.

The `llm` fixture (test/conftest.py) is a session ScriptedLLMServer, reset around each test.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from modules.llm import ModelError, OpenAIChatModel
from test.scripted_llm import (
    ScriptedLLMServer,
    broken_stream,
    error,
    hang,
    match_last_user,
    text,
    tool_calls,
)
from test.unit.scripted_client import USER, make_model

pytestmark = pytest.mark.timeout(30)

REPO_ROOT = Path(__file__).resolve().parents[2]
RUN_COMMAND_TOOL = {
    "type": "function",
    "function": {
        "name": "run_command",
        "description": "Run a shell command.",
        "parameters": {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]},
    },
}


class Retries:
    """An on_retry callback that remembers what it was told."""

    def __init__(self) -> None:
        self.calls: list[tuple[int, ModelError, float]] = []

    def __call__(self, attempt: int, err: ModelError, delay: float) -> None:
        self.calls.append((attempt, err, delay))


# -- streaming and the request ---------------------------------------------------------


def test_streams_text_deltas_to_on_text(llm):
    content = "Hello, streaming world! Here is a longer answer."
    llm.script(text(content, chunk_size=3))
    chunks: list[str] = []

    reply = make_model(llm).stream_chat(messages=USER, on_text=chunks.append)

    assert reply.content == content
    assert "".join(chunks) == content
    assert len(chunks) == -(-len(content) // 3)
    assert reply.tool_calls == []
    assert reply.finish_reason == "stop"


def test_request_carries_messages_tools_model_and_stream(llm):
    messages = [{"role": "system", "content": "You are InfoAgent_1."}, {"role": "user", "content": "hello"}]
    model = make_model(llm)

    model.stream_chat(messages=messages, tools=[RUN_COMMAND_TOOL], model="gpt-special")
    model.stream_chat(messages=messages)

    first, second = llm.wait_for_requests(2)
    assert first.body["messages"] == messages
    assert first.body["tools"] == [RUN_COMMAND_TOOL]
    assert first.body["model"] == "gpt-special"
    assert first.body["stream"] is True
    assert first.headers["authorization"] == "Bearer test-key"
    assert second.body["model"] == "scripted-model"
    assert "tools" not in second.body


def test_empty_default_model_falls_back_to_gpt_4o_mini(llm):
    make_model(llm, default_model="").stream_chat(messages=USER)
    assert llm.wait_for_requests(1)[0].body["model"] == "gpt-4o-mini"


def test_label_is_the_endpoint(llm):
    assert make_model(llm).label == llm.base_url


# -- tool calls ------------------------------------------------------------------------


def test_tool_calls_are_assembled_from_pieces(llm):
    llm.script(
        tool_calls(
            ("run_command", {"command": "ls -la /tmp", "run_in_background": False, "timeout": 30}),
            ("ask_user", {"question": "Which directory, exactly?", "options": ["a", "b"]}),
            text="Let me check.",
        )
    )
    chunks: list[str] = []

    reply = make_model(llm).stream_chat(messages=USER, tools=[RUN_COMMAND_TOOL], on_text=chunks.append)

    served_ids = llm.wait_for_requests(1)[0].tool_call_ids
    assert [c.id for c in reply.tool_calls] == served_ids
    assert [c.name for c in reply.tool_calls] == ["run_command", "ask_user"]
    assert json.loads(reply.tool_calls[0].arguments) == {
        "command": "ls -la /tmp",
        "run_in_background": False,
        "timeout": 30,
    }
    assert json.loads(reply.tool_calls[1].arguments) == {"question": "Which directory, exactly?", "options": ["a", "b"]}
    assert reply.content == "".join(chunks) == "Let me check."
    assert reply.finish_reason == "tool_calls"


def test_malformed_arguments_are_passed_through_raw(llm):
    llm.script(tool_calls(("run_command", '{"command": "ls'), ("run_command", "not json at all")))

    reply = make_model(llm).stream_chat(messages=USER, tools=[RUN_COMMAND_TOOL])

    assert [c.arguments for c in reply.tool_calls] == ['{"command": "ls', "not json at all"]


# -- retries ---------------------------------------------------------------------------


def test_server_errors_and_a_gateways_timeout_are_retried_and_reported(llm):
    llm.script(error(500), error(503), error(408), text("recovered"))
    retries = Retries()

    reply = make_model(llm, on_retry=retries).stream_chat(messages=USER)

    assert reply.content == "recovered"
    assert [(attempt, err.code, err.status) for attempt, err, _ in retries.calls] == [
        (1, "server_error", 500),
        (2, "server_error", 503),
        (3, "timeout", 408),
    ]
    assert all(0 < delay <= 0.05 for _, _, delay in retries.calls)
    assert len(llm.requests) == 4


def test_rate_limit_honours_retry_after(llm):
    llm.script(error(429, "slow down", retry_after=0.3), text("ok"))
    retries = Retries()

    reply = make_model(llm, on_retry=retries, backoff_max_s=5).stream_chat(messages=USER)

    assert reply.content == "ok"
    [(attempt, err, delay)] = retries.calls
    assert (attempt, err.code, err.retryable, delay) == (1, "rate_limited", True, 0.3)
    assert "slow down" in err.message
    first, second = llm.requests
    assert second.received_at - first.received_at >= 0.3


def test_retry_after_is_honoured_beyond_backoff_max(llm):
    llm.script(error(429, retry_after=0.3), text("ok"))
    retries = Retries()

    make_model(llm, on_retry=retries, backoff_max_s=0.1).stream_chat(messages=USER)

    assert [delay for _, _, delay in retries.calls] == [0.3]


def test_a_retry_after_longer_than_allowed_gives_up_at_once_instead_of_asking_early(llm):
    llm.script(error(429, "come back in an hour", retry_after=3600), text("must not be served"))
    retries = Retries()

    with pytest.raises(ModelError) as caught:
        make_model(llm, on_retry=retries, max_retry_after_s=10).stream_chat(messages=USER)

    assert caught.value.code == "rate_limited" and "retry after 3600 s" in caught.value.message
    assert len(llm.requests) == 1 and retries.calls == []


def test_persistent_server_error_gives_up_after_max_retries(llm):
    llm.set_default(error(500, "upstream exploded"))
    retries = Retries()

    with pytest.raises(ModelError) as caught:
        make_model(llm, max_retries=2, on_retry=retries).stream_chat(messages=USER)

    err = caught.value
    assert (err.code, err.status, err.retryable) == ("server_error", 500, True)
    assert "500" in err.message
    assert "upstream exploded" in err.message
    assert "3 attempts" in err.message
    assert len(llm.requests) == 3
    assert len(retries.calls) == 2


@pytest.mark.parametrize(("status", "code"), [(400, "bad_request"), (401, "auth_error"), (404, "bad_request")])
def test_client_errors_are_not_retried(llm, status, code):
    llm.set_default(error(status, "you did something wrong"))
    retries = Retries()

    with pytest.raises(ModelError) as caught:
        make_model(llm, on_retry=retries).stream_chat(messages=USER)

    assert (caught.value.code, caught.value.status, caught.value.retryable) == (code, status, False)
    assert "you did something wrong" in caught.value.message
    assert len(llm.requests) == 1
    assert retries.calls == []


def test_hanging_endpoint_times_out(llm):
    llm.script(hang(60))
    started = time.monotonic()

    with pytest.raises(ModelError) as caught:
        make_model(llm, timeout_s=0.3, max_retries=0).stream_chat(messages=USER)

    assert caught.value.code == "timeout"
    assert caught.value.retryable
    assert time.monotonic() - started < 30  # the 0.3 s timeout ended it, not the 60 s hang


def test_timeout_is_retried(llm):
    llm.script(hang(5), text("second try"))
    retries = Retries()

    reply = make_model(llm, timeout_s=0.3, max_retries=1, on_retry=retries).stream_chat(messages=USER)

    assert reply.content == "second try"
    assert [err.code for _, err, _ in retries.calls] == ["timeout"]


def test_failure_after_partial_output_is_not_retried(llm):
    llm.script(broken_stream("half an ans"), text("must not be served"))
    chunks: list[str] = []

    with pytest.raises(ModelError) as caught:
        make_model(llm).stream_chat(messages=USER, on_text=chunks.append)

    assert caught.value.code == "connection_error"
    assert "partial output" in caught.value.message
    assert "".join(chunks) == "half an ans" == caught.value.partial
    assert len(llm.requests) == 1


def test_unreachable_endpoint_is_a_connection_error():
    with ScriptedLLMServer() as server:
        url = server.base_url
    retries = Retries()
    model = OpenAIChatModel(
        base_url=url, api_key="k", default_model="m", timeout_s=2, max_retries=1, backoff_base_s=0.01, on_retry=retries
    )

    with pytest.raises(ModelError) as caught:
        model.stream_chat(messages=USER)

    assert caught.value.code == "connection_error"
    assert "2 attempts" in caught.value.message
    assert [err.code for _, err, _ in retries.calls] == ["connection_error"]


# -- stopping --------------------------------------------------------------------------


def test_should_stop_ends_the_stream_early(llm):
    llm.script(text("one two three four five six seven eight nine ten", chunk_size=4, delay_s=0.05))
    chunks: list[str] = []

    reply = make_model(llm).stream_chat(messages=USER, on_text=chunks.append, should_stop=lambda: len(chunks) >= 2)

    assert reply.finish_reason == "stopped"
    assert reply.content == "".join(chunks) == "one two "
    # The connection was dropped cleanly: the next call works.
    assert make_model(llm).stream_chat(messages=USER).content == "done."


def test_should_stop_drops_tool_calls(llm):
    llm.script(tool_calls(("run_command", {"command": "rm -rf /tmp/x"}), text="Deleting", delay_s=0.02))
    chunks: list[str] = []

    reply = make_model(llm).stream_chat(
        messages=USER, tools=[RUN_COMMAND_TOOL], on_text=chunks.append, should_stop=lambda: bool(chunks)
    )

    assert (reply.content, reply.tool_calls, reply.finish_reason) == ("Dele", [], "stopped")


def test_should_stop_during_backoff(llm):
    llm.set_default(error(500))
    stop = threading.Event()

    reply = make_model(llm, backoff_base_s=5, backoff_max_s=5, on_retry=lambda *_: stop.set()).stream_chat(
        messages=USER, should_stop=stop.is_set
    )

    assert reply.finish_reason == "stopped"
    assert len(llm.requests) == 1


# -- eventlet --------------------------------------------------------------------------

EVENTLET_SCRIPT = """
import eventlet
eventlet.monkey_patch()

import json, sys, time
from modules.llm import ModelError, OpenAIChatModel

ticks = 0
def ticker():
    global ticks
    while True:
        ticks += 1
        eventlet.sleep(0.01)
eventlet.spawn(ticker)

model = OpenAIChatModel(base_url=sys.argv[1], api_key="k", default_model="m", timeout_s=5)
def ask(i):
    return model.stream_chat(messages=[{"role": "user", "content": f"agent {i}"}]).content

started, ticks_before = time.monotonic(), ticks
replies = list(eventlet.GreenPool().imap(ask, range(3)))
result = {"replies": replies, "elapsed": time.monotonic() - started, "ticks": ticks - ticks_before}

impatient = OpenAIChatModel(base_url=sys.argv[1], api_key="k", default_model="m", timeout_s=0.3, max_retries=0)
ticks_before = ticks
try:
    impatient.stream_chat(messages=[{"role": "user", "content": "hang please"}])
except ModelError as err:
    result |= {"timeout_code": err.code, "timeout_ticks": ticks - ticks_before}
print(json.dumps(result))
"""


def test_client_cooperates_with_eventlet(llm):
    """In one eventlet process, three streams are in flight at once (the server receives all three while it
    holds every one open) and a ticker green thread keeps running while they stream and while a call waits
    for its timeout. A blocking client would send one request at a time and starve the ticker."""
    gate = threading.Event()
    llm.set_default(text("abcdefgh", chunk_size=2, delay_s=0.1, wait=gate))
    llm.script(hang(60), match=match_last_user("hang please"))

    proc = subprocess.Popen(
        [sys.executable, "-W", "ignore", "-c", EVENTLET_SCRIPT, llm.base_url],
        cwd=REPO_ROOT,
        env=os.environ | {"PYTHONPATH": str(REPO_ROOT)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        try:
            llm.wait_for_requests(3, timeout=30)
        finally:
            gate.set()
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        proc.kill()

    assert proc.returncode == 0, stderr
    result = json.loads(stdout)
    assert result["replies"] == ["abcdefgh"] * 3
    # Streaming lasts at least 0.7 s and the timeout 0.3 s, at a tick per 10 ms; a starved ticker gets none.
    assert result["ticks"] >= 5, "the ticker green thread was starved during streaming"
    assert result["timeout_code"] == "timeout"
    assert result["timeout_ticks"] >= 3, "the ticker green thread was starved while waiting for a timeout"
