"""The fast path's decision with its trained model (modules/multi_agent/follow_up_model.py): the issue's example
messages with description-only teams, what no model overrides, determinism and speed."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from modules.agents.profiles import load_profiles
from modules.multi_agent.domain_vocabulary import TeamVocabulary
from modules.multi_agent.fast_path import load_routing_signals
from modules.multi_agent.follow_up import UNDECIDED, Verdict, judge
from modules.multi_agent.follow_up_features import delexicalised, features
from modules.multi_agent.follow_up_model import WEIGHTS, FollowUpModel, Thresholds, decide, load_model
from modules.tools.agent_tools import AGENT_TOOLS
from modules.tools.run_command import RUN_COMMAND

SIGNALS = load_routing_signals(None)
BENCH = Path(__file__).resolve().parents[2] / "bench"


def team(path: Path) -> TeamVocabulary:
    profiles = load_profiles(path, {t.name for t in (RUN_COMMAND, *AGENT_TOOLS)})
    return TeamVocabulary.of(profiles, SIGNALS, use_keywords=False)  # what a new user writes: descriptions only


EN, ZH = team(BENCH / "multiwoz" / "profiles.toml"), team(BENCH / "crosswoz" / "profiles.toml")

FOLLOW_UPS = [  # (team, active agent, its last reply, the user's message)
    (EN, "HotelAgent", "Booked, your reference is XYZ. Is there anything else I can help with?",
     "No, that's all I need. Thanks."),
    (EN, "HotelAgent", "Acorn Guest House is a guesthouse in the north with free parking.",
     "Could I get the full address as well?"),
    (EN, "TrainAgent", "What day would you like to leave?", "I would like to leave on Saturday."),
    (EN, "TrainAgent", "TR1234 leaves at 09:00 and arrives at 09:52. Would you like me to book it?",
     "Yes, please book it for 2 people."),
    (ZH, "RestaurantAgent", "推荐您去全聚德(前门店)。", "人均消费多少？"),
    (ZH, "HotelAgent", "北京贵都大酒店的电话是010-12345678。", "好的，谢谢"),
]
SWITCHES = [
    (ZH, "RestaurantAgent", "推荐您去全聚德(前门店)，附近有北京贵都大酒店。", "它是一家什么类型的酒店？"),
    (ZH, "MetroAgent", "您可以乘坐地铁1号线到天安门东站。", "请在北京贵都大酒店周边的餐馆里给我推荐一家"),
    (EN, "AttractionAgent", "Kettle's Yard is free to enter. Anything else?",
     "I want a taxi from the restaurant that I am at"),
    (EN, "TrainAgent", "Booked, reference ABC123. Anything else?",
     "I am also looking for a hotel in the north with free parking."),
    (EN, "RestaurantAgent", "Pizza Hut is in the centre.", "no, I meant the hotel"),
    (ZH, "RestaurantAgent", "推荐您去全聚德(前门店)。", "不是这个"),
]


@pytest.mark.parametrize(("vocabulary", "active", "reply", "message"), FOLLOW_UPS)
def test_the_issues_follow_ups_take_the_fast_path(vocabulary, active, reply, message):
    assert decide(SIGNALS, message, reply, vocabulary.view(active)).continues


@pytest.mark.parametrize(("vocabulary", "active", "reply", "message"), SWITCHES)
def test_the_issues_switches_and_corrections_are_left_to_the_routing_request(vocabulary, active, reply, message):
    assert decide(SIGNALS, message, reply, vocabulary.view(active)).decision == UNDECIDED


def test_no_model_overrides_a_topic_switch_phrase_or_takes_a_message_naming_another_domain():
    sure = FollowUpModel({"bias": 30.0}, {"zh": Thresholds(0.5, 0.5), "en": Thresholds(0.5, 0.5)})
    view = ZH.view("RestaurantAgent")
    assert decide(SIGNALS, "不是这个", "推荐您去全聚德。", view, model=sure).reason == "topic-switch phrase"
    assert not decide(SIGNALS, "它是一家什么类型的酒店？", "推荐您去全聚德。", view, model=sure).continues
    # a message the rules leave undecided and that names no other domain: the sure model takes it
    assert decide(SIGNALS, "嗯嗯嗯", "推荐您去全聚德。", view, model=sure).continues


def test_a_doubtful_model_holds_back_what_the_rules_let_through():
    doubtful = FollowUpModel({"bias": -30.0}, {"zh": Thresholds(0.5, 0.5), "en": Thresholds(0.5, 0.5)})
    view = ZH.view("RestaurantAgent")
    assert judge(SIGNALS, "人均消费多少？", "推荐您去全聚德。", view).continues
    held = decide(SIGNALS, "人均消费多少？", "推荐您去全聚德。", view, model=doubtful)
    assert held.decision == UNDECIDED and held.reason.startswith("the model is unsure")


def test_domain_words_are_read_as_the_active_agents_or_anothers():
    # "hotel" is the hotel agent's own, an address several agents describe: shared
    assert delexicalised("could i get the hotel address", EN.view("HotelAgent"))[-2:] == ["<O>", "<S>"]
    assert "<F>" in delexicalised("i need a taxi", EN.view("HotelAgent"))
    names = features(SIGNALS, "I need a taxi", "Anything else?", EN.view("HotelAgent"),
                     Verdict(UNDECIDED, "another agent's term 'taxi'"))
    assert "r=another agent's term" in names and "lang=en" in names and "w=<F>" in names


def test_the_shipped_model_is_small_deterministic_and_fast():
    data = json.loads(WEIGHTS.read_text(encoding="utf-8"))
    assert set(data["thresholds"]) == {"zh", "en"} and WEIGHTS.stat().st_size < 1_000_000
    view, reply = EN.view("HotelAgent"), "Acorn Guest House is a guesthouse in the north with free parking."
    model = load_model()
    names = features(SIGNALS, "Could I get the full address as well?", reply, view,
                     judge(SIGNALS, "Could I get the full address as well?", reply, view))
    assert model.probability(names) == load_model().probability(list(names))
    messages = [f"Could I get the phone number of place {i} as well?" for i in range(200)]
    started = time.perf_counter()
    for m in messages:
        decide(SIGNALS, m, reply, view)
    assert (time.perf_counter() - started) / len(messages) < 0.005  # < 1 ms on a quiet machine; bound for CI load


def test_a_reply_that_names_only_another_agents_domain_is_a_feature_of_its_own():
    # the linear model cannot form "names another's domain and not its own" from the marks alone
    view = EN.view("TrainAgent")
    handed_over = features(SIGNALS, "Yes please.", "Shall I look for a hotel in the north as well?", view,
                           judge(SIGNALS, "Yes please.", "Shall I look for a hotel in the north as well?", view))
    assert "reply_q_about=foreign" in handed_over and "about=none|foreign" in handed_over
    own = features(SIGNALS, "Yes please.", "Shall I book the train for you?", view,
                   judge(SIGNALS, "Yes please.", "Shall I book the train for you?", view))
    assert "reply_q_about=own" in own


def test_the_sgd_training_set_keeps_its_own_splits_and_labels_a_change_of_service_a_switch():
    from bench.fastpath.woz import SGD  # the compact table of bench/sgd/ (bench/sgd/README.md)

    dialogues = SGD.load()
    assert {d[0].split for d in dialogues} == {"train", "dev"}
    turns = [t for d in dialogues for t in d[1:]]
    switches = [t for t in turns if not t.cont]
    assert switches and all(t.agent.endswith("Agent") and t.agent != "MasterAgent" for t in switches)
    assert 0.05 < len(switches) / len(turns) < 0.3  # multi-service dialogues: mostly follow-ups, some switches
    profiles = load_profiles(SGD.profiles, {t.name for t in (RUN_COMMAND, *AGENT_TOOLS)})
    assert set(SGD.agents.values()) <= set(profiles) and not any(p.keywords for p in profiles.values())
