"""An error the endpoint sends inside a 200 stream (modules/llm/errors.py `stream_error`), through the real
`openai` client and the scripted server: one that names no HTTP status and no fault of the request is the
endpoint's failure, retried like a 5xx while nothing was shown; one that blames the request is not retried."""

from __future__ import annotations

import pytest

from modules.llm import ModelError
from modules.llm.types import CONTEXT_LENGTH_EXCEEDED
from test.provider_replies import gateway_error, whole_body
from test.scripted_llm import JsonBodyStep, text
from test.unit.scripted_client import USER, make_model

pytestmark = pytest.mark.timeout(30)


@pytest.mark.parametrize("error", [
    {"message": "Upstream error"},  # OpenRouter and proxies mid-stream: no code at all
    {"message": "Overloaded", "type": "overloaded_error"},  # only a type
    {"message": "upstream connect error", "code": "upstream_reset"},  # a code that names no status
    "Internal error",  # not even an object
])
def test_an_error_event_without_a_status_is_retried_before_any_output(llm, error):
    llm.script(gateway_error(error), text("recovered"))

    reply = make_model(llm).stream_chat(messages=USER)

    assert reply.content == "recovered" and len(llm.requests) == 2


def test_an_error_event_without_a_status_after_text_fails_keeping_the_text(llm):
    llm.script(gateway_error({"message": "Upstream error"}, before="Half an answ"), text("must not be served"))

    with pytest.raises(ModelError) as caught:
        make_model(llm).stream_chat(messages=USER)

    assert (caught.value.code, caught.value.partial, len(llm.requests)) == ("server_error", "Half an answ", 1)
    assert "after partial output" in caught.value.message


@pytest.mark.parametrize(("error", "code"), [
    ({"message": "Invalid value for 'tools'", "type": "invalid_request_error"}, "model_error"),
    ({"message": "Incorrect API key provided", "code": "invalid_api_key"}, "model_error"),
    ({"message": "not allowed", "type": "permission_error"}, "model_error"),
    ({"message": "This model's maximum context length is 8192 tokens", "type": "invalid_request_error"},
     CONTEXT_LENGTH_EXCEEDED),
])
def test_an_error_event_that_blames_the_request_is_not_retried(llm, error, code):
    llm.script(gateway_error(error), text("must not be served"))

    with pytest.raises(ModelError) as caught:
        make_model(llm).stream_chat(messages=USER)

    assert (caught.value.code, caught.value.retryable, len(llm.requests)) == (code, False, 1)


def test_an_error_event_typed_as_a_rate_limit_is_retried_as_one(llm):
    retries: list[str] = []
    llm.script(gateway_error({"message": "Number of requests exceeded", "type": "rate_limit_error"}),
               text("recovered"))

    reply = make_model(llm, on_retry=lambda attempt, err, delay: retries.append(err.code)).stream_chat(messages=USER)

    assert (reply.content, retries) == ("recovered", ["rate_limited"])


def test_a_whole_body_with_a_null_error_beside_its_choices_is_the_reply(llm):
    body = whole_body("the answer").body
    llm.script(JsonBodyStep({**body, "error": None}), text("must not be asked for"))

    reply = make_model(llm).stream_chat(messages=USER)

    assert (reply.content, len(llm.requests)) == ("the answer", 1)
