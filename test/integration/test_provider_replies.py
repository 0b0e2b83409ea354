"""What real providers send, through the real server: every call of a Gemini-style reply runs (its thought
signature sent back with it, to that model only), a provider that ignores `stream: true` still answers, and a
provider that refuses `stream_options` keeps working."""

from __future__ import annotations

import json

from modules.event_catalogue import TextChunkEvent, TextEndEvent, ToolResultEvent
from modules.statuses import TaskStatus
from test.provider_replies import (
    GEMINI_SIGNATURE,
    OPENROUTER_DETAILS,
    gemini_parallel_calls,
    openrouter_gemini_call,
    whole_body,
)
from test.scripted_llm import dynamic, error, text


def _results(task: dict) -> list[dict]:
    return [json.loads(e["data"]["result"]) for e in task["events"] if e["type"] == ToolResultEvent.TYPE]


def test_gemini_parallel_calls_both_run_and_both_results_and_the_signature_reach_the_model(server, llm):
    llm.script(gemini_parallel_calls(("g-1", "run_command", {"command": "echo first-call"}),
                                     ("g-2", "run_command", {"command": "echo second-call"})))
    llm.script(text("Both ran."))

    sent = server.send("run two commands at once")
    task = server.wait_task(sent["task_id"])

    assert task["status"] == TaskStatus.SUCCEEDED, task
    outputs = [r["output"].strip() for r in _results(task)]
    assert outputs == ["first-call", "second-call"]
    follow_up = llm.wait_for_requests(2)[1].body["messages"]
    assert [m.get("tool_call_id") for m in follow_up if m["role"] == "tool"] == ["g-1", "g-2"]
    calls = next(m["tool_calls"] for m in follow_up if m.get("tool_calls"))
    assert [c.get("extra_content") for c in calls] == [GEMINI_SIGNATURE, None]  # Gemini 3 refuses it without


def test_a_call_signature_goes_back_to_the_model_that_signed_it_only(make_server, llm):
    """After LLM_MODEL changed across a restart, Gemini 3's `extra_content` stays out of the other model's requests
    (a strict OpenAI-compatible server refuses keys it does not know); until then every turn sends it back."""
    server = make_server(env={"LLM_MODEL": "gemini-3-pro-preview"})
    llm.script(gemini_parallel_calls(("g-1", "run_command", {"command": "echo signed"})))
    llm.script(text("Ran it."))
    sent = server.send("run a command")
    assert server.wait_task(sent["task_id"])["status"] == TaskStatus.SUCCEEDED

    def calls_sent(message: str, model: str) -> list[dict]:
        llm.script(text("Here."))
        task = server.send(message, sent["conversation_id"])
        assert server.wait_task(task["task_id"])["status"] == TaskStatus.SUCCEEDED
        request = llm.agent_requests[-1].body
        assert request["model"] == model
        return [c for m in request["messages"] if m.get("tool_calls") for c in m["tool_calls"]]

    assert [c.get("extra_content") for c in calls_sent("again", "gemini-3-pro-preview")] == [GEMINI_SIGNATURE]
    server.env["LLM_MODEL"] = "gpt-4o"
    server.restart()
    assert [set(c) for c in calls_sent("after the switch", "gpt-4o")] == [{"id", "type", "function"}]


def test_openrouter_reasoning_details_go_back_with_the_calls_of_the_running_turn(server, llm):
    llm.script(openrouter_gemini_call("or-1", "run_command", {"command": "echo called"}))
    llm.script(text("Done."))

    sent = server.send("what is the date")
    task = server.wait_task(sent["task_id"])

    assert task["status"] == TaskStatus.SUCCEEDED, task
    follow_up = llm.wait_for_requests(2)[1].body["messages"]
    calling = next(m for m in follow_up if m.get("tool_calls"))
    assert calling["reasoning_details"] == OPENROUTER_DETAILS  # Gemini 3 through OpenRouter refuses it without


def test_a_whole_json_body_is_streamed_to_the_chat_and_stored(server, llm):
    llm.script(whole_body("An answer in one piece."))

    sent = server.send("hello")
    task = server.wait_task(sent["task_id"])

    assert task["status"] == TaskStatus.SUCCEEDED, task
    assert "".join(e["data"]["content"] for e in task["events"] if e["type"] == TextChunkEvent.TYPE) == \
        "An answer in one piece."
    messages = server.get(f"/api/conversations/{sent['conversation_id']}/messages").json()["data"]
    assert [m["content"] for m in messages if m["role"] == "assistant"] == ["An answer in one piece."]


def test_a_provider_refusing_stream_options_still_answers(server, llm):
    def refuse(body: dict):
        if "stream_options" in body:
            return error(422, '[{"loc":["body","stream_options"],"msg":"Extra inputs are not permitted"}]')
        return text("fine without usage")
    llm.set_default(dynamic(refuse))

    sent = server.send("hello")
    task = server.wait_task(sent["task_id"])

    assert task["status"] == TaskStatus.SUCCEEDED, task
    assert [e["data"]["content"] for e in task["events"] if e["type"] == TextEndEvent.TYPE] == ["fine without usage"]
