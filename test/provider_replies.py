"""What real OpenAI-compatible providers stream, chunk for chunk, as steps of the scripted model server.

Each builder mirrors one provider's documented or observed wire format (README, "Providers"); the
tests feed them through the real `openai` client and, through the real server, into turns.
"""

from __future__ import annotations

import json
from typing import Any

from test.scripted_steps import JsonBodyStep, RawChunksStep


def _choice(delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
    return {"choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}]}


def _pieces(text: str, size: int = 5) -> list[str]:
    return [text[i: i + size] for i in range(0, len(text), size)]


def usage_chunk(prompt: int, completion: int, *, cached: int = 0, reasoning: int = 0) -> dict[str, Any]:
    """OpenAI's last chunk under `stream_options.include_usage`: no choices, only usage."""
    return {"choices": [], "usage": {
        "prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion,
        "prompt_tokens_details": {"cached_tokens": cached},
        "completion_tokens_details": {"reasoning_tokens": reasoning}}}


def deepseek_thinking(reasoning: str, content: str = "", *,
                      calls: tuple[tuple[str, str, dict[str, Any]], ...] = ()) -> RawChunksStep:
    """deepseek-reasoner / deepseek-chat in thinking mode: `reasoning_content` deltas first (content null),
    then the answer or tool calls, then usage with DeepSeek's cache fields."""
    chunks: list[dict | str] = [_choice({"role": "assistant", "content": None, "reasoning_content": ""})]
    chunks += [_choice({"content": None, "reasoning_content": piece}) for piece in _pieces(reasoning)]
    chunks += [_choice({"content": piece, "reasoning_content": None}) for piece in _pieces(content)]
    for index, (call_id, name, args) in enumerate(calls):
        chunks.append(_choice({"tool_calls": [{"index": index, "id": call_id, "type": "function",
                                               "function": {"name": name, "arguments": ""}}]}))
        chunks.append(_choice({"tool_calls": [{"index": index, "function": {"arguments": json.dumps(args)}}]}))
    chunks.append(_choice({"content": ""}, "tool_calls" if calls else "stop"))
    chunks.append({"choices": [], "usage": {"prompt_tokens": 120, "completion_tokens": 40, "total_tokens": 160,
                                            "prompt_cache_hit_tokens": 64, "prompt_cache_miss_tokens": 56,
                                            "completion_tokens_details": {"reasoning_tokens": 30}}})
    return RawChunksStep(tuple(chunks))


GEMINI_SIGNATURE = {"google": {"thought_signature": "CiQBjz1rX0signature=="}}


def gemini_parallel_calls(*calls: tuple[str, str, dict[str, Any]]) -> RawChunksStep:
    """Gemini's OpenAI endpoint: every call whole in a chunk of its own, all at `index: 0`, distinct ids, the
    first with Gemini 3's thought signature in `extra_content` (the API wants it back with the call);
    finish_reason "stop" after them, usage on the last chunk."""
    chunks: list[dict | str] = [
        _choice({"role": "assistant", "tool_calls": [{"index": 0, "id": call_id, "type": "function",
                                                      "function": {"name": name, "arguments": json.dumps(args)}}
                                                     | ({"extra_content": GEMINI_SIGNATURE} if not i else {})]})
        for i, (call_id, name, args) in enumerate(calls)
    ]
    last = _choice({}, "stop") | {"usage": {"prompt_tokens": 50, "completion_tokens": 20, "total_tokens": 70}}
    return RawChunksStep((*chunks, last))


def gemini_thinking_text(content: str, *, prompt: int, completion: int, thoughts: int) -> RawChunksStep:
    """Gemini's OpenAI endpoint with a thinking model: the thinking is not streamed, and its tokens are left out of
    `completion_tokens` but counted in `total_tokens`."""
    chunks: list[dict | str] = [_choice({"role": "assistant", "content": piece}) for piece in _pieces(content)]
    last = _choice({}, "stop") | {"usage": {"prompt_tokens": prompt, "completion_tokens": completion,
                                            "total_tokens": prompt + completion + thoughts}}
    return RawChunksStep((*chunks, last))


def think_tags(reasoning: str, content: str) -> RawChunksStep:
    """A reasoning model served without a reasoning parser (vLLM, Ollama): `<think>…</think>` opens the
    content, split at awkward places."""
    whole = f"<think>\n{reasoning}\n</think>\n\n{content}"
    chunks: list[dict | str] = [_choice({"role": "assistant", "content": ""})]
    chunks += [_choice({"content": piece}) for piece in _pieces(whole, 3)]
    return RawChunksStep((*chunks, _choice({}, "stop")))


def cut_at_length(content: str, finish_reason: str = "length") -> RawChunksStep:
    """A reply the provider cut at its output limit: finish_reason "length" (or "content_filter": its content
    filter stopped it, Azure's and Gemini's safety settings)."""
    chunks: list[dict | str] = [_choice({"role": "assistant", "content": ""})]
    chunks += [_choice({"content": piece}) for piece in _pieces(content)]
    return RawChunksStep((*chunks, _choice({}, finish_reason)))


def kimi_stream(content: str, prompt: int, completion: int, *, cached: int = 0) -> RawChunksStep:
    """Kimi (Moonshot): usage inside the last chunk's choice, beside its finish_reason, not at the chunk's top;
    its context cache's hits as `cached_tokens` at the top of usage."""
    chunks: list[dict | str] = [_choice({"role": "assistant", "content": ""})]
    chunks += [_choice({"content": piece}) for piece in _pieces(content)]
    last = _choice({}, "stop")
    last["choices"][0]["usage"] = {"prompt_tokens": prompt, "completion_tokens": completion,
                                   "total_tokens": prompt + completion} | ({"cached_tokens": cached} if cached else {})
    return RawChunksStep((*chunks, last))


def groq_stream(content: str, prompt: int, completion: int) -> RawChunksStep:
    """Groq asked without `stream_options` (it refused them): usage in the last chunk's `x_groq`, with its timings."""
    chunks: list[dict | str] = [_choice({"role": "assistant", "content": ""})]
    chunks += [_choice({"content": piece}) for piece in _pieces(content)]
    usage = {"queue_time": 0.06, "prompt_tokens": prompt, "prompt_time": 0.0002, "completion_tokens": completion,
             "completion_time": 0.8, "total_tokens": prompt + completion, "total_time": 0.8}
    return RawChunksStep((*chunks, _choice({}, "stop") | {"x_groq": {"id": "req_01", "usage": usage}}))


def openrouter_stream(content: str, *, reasoning: str = "") -> RawChunksStep:
    """OpenRouter: keep-alive comments between chunks, `reasoning` (not `reasoning_content`), usage last."""
    chunks: list[dict | str] = [": OPENROUTER PROCESSING\n\n", _choice({"role": "assistant", "content": ""})]
    chunks += [_choice({"content": "", "reasoning": piece}) for piece in _pieces(reasoning)]
    chunks += [": OPENROUTER PROCESSING\n\n"]
    chunks += [_choice({"content": piece}) for piece in _pieces(content)]
    chunks.append(_choice({}, "stop") | {"usage": {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18}})
    return RawChunksStep(tuple(chunks))


OPENROUTER_DETAILS = [
    {"type": "reasoning.text", "text": "The user wants the date.", "format": "google-gemini-v1", "index": 0},
    {"type": "reasoning.encrypted", "data": "CiQBjz1rX0encrypted==", "id": "or-1", "format": "google-gemini-v1",
     "index": 1},
]


def openrouter_gemini_call(call_id: str, name: str, args: dict[str, Any]) -> RawChunksStep:
    """Gemini 3 through OpenRouter: thinking as `reasoning` and as `reasoning_details` fragments (text merged by
    `index`, the signature in an encrypted entry), which OpenRouter wants back with the call (README, "Providers")."""
    text, encrypted = OPENROUTER_DETAILS
    halves = (text["text"][:9], text["text"][9:])
    chunks: list[dict | str] = [_choice({"role": "assistant", "content": "", "reasoning": halves[0],
                                         "reasoning_details": [{**text, "text": halves[0]}]}),
                                _choice({"content": "", "reasoning": halves[1],
                                         "reasoning_details": [{**text, "text": halves[1]}]}),
                                _choice({"content": "", "reasoning_details": [encrypted]}),
                                _choice({"tool_calls": [{"index": 0, "id": call_id, "type": "function", "function": {
                                    "name": name, "arguments": json.dumps(args)}}]}),
                                _choice({}, "tool_calls")]
    return RawChunksStep(tuple(chunks))


def openrouter_error(code: int | str, message: str, *, before: str = "", reasoning: str = "") -> RawChunksStep:
    """OpenRouter's error after the answer began (HTTP 200): an SSE data event with `error` and
    `finish_reason: "error"`, then the stream ends; `reasoning`, `before`: thinking and text streamed ahead of it."""
    chunks: list[dict | str] = [_choice({"role": "assistant", "content": ""})]
    chunks += [_choice({"content": "", "reasoning": piece}) for piece in _pieces(reasoning)]
    chunks += [_choice({"content": piece}) for piece in _pieces(before)]
    chunks.append(_choice({"content": ""}, "error") | {"error": {"code": code, "message": message}})
    return RawChunksStep(tuple(chunks), done=False)


def gateway_error(error: dict[str, Any] | str, *, before: str = "", call_arguments: str = "") -> RawChunksStep:
    """A gateway or proxy that fails mid-stream with an error chunk of its own words, no HTTP status in it
    (`{"error": {"message": "Upstream error"}}`, or with only a `type`), then ends the stream; `before`: text
    streamed ahead of it; `call_arguments`: a tool call's arguments streamed ahead of it (never shown)."""
    chunks: list[dict | str] = [_choice({"role": "assistant", "content": ""})]
    chunks += [_choice({"content": piece}) for piece in _pieces(before)]
    if call_arguments:
        chunks.append(_choice({"tool_calls": [{"index": 0, "id": "call_cut", "type": "function", "function": {
            "name": "read_file", "arguments": call_arguments}}]}))
    chunks.append({"error": error})
    return RawChunksStep(tuple(chunks), done=False)


def whole_body(content: str | None, *, calls: tuple[tuple[str, str, dict[str, Any]], ...] = (),
               reasoning: str = "", finish_reason: str | None = None, objects: bool = False) -> JsonBodyStep:
    """A provider (or proxy) that ignores `stream: true` and answers one `chat.completion` body; `objects`: its
    calls' arguments as JSON objects, not as the string the format asks for (Ollama's own message shape)."""
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if reasoning:
        message["reasoning_content"] = reasoning
    if calls:
        message["tool_calls"] = [{"id": call_id, "type": "function",
                                  "function": {"name": name, "arguments": args if objects else json.dumps(args)}}
                                 for call_id, name, args in calls]
    return JsonBodyStep({
        "id": "chatcmpl-whole", "object": "chat.completion", "created": 0, "model": "whole-model",
        "choices": [{"index": 0, "message": message,
                     "finish_reason": finish_reason or ("tool_calls" if calls else "stop")}],
        "usage": {"prompt_tokens": 9, "completion_tokens": 3, "total_tokens": 12},
    })


def ended_early(content: str = "", *, call_arguments: str = "", done: bool = False) -> RawChunksStep:
    """A body that ends with no finish_reason (a proxy's idle cut, an endpoint that crashed mid-reply): text, or
    a tool call's arguments, stop where they are; `done`: the endpoint still sent `[DONE]`, as some that never
    send a finish_reason do."""
    chunks: list[dict | str] = [_choice({"role": "assistant", "content": ""})]
    chunks += [_choice({"content": piece}) for piece in _pieces(content)]
    if call_arguments:
        chunks.append(_choice({"tool_calls": [{"index": 0, "id": "call_cut", "type": "function", "function": {
            "name": "read_file", "arguments": call_arguments}}]}))
    return RawChunksStep(tuple(chunks), done=done)
