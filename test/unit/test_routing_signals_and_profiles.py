"""Pure parts of routing: continuation detection, stage-answer parsing, profile and signal files."""

from __future__ import annotations

import pytest

from modules.agents.profiles import DEFAULT_PROFILES_FILE, ProfileError, load_profiles
from modules.multi_agent import fast_path
from modules.multi_agent.fast_path import RoutingSignals, SignalsError, load_routing_signals, normalise
from modules.multi_agent.pipeline import parse_intent
from modules.suggestions import parse_suggestions
from test.unit.teams import TOOL_NAMES

SIGNALS = load_routing_signals(None)


@pytest.mark.parametrize("message", [
    "确认", "确认。", "  继续  ", "好的！", "ＯＫ", "OK!", "Yes.", "继续 👍", "好的，继续", "ok 确认", "好的继续",
    "修改一下", "重新来", "不对", "confirm", "go on", "再来!!", "ok go ahead", "Yes, go ahead.", "okay,  go on",
    # particles, politeness, second clauses, abbreviations, cancellations naming what they cancel
    "好的吧", "明白了", "明白了，谢谢", "嗯，就这样吧", "可以可以，谢谢啦", "好的，订吧", "确认一下吧", "收到，辛苦了",
    "ok thx", "k", "kk", "Sounds good, thanks!", "yes please", "yes please book it", "cancel that booking",
    "取消这个订单吧", "no, cancel it please", "that works for me", "lgtm", "算了，不用了",
])
def test_continuations(message):
    assert SIGNALS.is_continuation(message)


@pytest.mark.parametrize("message", [
    "换个城市", "另外一件事", "我不想要这个", "重新提交", "重新申请", "那上海呢", "帮我查一下杭州的差旅政策",
    "ok but change the date", "", "   ", "好的" * 20, "by the way, ok",
    "nothing", "okinawa", "了", "please", "谢谢，另外帮我订个酒店", "好的，帮我再订一张回程票",
    "sure, and book a hotel too",
])
def test_not_continuations(message):
    assert not SIGNALS.is_continuation(message)


@pytest.mark.parametrize("message", ["好的，重新提交", "确认，另外一件事", "好的 by the way", "继续换个"])
def test_a_topic_switch_phrase_inside_a_continuation_vetoes_it(message):
    """The veto looks for phrases inside the message, not for the whole message: each of these is made of
    continuation words (or starts like a continuation) and still switches topic."""
    assert not SIGNALS.is_continuation(message)


def test_the_veto_does_real_work():
    # "重新提交" is made only of continuation words ("重新" + "提交"), so without the veto it would pass
    bare = RoutingSignals.of(["重新", "提交"], [])
    assert bare.is_continuation("重新提交")
    assert not RoutingSignals.of(["重新", "提交"], ["重新提交"]).is_continuation("重新提交")
    assert bare.is_continuation("好的，重新提交") is False  # "好的" is no word of this list
    assert RoutingSignals.of(["好的", "重新", "提交"], []).is_continuation("好的，重新提交")
    assert not RoutingSignals.of(["好的", "重新", "提交"], ["重新提交"]).is_continuation("好的，重新提交")


def test_fillers_alone_never_continue_and_whole_words_only():
    signals = RoutingSignals.of(["ok", "no"], [], fillers=["please", "吧"])
    assert signals.is_continuation("ok please") and signals.is_continuation("no吧")
    assert not signals.is_continuation("please") and not signals.is_continuation("吧")
    assert not signals.is_continuation("nothing") and not signals.is_continuation("oklahoma")


def test_normalise():
    assert normalise("  ＯＫ！！ ") == "ok"
    assert normalise("继续🙂") == "继续"
    assert normalise("好的。。。") == "好的"


def test_quick_actions_keep_the_configured_order():
    assert SIGNALS.quick_actions()[:3] == ["确定", "确认", "提交"]


@pytest.mark.parametrize(("answer", "agent"), [
    ('{"agent": "InfoAgent"}', "InfoAgent"),
    ('```json\n{"agent": " BookingAgent "}\n```', "BookingAgent"),
    ("InfoAgent", None), ('{"agent": 3}', None), ("{broken", None), ('["InfoAgent"]', None),
])
def test_parse_intent(answer, agent):
    assert parse_intent(answer) == agent


def test_parse_suggestions():
    assert parse_suggestions('{"questions": ["确认", "确认", " x ", 5, "", "a", "b", "c"]}') == ["确认", "x", "a", "b"]
    assert parse_suggestions("no json") == []
    assert parse_suggestions('{"questions": "确认"}') == []


def test_default_profiles_load_with_the_master_first():
    profiles = load_profiles(None, TOOL_NAMES)
    assert list(profiles)[0] == "MasterAgent"
    assert {"InfoAgent", "BookingAgent", "CoderAgent"} <= set(profiles)
    assert DEFAULT_PROFILES_FILE.exists()


@pytest.mark.parametrize(("body", "field"), [
    ('[[agent]]\nname = "lower"\ndescription = "d"\nsystem_prompt = "p"\ntools = []\nkind = "master"\n', "`name`"),
    ('[[agent]]\nname = "A"\nsystem_prompt = "p"\ntools = []\nkind = "master"\n', "`description`"),
    ('[[agent]]\nname = "A"\ndescription = "d"\nsystem_prompt = "p"\ntools = "x"\nkind = "master"\n', "`tools`"),
    ('[[agent]]\nname = "A"\ndescription = "d"\nsystem_prompt = "p"\ntools = []\n', "`kind`"),
    ('[[agent]]\nname = "A"\ndescription = "d"\nsystem_prompt = "p"\ntools = []\nkind = "boss"\n', "`kind`"),
    ("agent = 1\n", "[[agent]]"),
    ("not toml [", "not valid TOML"),
])
def test_bad_profile_files_name_the_file_and_field(tmp_path, body, field):
    path = tmp_path / "p.toml"
    path.write_text(body)
    with pytest.raises(ProfileError) as err:
        load_profiles(path, TOOL_NAMES)
    assert str(path) in str(err.value) and field in str(err.value)


def test_bad_signals_file(tmp_path):
    path = tmp_path / "s.toml"
    path.write_text('continuation = ["ok"]\ntopic_switch = "x"\n')
    with pytest.raises(SignalsError, match="topic_switch"):
        load_routing_signals(path)


@pytest.mark.parametrize(("body", "says"), [
    (None, "file not found"), ("continuation = [", "not valid TOML"),
    ('topic_switch = []\n', "`continuation`"), ('continuation = ["ok"]\n', "`topic_switch`"),
    ('continuation = ["ok", 1]\ntopic_switch = []\n', "`continuation`"),
    ('continuation = ["ok"]\ntopic_switch = []\nfillers = "吧"\n', "`fillers`"),
])
def test_a_signals_file_that_cannot_be_used_is_refused_with_its_name(tmp_path, body, says):
    """The two lists the fast path cannot do without are never taken from the built-in file."""
    path = tmp_path / "s.toml"
    if body is not None:
        path.write_text(body)
    with pytest.raises(SignalsError) as err:
        load_routing_signals(path)
    assert str(path) in str(err.value) and says in str(err.value)


def test_a_broken_built_in_file_is_a_signals_error_too(tmp_path, monkeypatch):
    path, broken = tmp_path / "s.toml", tmp_path / "default.toml"
    path.write_text('continuation = ["ok"]\ntopic_switch = []\n')
    broken.write_text("fillers = [")
    monkeypatch.setattr(fast_path, "DEFAULT_SIGNALS_FILE", broken)
    with pytest.raises(SignalsError, match="not valid TOML"):
        load_routing_signals(path)


def test_each_list_of_a_signals_file_lands_in_its_own_field(tmp_path):
    path = tmp_path / "s.toml"
    path.write_text('continuation = ["ok", " 确认 ", "ok"]\ntopic_switch = ["换个"]\nfillers = ["吧"]\n'
                    'action = ["submit"]\nreference = ["这家"]\nnew_request = ["帮我"]\n'
                    'attribute_prefix = ["周边"]\n')
    signals = load_routing_signals(path)
    assert (signals.quick_action_words, signals.topic_switch) == (("ok", "确认"), ("换个",))
    assert (signals.reference, signals.new_request, signals.attribute_prefix) == (("这家",), ("帮我",), ("周边",))
    assert signals.fillers == {("吧",)} and signals.action == {("submit",)}
    assert signals.quick_actions() == ["ok", "确认"]


def test_the_built_in_lists_all_load():
    signals = load_routing_signals(None)
    assert signals.quick_actions()[:3] == ["确定", "确认", "提交"] and len(signals.quick_actions()) == 40
    assert all((signals.fillers, signals.action, signals.reference, signals.new_request, signals.attribute_prefix))


def test_quick_actions_stop_at_forty_words():
    words = [f"w{i}" for i in range(50)]
    assert RoutingSignals.of(words, []).quick_actions() == words[:40]
    assert RoutingSignals.of(words, []).quick_actions(limit=3) == words[:3]


def test_a_signals_file_without_the_optional_lists_takes_the_built_in_ones(tmp_path):
    path = tmp_path / "s.toml"
    path.write_text('continuation = ["ok", "确认"]\ntopic_switch = []\n')
    signals = load_routing_signals(path)
    assert signals.is_continuation("确认吧") and signals.fillers == SIGNALS.fillers
    assert not signals.is_continuation("好的")  # the continuation list itself is the file's


def test_profile_keywords(tmp_path):
    profiles = load_profiles(None, TOOL_NAMES)
    assert "酒店" in profiles["BookingAgent"].keywords and profiles["MasterAgent"].keywords == ()
    path = tmp_path / "p.toml"
    path.write_text('[[agent]]\nname = "A"\ndescription = "d"\nsystem_prompt = "p"\ntools = []\nkind = "master"\n'
                    'keywords = ["x", 3]\n')
    with pytest.raises(ProfileError, match="`keywords`"):
        load_profiles(path, TOOL_NAMES)
