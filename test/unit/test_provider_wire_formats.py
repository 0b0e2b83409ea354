"""OpenAIChatModel against what real providers send (test/provider_replies.py), through the real `openai`
client and the scripted HTTP server: thinking kept apart, parallel calls at one index, whole bodies,
cut-off replies, usage, the stream_options fallback and every overflow wording."""

from __future__ import annotations

import json

import pytest

from modules.llm import ModelError, Usage
from modules.llm.types import CONTEXT_LENGTH_EXCEEDED
from test.provider_replies import (
    GEMINI_SIGNATURE,
    OPENROUTER_DETAILS,
    cut_at_length,
    deepseek_thinking,
    ended_early,
    gemini_parallel_calls,
    gemini_thinking_text,
    groq_stream,
    kimi_stream,
    openrouter_error,
    openrouter_gemini_call,
    openrouter_stream,
    think_tags,
    usage_chunk,
    whole_body,
)
from test.scripted_llm import JsonBodyStep, RawChunksStep, dynamic, error, text
from test.unit.scripted_client import USER, make_model

pytestmark = pytest.mark.timeout(30)


def test_deepseek_reasoning_content_is_kept_apart_from_the_reply(llm):
    llm.script(deepseek_thinking("The user greets me. I should greet back.", "Hello there!"))
    text_chunks: list[str] = []
    thinking_chunks: list[str] = []

    reply = make_model(llm).stream_chat(messages=USER, on_text=text_chunks.append,
                                        on_reasoning=thinking_chunks.append)

    assert reply.content == "".join(text_chunks) == "Hello there!"
    assert reply.reasoning == "".join(thinking_chunks) == "The user greets me. I should greet back."
    assert reply.usage == Usage(prompt_tokens=120, completion_tokens=40, cached_tokens=64, reasoning_tokens=30)


def test_deepseek_thinking_with_a_tool_call_keeps_both(llm):
    llm.script(deepseek_thinking("I need the listing.", calls=(("call_ds_1", "run_command", {"command": "ls"}),)))

    reply = make_model(llm).stream_chat(messages=USER)

    assert reply.reasoning == "I need the listing."
    assert reply.content == ""
    assert [(c.id, c.name, json.loads(c.arguments)) for c in reply.tool_calls] == [
        ("call_ds_1", "run_command", {"command": "ls"})]
    assert reply.finish_reason == "tool_calls"


def test_gemini_parallel_calls_at_one_index_stay_apart(llm):
    llm.script(gemini_parallel_calls(("g-1", "run_command", {"command": "date"}),
                                     ("g-2", "run_command", {"command": "uptime"})))

    reply = make_model(llm).stream_chat(messages=USER)

    assert [(c.id, json.loads(c.arguments)) for c in reply.tool_calls] == [
        ("g-1", {"command": "date"}), ("g-2", {"command": "uptime"})]
    assert [c.extra_content for c in reply.tool_calls] == [GEMINI_SIGNATURE, None]
    assert reply.usage == Usage(prompt_tokens=50, completion_tokens=20)


def test_gemini_thinking_left_out_of_completion_tokens_counts_as_reasoning_output(llm):
    llm.script(gemini_thinking_text("Hi!", prompt=11, completion=9, thoughts=68))

    reply = make_model(llm).stream_chat(messages=USER)

    assert reply.usage == Usage(prompt_tokens=11, completion_tokens=77, reasoning_tokens=68)


def test_an_id_repeated_on_every_delta_of_one_call_is_one_call(llm):
    head = {"index": 0, "id": "same", "type": "function", "function": {"name": "run_command", "arguments": ""}}
    pieces = [{"index": 0, "id": "same", "function": {"arguments": part}} for part in ('{"comm', 'and": "ls"}')]
    llm.script(RawChunksStep(tuple({"choices": [{"index": 0, "delta": {"tool_calls": [d]}, "finish_reason": None}]}
                                   for d in (head, *pieces))))

    reply = make_model(llm).stream_chat(messages=USER)

    assert [(c.id, c.arguments) for c in reply.tool_calls] == [("same", '{"command": "ls"}')]


def test_think_tags_at_the_start_of_the_content_are_thinking(llm):
    llm.script(think_tags("Short question, short answer.", "Paris is the capital of France."))
    text_chunks: list[str] = []

    reply = make_model(llm).stream_chat(messages=USER, on_text=text_chunks.append)

    assert reply.content == "".join(text_chunks) == "Paris is the capital of France."
    assert reply.reasoning.strip() == "Short question, short answer."


@pytest.mark.parametrize(("after", "content"), [
    (({"content": "Paris."},), "Paris."),
    (({"tool_calls": [{"index": 0, "id": "t1", "type": "function",
                       "function": {"name": "run_command", "arguments": "{}"}}]},), ""),
])
def test_white_space_after_a_think_block_streamed_token_by_token_is_not_the_reply(llm, after, content):
    """vLLM or Ollama without a reasoning parser send `</think>` and the blank line after it as tokens of
    their own: the reply is what follows, as when they come in one chunk."""
    deltas = [{"content": token} for token in ("<think>", "\n", "Short.", "\n", "</think>", "\n\n")] + list(after)
    llm.script(RawChunksStep(tuple({"choices": [{"index": 0, "delta": d, "finish_reason": None}]} for d in deltas)))
    text_chunks: list[str] = []

    reply = make_model(llm).stream_chat(messages=USER, on_text=text_chunks.append)

    assert reply.content == "".join(text_chunks) == content
    assert reply.reasoning.strip() == "Short."


def test_a_think_tag_later_in_the_text_is_text(llm):
    llm.script(text("Use the <think> tag like this: <think>x</think>", chunk_size=3))

    reply = make_model(llm).stream_chat(messages=USER)

    assert reply.content == "Use the <think> tag like this: <think>x</think>"
    assert reply.reasoning == ""


def test_openrouter_reasoning_and_comments(llm):
    llm.script(openrouter_stream("Fine, thanks.", reasoning="Be polite."))

    reply = make_model(llm).stream_chat(messages=USER)

    assert (reply.content, reply.reasoning) == ("Fine, thanks.", "Be polite.")
    assert reply.usage == Usage(prompt_tokens=11, completion_tokens=7)


def test_openrouter_reasoning_details_fragments_are_merged_by_index(llm):
    llm.script(openrouter_gemini_call("or-1", "run_command", {"command": "date"}))

    reply = make_model(llm).stream_chat(messages=USER)

    assert reply.reasoning == OPENROUTER_DETAILS[0]["text"]
    assert reply.reasoning_details == OPENROUTER_DETAILS and [c.id for c in reply.tool_calls] == ["or-1"]


def test_a_whole_json_body_despite_stream_true_is_a_reply(llm):
    llm.script(whole_body("Not streamed, still an answer.", reasoning="why not"))
    text_chunks: list[str] = []

    reply = make_model(llm).stream_chat(messages=USER, on_text=text_chunks.append)

    assert reply.content == "".join(text_chunks) == "Not streamed, still an answer."
    assert (reply.reasoning, reply.finish_reason, reply.model) == ("why not", "stop", "whole-model")
    assert reply.usage == Usage(prompt_tokens=9, completion_tokens=3)


def test_a_whole_json_body_with_calls(llm):
    llm.script(whole_body(None, calls=(("w1", "run_command", {"command": "a"}), ("w2", "ask_user", {"q": 1}))))

    reply = make_model(llm).stream_chat(messages=USER)

    assert [(c.id, c.name) for c in reply.tool_calls] == [("w1", "run_command"), ("w2", "ask_user")]


def test_tool_call_arguments_sent_as_a_json_object_are_read_as_their_json_text(llm):
    llm.script(whole_body(None, calls=(("w1", "run_command", {"command": "ls"}),), objects=True))

    reply = make_model(llm).stream_chat(messages=USER)

    assert [(c.name, json.loads(c.arguments)) for c in reply.tool_calls] == [("run_command", {"command": "ls"})]


def test_a_json_error_body_with_status_200_is_an_error(llm):
    llm.script(JsonBodyStep({"error": {"message": "This model's maximum context length is 8192 tokens"}}))

    with pytest.raises(ModelError) as caught:
        make_model(llm).stream_chat(messages=USER)

    assert caught.value.code == CONTEXT_LENGTH_EXCEEDED


@pytest.mark.parametrize("code", [502, "503", "server_error", 429, "rate_limit_exceeded"])
def test_an_error_event_that_names_a_server_error_or_rate_limit_is_retried_before_any_output(llm, code):
    llm.script(openrouter_error(code, "Provider disconnected unexpectedly"), text("recovered"))

    reply = make_model(llm).stream_chat(messages=USER)

    assert reply.content == "recovered" and len(llm.requests) == 2


@pytest.mark.parametrize(("code", "before", "said"), [
    (403, "", "flagged"),  # a moderation block: asking again gets the same answer
    (502, "Half an answ", "after partial output"),  # a retry would repeat what the user has seen
])
def test_an_error_event_is_not_retried_when_asking_again_would_not_help(llm, code, before, said):
    llm.script(openrouter_error(code, "Input flagged" if code == 403 else "Provider disconnected", before=before),
               text("must not be served"))

    with pytest.raises(ModelError) as caught:
        make_model(llm).stream_chat(messages=USER)

    assert said in caught.value.message.lower() and len(llm.requests) == 1


def test_a_failure_after_thinking_carries_the_thinking_shown(llm):
    llm.script(openrouter_error(502, "Provider disconnected", reasoning="Let me think.", before="So"))

    with pytest.raises(ModelError) as caught:
        make_model(llm).stream_chat(messages=USER)

    assert (caught.value.partial, caught.value.partial_reasoning) == ("So", "Let me think.")


@pytest.mark.parametrize("reason", ["length", "model_length"])
def test_finish_reason_length_marks_the_reply_truncated(llm, reason):
    llm.script(cut_at_length("The list goes on and on and", reason))

    reply = make_model(llm).stream_chat(messages=USER)

    assert reply.truncated and reply.finish_reason == reason
    assert reply.content == "The list goes on and on and"
    assert not reply.filtered


@pytest.mark.parametrize("reason", ["content_filter", "sensitive"])
def test_finish_reason_content_filter_marks_the_reply_filtered(llm, reason):
    llm.script(cut_at_length("", reason))

    reply = make_model(llm).stream_chat(messages=USER)

    assert reply.filtered and not reply.truncated and reply.content == ""


@pytest.mark.parametrize("reason", ["network_error", "error", "abort"])
def test_a_finish_reason_that_says_the_provider_failed_is_retried_before_any_output(llm, reason):
    llm.script(cut_at_length("", reason), text("recovered"))

    reply = make_model(llm).stream_chat(messages=USER)

    assert (reply.content, len(llm.requests)) == ("recovered", 2)


def test_a_finish_reason_that_says_the_provider_failed_after_text_fails_keeping_it(llm):
    llm.script(cut_at_length("Half an", "network_error"), text("must not be served"))

    with pytest.raises(ModelError) as caught:
        make_model(llm).stream_chat(messages=USER)

    assert (caught.value.code, caught.value.partial, len(llm.requests)) == ("server_error", "Half an", 1)


def test_a_stream_that_ends_before_its_reply_is_whole_is_asked_again(llm):
    llm.script(ended_early(call_arguments='{"path": "/work/no'), text("whole"))

    reply = make_model(llm).stream_chat(messages=USER)

    assert (reply.content, reply.tool_calls, len(llm.requests)) == ("whole", [], 2)


def test_a_stream_that_ends_mid_text_fails_keeping_the_text_shown(llm):
    llm.script(ended_early("Half a sent"), text("must not be served"))

    with pytest.raises(ModelError) as caught:
        make_model(llm).stream_chat(messages=USER)

    assert (caught.value.code, caught.value.partial, len(llm.requests)) == ("connection_error", "Half a sent", 1)
    assert "before the reply was complete" in caught.value.message


def test_done_without_a_finish_reason_is_a_whole_reply(llm):
    llm.script(ended_early("All of it.", done=True))

    assert make_model(llm).stream_chat(messages=USER).content == "All of it."


def test_usage_is_asked_for_and_read_from_a_chunk_without_choices(llm):
    llm.script(RawChunksStep(({"choices": [{"index": 0, "delta": {"content": "hi"}, "finish_reason": "stop"}]},
                              usage_chunk(30, 2, cached=16, reasoning=0))))

    reply = make_model(llm).stream_chat(messages=USER)

    assert llm.wait_for_requests(1)[0].body["stream_options"] == {"include_usage": True}
    assert reply.usage == Usage(prompt_tokens=30, completion_tokens=2, cached_tokens=16)
    assert reply.latency_s > 0 and reply.first_token_s is not None and reply.first_token_s <= reply.latency_s


def test_kimi_usage_inside_the_last_choice_is_read(llm):
    llm.script(kimi_stream("你好！", 19, 13))

    reply = make_model(llm).stream_chat(messages=USER)

    assert (reply.content, reply.usage) == ("你好！", Usage(prompt_tokens=19, completion_tokens=13))


def test_groq_usage_in_x_groq_is_read(llm):
    llm.script(groq_stream("Fast.", 18, 439))

    assert make_model(llm).stream_chat(messages=USER).usage == Usage(prompt_tokens=18, completion_tokens=439)


def test_kimi_cache_hits_at_the_top_of_usage_are_counted_as_cached(llm):
    llm.script(kimi_stream("Cached.", prompt=2000, completion=5, cached=1536))

    reply = make_model(llm).stream_chat(messages=USER)

    assert reply.usage == Usage(prompt_tokens=2000, completion_tokens=5, cached_tokens=1536)


def test_a_reply_without_usage_says_so(llm):
    assert make_model(llm).stream_chat(messages=USER).usage is None


@pytest.mark.parametrize(("status", "wording"), [
    (422, '[{"type":"extra_forbidden","loc":["body","stream_options"],"msg":"Extra inputs are not permitted"}]'),
    (400, "'stream_options' : property 'stream_options' is unsupported"),
])
def test_a_refused_stream_options_is_dropped_once_and_for_all(llm, status, wording):
    def refuse(body):
        return error(status, wording) if "stream_options" in body else text("without usage")
    llm.set_default(dynamic(refuse))
    model = make_model(llm, max_retries=0)

    first = model.stream_chat(messages=USER)
    second = model.stream_chat(messages=USER)

    assert (first.content, second.content) == ("without usage", "without usage")
    assert ["stream_options" in r.body for r in llm.requests] == [True, False, False]


@pytest.mark.parametrize(("status", "message", "code"), [
    (400, "This model's maximum context length is 8192 tokens. However, your messages resulted in 9000 tokens.",
     None),
    (400, "Invalid request", "context_length_exceeded"),
    (400, "prompt is too long: 210000 tokens > 200000 maximum", None),
    (400, "The input tokens exceed the maximum allowed (32768)", None),
    (400, "max_tokens is too large: 9000. This model supports at most 8192 completion tokens", None),
    (422, "Input validation error: `inputs` tokens + `max_new_tokens` must be <= 4096; too many tokens", None),
    (413, "Request Entity Too Large", None),
])
def test_every_overflow_wording_is_context_length_exceeded(llm, status, message, code):
    llm.set_default(error(status, message, code=code))

    with pytest.raises(ModelError) as caught:
        make_model(llm).stream_chat(messages=USER)

    assert (caught.value.code, caught.value.retryable, caught.value.status) == (CONTEXT_LENGTH_EXCEEDED, False, status)
    assert len(llm.requests) == 1


def test_an_ordinary_bad_request_is_not_an_overflow(llm):
    llm.set_default(error(400, "Invalid value for 'temperature'"))

    with pytest.raises(ModelError) as caught:
        make_model(llm).stream_chat(messages=USER)

    assert caught.value.code == "bad_request"
