"""The fast path's context rules (`follow_up.judge`) and the combined routing answer, without a server."""

from __future__ import annotations

import dataclasses

import pytest

from modules.agents.profiles import load_profiles
from modules.multi_agent.domain_vocabulary import DomainView, TeamVocabulary
from modules.multi_agent.fast_path import load_routing_signals
from modules.multi_agent.follow_up import ReplyContext, judge
from modules.multi_agent.routing_stage import parse_combined
from test.unit.teams import TOOL_NAMES

SIGNALS = load_routing_signals(None)
PROFILES = load_profiles(None, TOOL_NAMES)
VOCABULARY = TeamVocabulary.of(PROFILES, SIGNALS)


def verdict(message: str, reply: str | None, active: str, offered: tuple[str, ...] = ()):
    return judge(SIGNALS, message, reply, VOCABULARY.view(active), offered)


@pytest.mark.parametrize(("message", "reply", "active"), [
    ("那上海呢", "杭州属二类城市：住宿每晚不超过 500 元。", "InfoAgent"),
    ("第二个", "1. 全季 458 元/晚；2. 汉庭 320 元/晚。选哪家？", "BookingAgent"),
    ("靠窗的", "有靠窗和过道的座位，要哪种？", "BookingAgent"),
    ("3月12号", "几号出发？", "BookingAgent"),
    ("the second one", "Options: 1. 8:05, 2. 9:30. Which one?", "BookingAgent"),
    ("what about Boston?", "NYC: hotels up to $300 a night.", "InfoAgent"),
    ("房间含早餐吗", "已预订，确认号 HZ5821。", "BookingAgent"),  # a term of its own domain
    ("确认", "G7502 08:05，二等座 73 元。确认预订吗？", "BookingAgent"),
    ("👍", "Done.", "CoderAgent"),
])
def test_follow_ups_go_on_with_the_active_agent(message, reply, active):
    assert verdict(message, reply, active).continues


@pytest.mark.parametrize(("message", "reply", "active"), [
    ("那帮我订上海的酒店", "上海：住宿每晚 600 元以内。", "InfoAgent"),  # another agent's term
    ("谢谢，另外帮我写个脚本", "不客气。", "InfoAgent"),  # topic switch phrased politely
    ("取消", "南京属二类城市，住宿每晚不超过 500 元。", "InfoAgent"),  # an action word after a plain statement
    ("submit", "Austin: meals $64 a day. Anything else?", "InfoAgent"),
    ("I want to learn Rust", "Here is the result.", "CoderAgent"),  # a new request that refers to nothing
    ("今天天气怎么样", "已预订。", "BookingAgent"),  # no tie to the booking
    ("其实我想问下年终奖什么时候发", "好的，有需要随时叫我。", "MasterAgent"),  # "其实" holds no reference
])
def test_rules_leave_the_rest_to_the_model(message, reply, active):
    assert not verdict(message, reply, active).continues


@pytest.mark.parametrize(("message", "reply", "active"), [
    ("好的，重新提交", "报销单已填好。确认提交吗？", "InfoAgent"),
    ("换个城市，那上海呢", "杭州属二类城市：住宿每晚不超过 500 元。", "InfoAgent"),  # else: refers back
    ("另外，第二个呢", "1. 全季 458 元/晚；2. 汉庭 320 元/晚。选哪家？", "BookingAgent"),
    ("by the way, the second one", "Options: 1. 8:05, 2. 9:30. Which one?", "BookingAgent"),
    ("换一个，靠窗的", "有靠窗和过道的座位，要哪种？", "BookingAgent"),  # else: a term of its own domain
])
def test_a_topic_switch_phrase_anywhere_in_the_message_vetoes_the_context_rules(message, reply, active):
    """The veto is the rules' first word on the whole message, not on a message that is only the phrase: each
    of these would otherwise go on with the active agent (it refers back, or names the agent's own term)."""
    decided = verdict(message, reply, active)
    assert (decided.decision, decided.reason) == ("undecided", "topic-switch phrase")


def test_an_offered_chip_confirms_even_after_a_plain_statement():
    assert not verdict("确认", "Here is the plan: A, then B.", "MasterAgent").continues
    assert verdict("确认", "Here is the plan: A, then B.", "MasterAgent", offered=("确认", "换个方案")).continues


def test_a_term_after_an_attribute_prefix_belongs_to_the_current_subject():
    domain = DomainView.of_terms(own=("餐馆", "人均"), foreign=("景点", "门票"))
    assert judge(SIGNALS, "这家餐馆周边有哪些景点啊？", "推荐您去讲礼驴肉馆。", domain).continues
    assert not judge(SIGNALS, "吃完饭我想找一个门票免费的景点", "推荐您去讲礼驴肉馆。", domain).continues


@pytest.mark.parametrize(("message", "reply", "follows"), [
    ("它家周边有哪些餐馆？", "您可以在北宫门站下车。", True),  # a reference: the station it just named
    ("北宫门站周边有哪些餐馆？", "您可以在北宫门站下车。", True),  # a name of its last reply
    ("周边有哪些餐馆？", "您可以在北宫门站下车。", True),  # no subject: the current one
    ("颐和园周边有哪些餐馆？", "您可以在北宫门站下车。", False),  # a place it never named: a request for restaurants
    ("这家酒店周边有哪些餐馆？", "您可以在北宫门站下车。", False),  # another agent's subject
])
def test_another_agents_domain_after_an_attribute_prefix_needs_the_active_agents_subject(message, reply, follows):
    domain = DomainView.of_terms(own=("地铁", "地铁站"), foreign=("餐馆", "酒店"))
    assert judge(SIGNALS, message, reply, domain).continues is follows


def test_reply_context():
    assert ReplyContext("确认预订吗？").asked_question and ReplyContext("确认预订吗？").invites_action
    assert ReplyContext("1. A\n2. B").offered_options
    assert not ReplyContext("不客气，有问题随时问我。").invites_action


@pytest.mark.parametrize(("answer", "query", "agent"), [
    ('{"query": "上海的差旅政策", "agent": "InfoAgent"}', "上海的差旅政策", "InfoAgent"),
    ('```json\n{"agent": "BookingAgent"}\n```', "那上海呢", "BookingAgent"),
    ('{"query": "x", "agent": "Nobody"}', "x", "MasterAgent"),
    ("not json", "那上海呢", "MasterAgent"),
])
def test_parse_combined(answer, query, agent):
    route = parse_combined(answer, "那上海呢", PROFILES, "MasterAgent")
    assert (route.query, route.agent) == (query, agent)


# -- out of the box: description-only profiles, English follow-ups, short switches and corrections -------------

PLAIN = {n: dataclasses.replace(p, keywords=()) for n, p in PROFILES.items()}
PLAIN_VOCABULARY = TeamVocabulary.of(PLAIN, SIGNALS, use_keywords=False)


def plain_verdict(message: str, reply: str, active: str):
    return judge(SIGNALS, message, reply, PLAIN_VOCABULARY.view(active))


@pytest.mark.parametrize(("message", "reply"), [
    ("No, that's all I need. Thanks.", "Booked: the Hilton, 2 nights. Anything else I can help with?"),
    ("Thank you for all of your help!", "Your booking reference is 7GAWK763."),
    ("I would like to leave on Saturday.", "What day would you like to leave?"),  # words of its question
    ("Could I get the full address as well?", "Pizza Hut City Centre serves cheap Italian food."),
    ("actually make it two rooms, my manager is coming too", "One room at the Hilton, March 3-5. Shall I book it?"),
    ("不对，是下周四入住", "静安的全季酒店 458 元/晚，下周三入住两晚，确认吗？"),
])
def test_english_follow_ups_and_corrections_go_on_with_the_agent_without_keywords(message, reply):
    assert plain_verdict(message, reply, "BookingAgent").continues


@pytest.mark.parametrize(("message", "reply", "active"), [
    ("好嘞，那帮我订一张下周一去新加坡的商务舱", "新加坡：住宿每晚不超过 1200 元。", "InfoAgent"),  # no ellipsis
    ("never mind, book a taxi from the airport instead", "Boston: meals $79 a day.", "InfoAgent"),  # "Books trips"
    ("and can you fix the shell command too?", "Boston: meals $79 a day.", "InfoAgent"),  # CoderAgent's words
    ("这个超标了吗", "已预订，确认号 HZ5822。", "BookingAgent"),  # the policy agent's: its description says 超标
])
def test_short_requests_naming_another_agents_domain_leave_the_fast_path_without_keywords(message, reply, active):
    assert not plain_verdict(message, reply, active).continues
