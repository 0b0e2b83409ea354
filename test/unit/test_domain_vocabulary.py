"""Each agent's domain read from its profile's own text (modules/multi_agent/domain_vocabulary.py): which terms of a
message name the active agent's domain, which another's, with no keywords written."""

from __future__ import annotations

import pytest

from modules.agents.profiles import AgentProfile
from modules.multi_agent.domain_vocabulary import TeamVocabulary, stem
from modules.multi_agent.fast_path import load_routing_signals

SIGNALS = load_routing_signals(None)


def profile(name: str, description: str, prompt: str = "You help.", keywords: tuple[str, ...] = (),
            kind: str = "sub_agent") -> AgentProfile:
    return AgentProfile(name, description, prompt, (), kind=kind, keywords=keywords)


TEAM = {p.name: p for p in (
    profile("MasterAgent", "Greets the traveller.", kind="master"),
    profile("RestaurantAgent", "北京的餐馆推荐：按菜品和人均消费找餐馆，提供地址和电话。"
                               "Finds restaurants by food and price."),
    profile("HotelAgent", "北京的酒店推荐：按价格和设施找酒店，提供地址和电话。"
                          "Finds hotels and guesthouses with parking."),
    profile("TaxiAgent", "北京出租车：在两个地点之间叫车。Orders a taxi between two places."),
)}
VOCABULARY = TeamVocabulary.of(TEAM, SIGNALS)


def terms(role: str, text: str) -> tuple[set[str], set[str]]:
    own, foreign = VOCABULARY.view(role).spans(text)
    return {s.term for s in own}, {s.term for s in foreign}


@pytest.mark.parametrize(("word", "stemmed"), [
    ("policies", "policy"), ("booked", "book"), ("booking", "book"), ("hotels", "hotel"), ("running", "run"),
    ("guesthouses", "guesthous"), ("guesthouse", "guesthous"), ("address", "address"), ("taxis", "taxi"),
])
def test_a_light_stemmer_joins_the_forms_of_a_word(word, stemmed):
    assert stem(word) == stemmed


def test_a_message_naming_another_agents_domain_has_a_foreign_term_in_either_language():
    assert "酒店" in terms("RestaurantAgent", "它是一家什么类型的酒店")[1]
    assert "餐馆" in terms("HotelAgent", "请在酒店周边的餐馆里给我推荐")[1]
    assert "taxi" in terms("HotelAgent", "i want a taxi from the hotel")[1]
    assert "hotel" in terms("RestaurantAgent", "are there hotels with parking nearby")[1]  # plural, stemmed


def test_the_active_agents_own_terms_and_a_shared_property_that_is_nobodys():
    own, foreign = terms("HotelAgent", "这家酒店的地址和电话是多少")
    assert "酒店" in own and not {"地址", "电话"} & (own | foreign)  # two descriptions have them alike
    assert "guesthous" in terms("HotelAgent", "any guesthouses in the north")[0]


def test_a_term_every_sub_agent_has_names_nobody_and_the_signals_words_are_no_terms():
    assert "北京" not in VOCABULARY.view("MasterAgent").foreign  # every sub-agent's description has it
    team = {**TEAM, "MasterAgent": profile("MasterAgent", "北京的旅客助手。", kind="master")}
    view = TeamVocabulary.of(team, SIGNALS).view("RestaurantAgent")
    assert "北京" not in view.own | view.foreign
    own, foreign = terms("RestaurantAgent", "ok please, the one with it")
    assert not own and not foreign


def test_keywords_boost_a_term_to_its_agent():
    team = {**TEAM, "TaxiAgent": profile("TaxiAgent", "北京出租车：在两个地点之间叫车。", keywords=("打车", "车牌"))}
    with_keywords = TeamVocabulary.of(team, SIGNALS)
    without = TeamVocabulary.of(team, SIGNALS, use_keywords=False)
    assert "车牌" in with_keywords.view("TaxiAgent").own and "车牌" in with_keywords.view("HotelAgent").foreign
    assert "车牌" not in without.view("HotelAgent").foreign


def test_the_masters_text_names_no_domain():
    """The master answers what the others do not cover: its words ("anything", "traveller") lead nowhere, while a
    lone sub-agent's words still lead away from the master."""
    master = profile("MasterAgent", "Greets the traveller and answers anything the other agents do not cover.",
                     kind="master")
    view = TeamVocabulary.of({**TEAM, "MasterAgent": master}, SIGNALS).view("RestaurantAgent")
    assert not {"anyth", "traveller", "greet"} & (view.own | view.foreign)
    alone = TeamVocabulary.of({"MasterAgent": master, "InfoAgent": profile("InfoAgent", "Explains travel policies.")},
                              SIGNALS)
    assert "policy" in alone.view("MasterAgent").foreign and "policy" in alone.view("InfoAgent").own
