"""The token estimate (modules/llm/tokens.py) errs high the documented way."""

from __future__ import annotations

from modules.llm.tokens import MESSAGE_OVERHEAD, count_message, count_messages, count_tokens, count_tools


def test_letters_count_a_token_per_four_characters_at_least_one():
    assert count_tokens("a") == 1
    assert count_tokens("word") == 1
    assert count_tokens("words") == 2
    assert count_tokens("Hello world") == 4


def test_digits_count_a_token_per_three():
    assert count_tokens("123") == 1
    assert count_tokens("1234567") == 3


def test_every_cjk_character_counts_one_and_a_half():
    assert count_tokens("你好") == 3
    assert count_tokens("你好，世界") == 8  # the full-width comma is CJK too
    assert count_tokens("東京タワー") == 8


def test_punctuation_counts_one_each_and_space_nothing():
    assert count_tokens('{"a": 1}') == 7
    assert count_tokens("   \n\t ") == 0


def test_a_message_counts_its_framing_text_thinking_and_calls():
    call = {"id": "c1", "type": "function", "function": {"name": "run", "arguments": '{"x": 1}'}}
    plain = count_message({"role": "user", "content": "word"})
    assert plain == MESSAGE_OVERHEAD + 1
    with_calls = count_message({"role": "assistant", "content": None, "reasoning_content": "word",
                                "tool_calls": [call]})
    assert with_calls == MESSAGE_OVERHEAD + 1 + MESSAGE_OVERHEAD + 1 + count_tokens('{"x": 1}')
    assert count_messages([{"role": "user", "content": "word"}] * 3) == 3 * plain


def test_tools_count_as_their_json():
    assert count_tools(None) == 0
    assert count_tools([{"type": "function"}]) == count_tokens('[{"type": "function"}]')


def test_the_same_tool_definitions_are_counted_once(monkeypatch):
    """The registry hands out the same definition objects for every request (issue 26: counting them again took
    about 3 % of the CPU while 200 streams ran); other definitions are counted afresh."""
    from modules.llm import tokens

    definitions = [{"type": "function", "function": {"name": "run_command"}}, {"type": "function"}]
    counted: list[str] = []
    real = tokens.count_tokens
    monkeypatch.setattr(tokens, "count_tokens", lambda text: counted.append(text) or real(text))

    first = count_tools(list(definitions))
    again = count_tools(list(definitions))  # a new list of the same objects, as the registry builds one
    other = count_tools([{"type": "function", "function": {"name": "run_command"}}])

    assert first == again == real(tokens.json.dumps(definitions)) and len(counted) == 2
    assert other == real('[{"type": "function", "function": {"name": "run_command"}}]')


def test_a_long_text_is_counted_once_however_many_requests_carry_it(monkeypatch):
    """A conversation's messages travel with every request it makes, a profile's system prompt with every
    conversation (issue 26: counting them again was 2.5 % of the CPU while 500 streams ran); a new copy of the
    same text is found by its content, and a short text is counted each time (keeping it would cost more)."""
    from modules.llm import tokens

    monkeypatch.setattr(tokens, "_kept", tokens._KeptCounts())
    counted: list[str] = []
    real = tokens.count_tokens
    monkeypatch.setattr(tokens, "count_tokens", lambda text: counted.append(text) or real(text))
    prompt = "You are the travel agent. " * 40
    copy = "".join(["You are the travel agent. " * 20, "You are the travel agent. " * 20])
    call = {"function": {"name": "write_file", "arguments": '{"text": "' + "x" * 500 + '"}'}}

    first = count_message({"role": "system", "content": prompt, "tool_calls": [call]})
    again = count_message({"role": "system", "content": copy, "tool_calls": [call]})
    count_message({"role": "user", "content": "ok"})
    count_message({"role": "user", "content": "ok"})

    arguments = call["function"]["arguments"]
    assert first == again == 2 * MESSAGE_OVERHEAD + real(prompt) + real("write_file") + real(arguments)
    assert counted.count(prompt) == 1 and counted.count(call["function"]["arguments"]) == 1
    assert counted.count("ok") == 2


def test_the_kept_counts_are_bounded_by_their_texts_length(monkeypatch):
    from modules.llm import tokens

    monkeypatch.setattr(tokens._KeptCounts, "MAX_CHARS", 1_000)
    kept = tokens._KeptCounts()
    texts = [f"{i} " + "word " * 100 for i in range(10)]
    assert [kept.count(t) for t in texts] == [count_tokens(t) for t in texts]
    assert kept._chars <= 1_000 and len(kept._counts) <= 2
