"""The scripted model server itself (test/scripted_llm.py), driven by the real client: matching steps to
requests, concurrency, non-streaming answers, streamed argument pieces, and held calls."""

from __future__ import annotations

import json
import threading
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import openai
import pytest

from test.scripted_llm import match_last_user, match_model, match_system, text, tool_calls
from test.unit.scripted_client import USER, make_model

pytestmark = pytest.mark.timeout(30)


def test_scripted_server_matches_steps_per_agent(llm):
    llm.script(text("for B"), match=match_system("InfoAgent_2"))
    llm.script(text("for A"), match=match_system("InfoAgent_1"))
    llm.script(text("for the fast model"), match=match_model("fast"))
    llm.script(text("for the question"), match=match_last_user("question_id=q7"))
    model = make_model(llm)

    def ask(system: str, user: str = "go", name: str | None = None) -> str:
        messages = [{"role": "system", "content": system}, {"role": "user", "content": user}]
        return model.stream_chat(messages=messages, model=name).content

    assert ask("You are InfoAgent_1.") == "for A"
    assert ask("You are InfoAgent_2.") == "for B"
    assert ask("x", name="fast") == "for the fast model"
    assert ask("x", user="answer question_id=q7 please") == "for the question"
    assert ask("You are InfoAgent_1.") == "done."
    assert llm.pending_steps() == 0


def test_scripted_server_serves_concurrent_requests(llm):
    """All eight requests are received while every one of them is still held open: they are served at once."""
    gate = threading.Event()
    llm.set_default(text("0123456789", chunk_size=2, wait=gate))
    model = make_model(llm)

    with ThreadPoolExecutor(max_workers=8) as pool:
        replies = pool.map(lambda i: model.stream_chat(messages=USER).content, range(8))
        try:
            llm.wait_for_requests(8, timeout=20)
        finally:
            gate.set()
        assert list(replies) == ["0123456789"] * 8


def test_scripted_server_answers_non_streaming_requests(llm):
    llm.script(text("plain answer"), tool_calls(("run_command", {"command": "ls"})))
    client = openai.OpenAI(base_url=llm.base_url, api_key="k", max_retries=0)

    plain = client.chat.completions.create(model="m", messages=USER)
    calls = client.chat.completions.create(model="m", messages=USER)

    assert plain.choices[0].message.content == "plain answer"
    assert plain.choices[0].finish_reason == "stop"
    call = calls.choices[0].message.tool_calls[0]
    assert (call.function.name, json.loads(call.function.arguments)) == ("run_command", {"command": "ls"})
    assert calls.choices[0].finish_reason == "tool_calls"
    assert [m.id for m in client.models.list()] == ["scripted"]
    assert len(llm.requests) == 2  # /v1/models is not a model call


def test_scripted_server_counts_connections_not_requests(llm):
    first = openai.OpenAI(base_url=llm.base_url, api_key="k", max_retries=0)
    second = openai.OpenAI(base_url=llm.base_url, api_key="k", max_retries=0)

    for client in (first, first, first, second):
        client.chat.completions.create(model="m", messages=USER)

    assert len(llm.requests) == 4
    assert llm.connections == 2  # each client kept its one connection alive between its requests
    llm.reset()
    assert llm.connections == 0


def test_scripted_server_streams_arguments_in_pieces(llm):
    llm.script(tool_calls(("run_command", {"command": "echo hello world"})))
    request = urllib.request.Request(
        f"{llm.base_url}/chat/completions",
        data=json.dumps({"model": "m", "messages": USER, "stream": True}).encode(),
        headers={"Content-Type": "application/json"},
    )

    with urllib.request.urlopen(request, timeout=5) as response:
        events = [line[6:] for line in response.read().decode().split("\n\n") if line.startswith("data: ")]

    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    assert all(c["object"] == "chat.completion.chunk" for c in chunks)
    pieces = [
        d["function"]["arguments"]
        for c in chunks
        for d in c["choices"][0]["delta"].get("tool_calls", [])
        if "id" not in d
    ]
    assert len(pieces) >= 2
    assert json.loads("".join(pieces)) == {"command": "echo hello world"}
    assert chunks[-1]["choices"][0]["finish_reason"] == "tool_calls"


def test_wait_holds_a_call_open_and_wait_for_requests_times_out(llm):
    release = threading.Event()
    llm.script(text("released", wait=release))
    model = make_model(llm)

    with ThreadPoolExecutor(max_workers=1) as pool:
        pending = pool.submit(model.stream_chat, messages=USER)
        llm.wait_for_requests(1)
        assert not pending.done()
        release.set()
        assert pending.result(timeout=5).content == "released"

    with pytest.raises(TimeoutError, match="expected 2 model requests"):
        llm.wait_for_requests(2, timeout=0.1)
