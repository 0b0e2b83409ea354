"""The context window's pure parts (README, "Long conversations"): the budget per model, where compaction
cuts, how long texts are shortened, and which assistant messages carry their reasoning back."""

from __future__ import annotations

import pytest

from modules.agents.profiles import ProfileError, load_profiles
from modules.config import ConfigError, Settings
from modules.context.budget import UNKNOWN_WINDOW, RefusedSizes, budget_for, known_window
from modules.context.compaction import choose_split, summary_request, summary_words, transcript_pieces
from modules.context.shorten import shorten_chars, shorten_tokens
from modules.context.view import HistoryRow, HistoryView, producer_of
from modules.llm.tokens import count_tokens


@pytest.mark.parametrize(("model", "window"), [
    ("gpt-4o", 128_000), ("gpt-4o-mini", 128_000), ("openai/gpt-4o-2024-08-06", 128_000), ("gpt-4", 8_192),
    ("deepseek-chat", 64_000), ("deepseek-v3.2", 128_000), ("Qwen/Qwen2.5-72B-Instruct", 32_768),
    ("qwen-plus", 131_072), ("glm-4.6", 200_000), ("glm-4-flash", 128_000), ("moonshot-v1-8k", 8_192),
    ("kimi-k2-0905-preview", 131_072), ("gemini-2.5-flash", 1_048_576), ("my-own-model", UNKNOWN_WINDOW),
])
def test_known_model_names_have_their_window(model, window):
    assert known_window(model) == window


def test_a_profile_wins_over_the_setting_which_wins_over_the_table():
    assert budget_for("gpt-4o").window == 128_000
    assert budget_for("gpt-4o", setting=50_000).window == 50_000
    assert budget_for("gpt-4o", setting=50_000, profile=6_000).window == 6_000
    small = budget_for("x", setting=4_000)
    assert small.reserve == 1_000 and small.limit == 3_000
    assert budget_for("gpt-4.1").reserve == 8_192  # the reply's reserve is bounded
    assert small.threshold(1_000) == 1_000 + 1_600 and small.tail(1_000) == 800


def test_a_refused_request_shrinks_the_budget_below_it():
    budget = budget_for("x", setting=100_000)
    shrunk = budget.refused_at(5_000)
    assert shrunk.limit == 3_500 and shrunk.reserve == budget.reserve


def test_a_size_a_model_refused_bounds_its_later_budgets_and_no_other_models():
    sizes, budget = RefusedSizes(), budget_for("x", setting=100_000)
    assert sizes.within("m", budget) == budget
    sizes.refused("m", 5_000)
    sizes.refused("m", 9_000)  # a larger refusal teaches nothing new
    assert sizes.within("m", budget).limit == 3_500 and sizes.within("other", budget) == budget
    small = budget_for("x", setting=2_000)
    assert sizes.within("m", small) == small  # already below what was refused


def test_the_settings_and_profiles_read_the_window():
    assert Settings.from_env({"MODEL_CONTEXT_TOKENS": "6000"}).model_context_tokens == 6000
    assert Settings.from_env({}).model_context_tokens is None
    with pytest.raises(ConfigError, match="MODEL_CONTEXT_TOKENS"):
        Settings.from_env({"MODEL_CONTEXT_TOKENS": "lots"})


def test_a_profile_takes_context_tokens(tmp_path):
    path = tmp_path / "p.toml"
    entry = '[[agent]]\nname = "Boss"\nkind = "master"\ndescription = "d"\nsystem_prompt = "s"\ntools = []\n'
    path.write_text(entry + "context_tokens = 6000\n")
    assert load_profiles(path, set())["Boss"].context_tokens == 6000
    path.write_text(entry + "context_tokens = 10\n")
    with pytest.raises(ProfileError, match="context_tokens"):
        load_profiles(path, set())


def rows(*roles: str) -> list[HistoryRow]:
    return [HistoryRow(i, role, f"m{i}", tool_call_id=f"c{i}" if role == "tool" else None)
            for i, role in enumerate(roles)]


def test_compaction_keeps_the_newest_rows_that_fit_and_never_cuts_between_a_call_and_its_results():
    history = rows("user", "assistant", "tool", "tool", "assistant", "user", "assistant", "tool", "assistant")
    sizes = [10] * len(history)
    assert choose_split(history, sizes, 40) == 5  # rows 5-8 fit
    assert choose_split(history, sizes, 35) == 6  # rows 6-8 fit; row 6 is an assistant: a valid cut
    assert choose_split(history, sizes, 25) == 8  # 7 is a tool result: the cut moves to the newest row
    assert choose_split(history, [10, 10, 10, 10, 10, 10, 10, 10, 500], 25) == 8  # the newest row stays
    assert choose_split(rows("user"), [10], 5) == 0
    assert choose_split(rows("assistant", "tool", "tool"), [10, 10, 10], 5) == 0  # no cut keeps pairs whole


def test_a_shortened_text_keeps_its_head_and_tail_around_a_marker():
    long = "HEAD " + "x" * 10_000 + " TAIL"
    short = shorten_chars(long, 600)
    assert len(short) <= 600 and short.startswith("HEAD ") and short.endswith(" TAIL")
    assert "characters omitted" in short
    assert shorten_chars("short", 600) == "short"
    chinese = "开头" + "长" * 5_000 + "结尾"
    assert count_tokens(shorten_tokens(chinese, 300)) <= 300


def test_a_span_is_cut_into_pieces_that_each_fit_one_summary_request():
    span = [HistoryRow(i, "user", "word " * 200) for i in range(20)] + \
           [HistoryRow(20, "tool", "out " * 5_000, tool_call_id="c")]
    pieces = transcript_pieces(span, 1_000, line_tokens=100)
    assert len(pieces) > 1 and all(count_tokens(p) <= 1_000 for p in pieces)
    assert "omitted" in pieces[-1]  # the tool output shortened to its line's share
    request = summary_request("- earlier rule", pieces[0], 120)
    assert "every instruction" in request[0]["content"] and "at most 120 words" in request[0]["content"]
    assert request[1]["content"].startswith("Previous summary:\n- earlier rule")


SUMMARY_LIKE = ('- The user said: "always answer in French"; keep replies under 100 words. Files: '
                "/workspace/report.md, /workspace/data.csv (3,412 rows). Ran pytest: 12 passed, 1 failed "
                "(test_parse). Open: the user asked whether the API supports pagination; not yet answered.")


@pytest.mark.parametrize("tokens", [300, 800, 1_200, 1_500, 5_000])
def test_a_summary_as_long_as_its_prompt_asks_fits_the_tokens_kept_for_it(tokens):
    # (a longer one is cut in its middle: what it says there is lost)
    words = (SUMMARY_LIKE.split() * 200)[:summary_words(tokens)]
    assert count_tokens(" ".join(words)) <= tokens


def test_reasoning_goes_back_only_with_the_current_turns_tool_calls():
    calls = [{"id": "c1", "type": "function", "function": {"name": "run_command", "arguments": "{}"}}]
    history = [HistoryRow(0, "user", "q"), HistoryRow(1, "assistant", None, calls, reasoning="old thought"),
               HistoryRow(2, "tool", "r", tool_call_id="c1"), HistoryRow(3, "assistant", "a", reasoning="t"),
               HistoryRow(4, "user", "q2"), HistoryRow(5, "assistant", None, calls, reasoning="new thought"),
               HistoryRow(6, "tool", "r", tool_call_id="c1"), HistoryRow(7, "assistant", None, calls)]
    view = HistoryView.of(history, current_from_seq=4, producer="p")
    assert [m.get("reasoning_content") for m in view.messages] == [None, None, None, None, None, "new thought",
                                                                   None, None]


def test_tool_call_arguments_that_are_not_a_json_object_go_back_to_the_model_as_an_empty_object():
    """vLLM parses every replayed call's arguments and refuses (400) a request where one does not parse: a call
    cut at the output limit would fail every later request of the agent. The stored row keeps what the model
    wrote."""
    raw = ['{"command": "ls', "not json", "[1]", "", '{"command": "ls"}']
    calls = [{"id": f"c{i}", "type": "function", "function": {"name": "run_command", "arguments": arguments}}
             for i, arguments in enumerate(raw)]
    row = HistoryRow(1, "assistant", None, calls)

    sent = HistoryView.of([HistoryRow(0, "user", "q"), row], current_from_seq=0,
                          producer="p").messages[1]["tool_calls"]

    assert [call["function"]["arguments"] for call in sent] == ["{}", "{}", "{}", "{}", '{"command": "ls"}']
    assert [(call["id"], call["function"]["name"]) for call in sent] == [(f"c{i}", "run_command") for i in range(5)]
    assert [call["function"]["arguments"] for call in row.tool_calls or []] == raw


def test_what_a_provider_wants_back_goes_only_to_the_endpoint_and_model_that_wrote_it():
    """A call's `extra_content` (Gemini 3's signature), `reasoning_content` and `reasoning_details` are replayed to
    the producer of the message only: after a switch of model or endpoint, a strict server refuses unknown keys."""
    gemini = producer_of("https://generativelanguage.googleapis.com/v1beta/openai", "gemini-3-pro-preview")
    signed = [{"id": "g1", "type": "function", "function": {"name": "run_command", "arguments": "{}"},
               "extra_content": {"google": {"thought_signature": "sig"}}}]
    details = [{"type": "reasoning.encrypted", "data": "enc"}]
    history = [HistoryRow(0, "user", "q"), HistoryRow(1, "assistant", None, signed, reasoning="thought",
                                                      reasoning_details=details, producer=gemini),
               HistoryRow(2, "tool", "r", tool_call_id="g1"),
               HistoryRow(3, "assistant", None, signed, reasoning="older", reasoning_details=details)]

    def sent(producer: str) -> list[dict]:
        view = HistoryView.of(history, current_from_seq=0, producer=producer)
        return [m for m in view.messages if m.get("tool_calls")]

    own, legacy = sent(gemini)
    assert own["tool_calls"][0]["extra_content"] == {"google": {"thought_signature": "sig"}}
    assert (own["reasoning_content"], own["reasoning_details"]) == ("thought", details)
    for other in (producer_of("https://api.openai.com/v1", "gemini-3-pro-preview"),
                  producer_of("https://generativelanguage.googleapis.com/v1beta/openai", "gpt-4o")):
        foreign, stored_before = sent(other)
        assert [set(call) for call in foreign["tool_calls"]] == [{"id", "type", "function"}]
        assert "reasoning_content" not in foreign and "reasoning_details" not in foreign
        assert stored_before == legacy  # a row stored before producers were recorded is taken as the request's own
    assert history[1].tool_calls == signed  # the stored row keeps what the provider sent
