"""Which agent is the active one after a message went through the pipeline or a background agent reasoned, through
the real server: the agent that answered the user stays active (docs/API.md, the fast path)."""

from __future__ import annotations

import threading

from modules.statuses import Route, TaskStatus
from test.conftest import wait_until
from test.scripted_llm import match_system, text, tool_calls

ROUTER = match_system("You are RoutingAgent")
MASTER = match_system("You are MasterAgent")
INFO = match_system("You are InfoAgent_1 ")
CODER = match_system("You are CoderAgent_1 ")


def test_a_continuation_after_a_switch_to_the_same_agent_goes_on_with_it(server, llm):
    """The pipeline sent "换个城市" back to the agent the user talks with: it answered, so it is the active one."""
    llm.script(text('{"query": "杭州差旅政策", "agent": "InfoAgent"}'), match=ROUTER)
    llm.script(text("杭州：住宿每晚 500 元以内。需要我再查别的城市吗？"), match=INFO)
    first = server.send("帮我查一下杭州的差旅政策")
    cid = first["conversation_id"]
    assert server.wait_task(first["task_id"])["status"] == TaskStatus.SUCCEEDED

    llm.script(text('{"query": "换一个城市查差旅政策", "agent": "InfoAgent"}'), match=ROUTER)
    llm.script(text("好的，换哪个城市？"), match=INFO)
    switched = server.send("换个城市", cid)
    assert (switched["route"], switched["target_agent"]) == (Route.PIPELINE, "InfoAgent_1")
    assert server.wait_task(switched["task_id"])["status"] == TaskStatus.SUCCEEDED

    for message in (" 好的，继续！", "好的，继续！"):
        llm.script(text("好的，继续按上海的标准查。要我再对比一下北京吗？"), match=INFO)
        sent = server.send(message, cid)
        assert (sent["route"], sent["target_agent"]) == (Route.FAST_PATH, "InfoAgent_1"), message
        assert server.wait_task(sent["task_id"])["status"] == TaskStatus.SUCCEEDED


def test_a_background_sub_agent_reasoning_does_not_take_the_user_from_the_agent_they_talk_with(server, llm):
    """The pre-reasoning hook records only turns that serve the user's messages: a sub-agent working on the
    master's task in the background reasons meanwhile, and the user's next "好的" still goes to the master."""
    coder_thinks = threading.Event()
    llm.script(text('{"query": "帮我写个脚本", "agent": "MasterAgent"}'), match=ROUTER)
    llm.script(tool_calls(("create_sub_agent", {"role": "CoderAgent", "task": "write the script",
                                                "run_in_background": True})), match=MASTER)
    llm.script(text("已安排 CoderAgent 在后台写脚本。要我同时整理需求吗？"), match=MASTER)
    llm.script(text("脚本写好了。", wait=coder_thinks), match=CODER)
    first = server.send("帮我写个脚本")
    cid = first["conversation_id"]
    assert server.wait_task(first["task_id"])["status"] == TaskStatus.SUCCEEDED
    wait_until(lambda: any(CODER(r.body) for r in llm.requests), what="the background sub-agent's model call")

    llm.script(text("好的，我来整理需求。"), match=MASTER)
    sent = server.send("好的", cid)
    try:
        assert (sent["route"], sent["target_agent"]) == (Route.FAST_PATH, "MasterAgent")
        assert server.wait_task(sent["task_id"])["status"] == TaskStatus.SUCCEEDED
    finally:
        llm.script(text("CoderAgent_1 已写好脚本。"), match=MASTER)  # the notice's turn
        coder_thinks.set()


def test_a_message_correcting_away_from_the_active_agent_asks_the_model_and_its_agent_stays_active(server, llm):
    """"不是这个" after a reply never goes to the agent it corrects (it would stay active, and take the next
    follow-ups too): the routing request decides, and the agent it names is the active one from then on."""
    llm.script(text('{"query": "杭州差旅政策", "agent": "InfoAgent"}'), match=ROUTER)
    llm.script(text("杭州：住宿每晚 500 元以内。"), match=INFO)
    first = server.send("帮我查一下杭州的差旅政策")
    cid = first["conversation_id"]
    assert server.wait_task(first["task_id"])["status"] == TaskStatus.SUCCEEDED

    booking = match_system("You are BookingAgent_1 ")
    llm.script(text('{"query": "不是查政策，是要订杭州的酒店", "agent": "BookingAgent"}'), match=ROUTER)
    llm.script(text("好的，杭州哪天入住？住几晚？"), match=booking)
    corrected = server.send("不是这个", cid)
    assert (corrected["route"], corrected["target_agent"]) == (Route.PIPELINE, "BookingAgent_1")
    assert server.wait_task(corrected["task_id"])["status"] == TaskStatus.SUCCEEDED

    llm.script(text("好的，3月12日入住两晚，确认预订吗？"), match=booking)
    follow = server.send("3月12号，两晚", cid)
    assert (follow["route"], follow["target_agent"]) == (Route.FAST_PATH, "BookingAgent_1")
    assert server.wait_task(follow["task_id"])["status"] == TaskStatus.SUCCEEDED
