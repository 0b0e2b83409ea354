"""The fast path's edges: the length limit, how word lists are read and normalised, the quick actions, and
the active-agent record that any failure turns into "no active agent" (the full pipeline), never an error."""

from __future__ import annotations

import logging

import pytest

from modules.multi_agent.fast_path import (
    MAX_CONTINUATION_CHARS,
    ActiveAgentSessionStore,
    RoutingSignals,
    SignalsError,
    load_routing_signals,
    normalise,
)
from modules.storage.db import Database
from modules.storage.session_store import SessionStore


def test_a_continuation_is_at_most_the_limit_long():
    signals = RoutingSignals.of(["ok", "好"], [])
    assert signals.is_continuation("好" * MAX_CONTINUATION_CHARS)
    assert not signals.is_continuation("好" * (MAX_CONTINUATION_CHARS + 1))
    assert signals.is_continuation("ok " * 8)  # 23 characters once trimmed
    assert not signals.is_continuation("k") and not signals.is_continuation("oko")


def test_word_lists_are_normalised_deduplicated_and_kept_in_order():
    signals = RoutingSignals.of([" OK ", "ok", "好的！", "！！", "go on", "Ｙｅｓ"], ["  ＢＹ ＴＨＥ ＷＡＹ ", "。"])
    assert signals.quick_actions() == ["OK", "ok", "好的！", "go on", "Ｙｅｓ"]
    assert signals.continuation == frozenset({"ok", "好的", "go on", "yes"})
    assert signals.topic_switch == ("by the way",)
    assert signals.compact_words == frozenset({"ok", "好的", "goon", "yes"})
    assert signals.is_continuation("yes, go on!")
    assert not signals.is_continuation("ok by the way")


def test_quick_actions_are_limited():
    signals = RoutingSignals.of([f"w{i}" for i in range(50)], [])
    assert signals.quick_actions() == [f"w{i}" for i in range(40)]
    assert signals.quick_actions(3) == ["w0", "w1", "w2"]


@pytest.mark.parametrize(("body", "field"), [
    ('topic_switch = ["x"]\n', "`continuation`"),
    ('continuation = ["ok"]\n', "`topic_switch`"),
    ('continuation = "ok"\ntopic_switch = []\n', "`continuation`"),
    ('continuation = ["ok", 3]\ntopic_switch = []\n', "`continuation`"),
    ('continuation = ["ok"]\ntopic_switch = [["x"]]\n', "`topic_switch`"),
])
def test_a_bad_signals_file_names_the_file_and_the_field(tmp_path, body, field):
    path = tmp_path / "signals.toml"
    path.write_text(body)
    with pytest.raises(SignalsError) as err:
        load_routing_signals(path)
    assert str(err.value) == f"{path}: field {field} must be a list of strings"


def test_a_signals_file_replaces_the_built_in_lists(tmp_path):
    path = tmp_path / "signals.toml"
    path.write_text('continuation = ["weiter"]\ntopic_switch = ["neues thema"]\n')
    signals = load_routing_signals(path)
    assert signals.is_continuation("Weiter!") and not signals.is_continuation("确认")
    assert not signals.is_continuation("weiter, neues Thema")
    with pytest.raises(SignalsError, match="file not found"):
        load_routing_signals(tmp_path / "missing.toml")


class BrokenStore:
    def get(self, key, field):
        raise RuntimeError("store down")

    def set(self, key, field, value):
        raise RuntimeError("store down")


def test_the_active_agent_is_kept_per_conversation_in_the_session_store(tmp_path):
    db = Database(f"sqlite:///{tmp_path / 'app.db'}")
    db.migrate()
    store = SessionStore(db)
    active = ActiveAgentSessionStore(store)
    assert active.get_active_agent("c1") is None
    active.set_active_agent("c1", "InfoAgent_1")
    active.set_active_agent("c2", "MasterAgent")
    assert active.get_active_agent("c1") == "InfoAgent_1" and active.get_active_agent("c2") == "MasterAgent"
    assert store.get("c1:router", "activeAgent") == {"agentName": "InfoAgent_1"}
    store.set("c3:router", "activeAgent", "not a record")
    assert active.get_active_agent("c3") is None
    db.dispose()


def test_a_failing_store_reads_as_no_active_agent_and_is_logged(caplog):
    active = ActiveAgentSessionStore(BrokenStore())
    with caplog.at_level(logging.WARNING, logger="modules.multi_agent.fast_path"):
        assert active.get_active_agent("c1") is None
        active.set_active_agent("c1", "InfoAgent_1")  # does not raise
    messages = [r.getMessage() for r in caplog.records]
    assert messages == ["session store unreadable, taking the full pipeline: store down",
                        "could not record the active agent InfoAgent_1: store down"]


def test_trailing_emoji_joiners_and_variation_selectors_are_stripped_too():
    assert normalise("ok\ufe0f") == "ok"  # a lone variation selector (category Mn)
    assert normalise("继续 \u2764\ufe0f") == "继续"
    assert normalise("好的 👨\u200d💻") == "好的"  # a joined emoji sequence
