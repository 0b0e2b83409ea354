"""The multi-agent features in the browser: background notices, sub-agents in the team panel,
questions to the user (human in the loop), suggestion chips and the fast path."""

from __future__ import annotations

import json
import re
import threading
import time

from playwright.sync_api import expect

from modules.event_catalogue import SuggestionsEvent
from modules.statuses import AgentState, MessageSource, Route, TaskStatus
from test.browser.helpers import assistant, conversation_id, only_task, send, suggest_for, wait_connected
from test.scripted_llm import match_system, text, tool_calls

MASTER = match_system("You are MasterAgent")


def sub(n: int, role: str = "InfoAgent"):
    return match_system(f"You are {role}_{n} ")


def test_a_background_command_notice_is_shown_exactly_once(page, ui_server, llm):
    follow_up = threading.Event()
    llm.script(
        tool_calls(("run_command", {"command": "echo bg-finished", "run_in_background": True})),
        text("Started it in the background."),
        text("The background job printed bg-finished.", wait=follow_up),
        match=MASTER,
    )
    send(page, "run a job in the background")
    notice = page.get_by_test_id("notice")
    expect(notice).to_have_count(1)
    expect(notice).to_have_attribute("data-source", MessageSource.BACKGROUND_COMMAND)
    expect(notice.get_by_test_id("notice-text")).to_contain_text("bg-finished")
    follow_up.set()
    last = assistant(page).last
    expect(last.get_by_test_id("assistant-text")).to_have_text("The background job printed bg-finished.")
    expect(last).to_have_attribute("data-done", "true")
    expect(page.get_by_test_id("stop-button")).to_have_count(0)
    expect(page.get_by_test_id("notice")).to_have_count(1)
    expect(page.get_by_test_id("user-message")).to_have_count(1)

    # the stored history shows it once too, and a reconnect replays nothing twice
    page.reload()
    expect(assistant(page)).to_have_count(2)
    expect(page.get_by_test_id("notice")).to_have_count(1)
    page.evaluate("window.__agentChat.dropConnection()")
    expect(page.get_by_test_id("connection-status")).to_have_attribute("data-state", "connected")
    expect(page.get_by_test_id("notice")).to_have_count(1)
    expect(assistant(page)).to_have_count(2)


def test_team_panel_follows_a_sub_agent_live(page, ui_server, llm):
    sub_gate = threading.Event()
    llm.script(
        tool_calls(("create_sub_agent", {"role": "InfoAgent", "task": "look up the travel policy"})),
        text("InfoAgent_1 is on it."),
        text("The policy allows economy class."),
        match=MASTER,
    )
    llm.script(text("Economy class only, says the policy.", wait=sub_gate), match=sub(1))
    send(page, "what does the travel policy say?")
    team = page.get_by_test_id("team-panel")
    helper = team.get_by_test_id("agent-row").filter(has_text="InfoAgent_1")
    expect(helper).to_have_attribute("data-state", AgentState.RUNNING)
    expect(helper.get_by_test_id("agent-role")).to_have_text("InfoAgent")
    expect(page.get_by_test_id("sub-agent-waiting")).to_contain_text("InfoAgent_1")
    master_row = team.get_by_test_id("agent-row").filter(has_text="MasterAgent")
    expect(master_row).to_have_attribute("data-state", AgentState.COMPLETED)

    # the sub-agent's own history, live, in the side view
    helper.click()
    side = page.get_by_test_id("agent-history")
    expect(side.get_by_test_id("agent-history-title")).to_have_text("InfoAgent_1")
    expect(side.get_by_test_id("notice-text")).to_contain_text("look up the travel policy")
    sub_gate.set()
    expect(helper).to_have_attribute("data-state", AgentState.COMPLETED)
    expect(side.get_by_test_id("assistant-text")).to_have_text("Economy class only, says the policy.")

    # the main chat: the sub-agent's work is not streamed into it; its completion is one notice
    notice = page.get_by_test_id("chat").get_by_test_id("notice")
    expect(notice).to_have_count(1)
    expect(notice).to_have_attribute("data-source", MessageSource.SUB_AGENT)
    chat_replies = assistant(page).get_by_test_id("assistant-text")
    expect(chat_replies.last).to_have_text("The policy allows economy class.")
    expect(chat_replies).to_have_text(["InfoAgent_1 is on it.", "The policy allows economy class."])
    expect(page.get_by_test_id("sub-agent-waiting")).to_have_count(0)


def _ask_answer(body: dict) -> str:
    tool = [m for m in body["messages"] if m["role"] == "tool"][-1]
    return json.loads(tool["content"])["answer"]


def test_answering_a_question_through_its_card(page, ui_server, llm):
    llm.script(
        tool_calls(("ask_user", {"question": "Which seat do you prefer?", "options": ["Window", "Aisle"]})),
        text("Booked a window seat."),
        match=MASTER,
    )
    send(page, "book me a seat")
    card = page.get_by_test_id("ask-card")
    expect(card.get_by_test_id("ask-question")).to_have_text("Which seat do you prefer?")
    expect(card.get_by_test_id("ask-option")).to_have_text(["Window", "Aisle"])
    expect(card).to_have_attribute("data-answered", "false")
    master_row = page.get_by_test_id("agent-row").filter(has_text="MasterAgent")
    expect(master_row).to_have_attribute("data-state", AgentState.WAITING)

    card.get_by_test_id("ask-option").filter(has_text="Window").click()
    expect(card).to_have_attribute("data-answered", "true")
    expect(card).to_have_attribute("data-answer", "Window")
    answer = page.get_by_test_id("user-message").last
    expect(answer.get_by_test_id("user-text")).to_have_text("Window")
    expect(answer.get_by_test_id("route-badge")).to_have_attribute("data-route", Route.HIL)
    expect(assistant(page).last.get_by_test_id("assistant-text")).to_have_text("Booked a window seat.")
    expect(page.get_by_test_id("user-message")).to_have_count(2)
    expect(page.get_by_test_id("ask-card")).to_have_count(1)
    assert _ask_answer(llm.agent_requests[-1].body) == "Window"

    # after a reload the card is still there, answered
    page.reload()
    card = page.get_by_test_id("ask-card")
    expect(card).to_have_attribute("data-answered", "true")
    expect(card).to_have_attribute("data-answer", "Window")
    expect(page.get_by_test_id("ask-option")).to_have_count(0)
    users = page.get_by_test_id("user-message")
    expect(users.get_by_test_id("user-text")).to_have_text(["book me a seat", "Window"])
    expect(users.last.get_by_test_id("route-badge")).to_have_attribute("data-route", Route.HIL)


def test_a_sub_agent_question_is_answered_with_free_text(page, ui_server, llm):
    llm.script(
        tool_calls(("create_sub_agent", {"role": "BookingAgent", "task": "book a hotel"})),
        text("BookingAgent_1 will handle it."),
        text("Your hotel is booked."),
        match=MASTER,
    )
    llm.script(
        tool_calls(("ask_user", {"question": "Which city?"})),
        text("Booked in Lisbon."),
        match=sub(1, "BookingAgent"),
    )
    send(page, "book a hotel for me")
    card = page.get_by_test_id("ask-card")
    expect(card.get_by_test_id("ask-question")).to_have_text("Which city?")
    expect(card).to_contain_text("BookingAgent_1")
    expect(card.get_by_test_id("ask-option")).to_have_count(0)
    card.get_by_test_id("ask-input").fill("Lisbon")
    card.get_by_test_id("ask-submit").click()
    expect(card).to_have_attribute("data-answer", "Lisbon")
    answer = page.get_by_test_id("user-message").last
    expect(answer.get_by_test_id("route-badge")).to_have_attribute("data-route", Route.HIL)
    expect(answer.get_by_test_id("route-badge")).to_contain_text("BookingAgent_1")
    replies = assistant(page).get_by_test_id("assistant-text")
    expect(replies).to_have_text(["BookingAgent_1 will handle it.", "Booked in Lisbon.", "Your hotel is booked."])
    expect(assistant(page).filter(has_text="Booked in Lisbon.")).to_have_attribute("data-agent", "BookingAgent_1")
    expect(page.get_by_test_id("user-message")).to_have_count(2)

    # a reload shows the same story: the sub-agent's part with the user comes from its own history
    page.reload()
    expect(assistant(page).get_by_test_id("assistant-text")).to_have_text(
        ["BookingAgent_1 will handle it.", "Booked in Lisbon.", "Your hotel is booked."]
    )
    card = page.get_by_test_id("ask-card")
    expect(card).to_have_attribute("data-answer", "Lisbon")
    users = page.get_by_test_id("user-message")
    expect(users.get_by_test_id("user-text")).to_have_text(["book a hotel for me", "Lisbon"])
    expect(users.last.get_by_test_id("route-badge")).to_have_attribute("data-route", Route.HIL)
    expect(page.get_by_test_id("notice")).to_have_count(1)


def test_a_suggestion_chip_takes_the_fast_path(page, ui_server, llm):
    llm.script(text("Shall I book the 9:40 train?"), text("Booked the 9:40 train."), match=MASTER)
    llm.script(text('{"questions": ["continue", "Show me later trains"]}'),
               match=suggest_for("find me a train to Porto"))
    send(page, "find me a train to Porto")
    chips = page.get_by_test_id("suggestion-chip")
    expect(chips).to_have_text(["continue", "Show me later trains"])
    first_reply = assistant(page).first
    expect(first_reply.locator("xpath=following-sibling::*[1]")).to_have_attribute("data-testid", "suggestions")

    page.reload()  # the latest reply's chips survive a reload
    expect(chips).to_have_text(["continue", "Show me later trains"])
    chips.filter(has_text="continue").click()
    expect(chips).to_have_count(0)
    sent = page.get_by_test_id("user-message").last
    expect(sent.get_by_test_id("user-text")).to_have_text("continue")
    expect(sent.get_by_test_id("route-badge")).to_have_attribute("data-route", Route.FAST_PATH)
    expect(assistant(page).last.get_by_test_id("assistant-text")).to_have_text("Booked the 9:40 train.")
    cid = conversation_id(page)
    msgs = ui_server.get(f"/api/conversations/{cid}/messages").json()["data"]
    assert [m["metadata"].get("route") for m in msgs if m["role"] == "user"] == [Route.PIPELINE, Route.FAST_PATH]


def test_terminating_a_sub_agent_from_its_side_view(page, ui_server, llm):
    gate = threading.Event()
    llm.script(
        tool_calls(("create_sub_agent", {"role": "CoderAgent", "task": "build the whole project"})),
        text("CoderAgent_1 started."),
        match=MASTER,
    )
    llm.script(text("still building " * 20, chunk_size=5, delay_s=0.01, wait=gate), match=sub(1, "CoderAgent"))
    try:
        send(page, "build everything")
        row = page.get_by_test_id("agent-row").filter(has_text="CoderAgent_1")
        expect(row).to_have_attribute("data-state", AgentState.RUNNING)
        row.click()
        side = page.get_by_test_id("agent-history")
        # Terminate asks first: Cancel leaves the sub-agent at work
        side.get_by_test_id("terminate-agent").click()
        side.get_by_test_id("terminate-no").click()
        expect(side.get_by_test_id("terminate-confirm")).to_have_count(0)
        expect(row).to_have_attribute("data-state", AgentState.RUNNING)
        side.get_by_test_id("terminate-agent").click()
        side.get_by_test_id("terminate-yes").click()
        expect(side.get_by_test_id("agent-terminated")).to_be_visible()
        expect(side.get_by_test_id("agent-history-state")).to_have_text("terminated")  # not "idle"
    finally:
        gate.set()
    expect(row).to_have_attribute("data-state", AgentState.IDLE)
    cid = conversation_id(page)
    runs = ui_server.get(f"/api/sub_agents?conversation_id={cid}").json()["data"]
    assert [r["status"] for r in runs] == ["terminated"]
    expect(page.get_by_test_id("sub-agent-waiting")).to_have_count(0)


def test_a_pending_sub_agent_question_survives_a_reload(page, ui_server, llm):
    llm.script(
        tool_calls(("create_sub_agent", {"role": "InfoAgent", "task": "find the visa rules"})),
        text("InfoAgent_1 is checking."),
        text("Visa rules are in."),
        match=MASTER,
    )
    llm.script(
        tool_calls(("ask_user", {"question": "Which passport?", "options": ["EU", "US"]})),
        text("EU passports need no visa."),
        match=sub(1),
    )
    send(page, "do I need a visa?")
    expect(page.get_by_test_id("ask-card")).to_have_attribute("data-answered", "false")
    page.reload()
    card = page.get_by_test_id("ask-card")
    expect(card).to_have_count(1)
    expect(card).to_have_attribute("data-answered", "false")
    expect(card).to_have_attribute("data-question-id", re.compile(r"^q_"))
    card.get_by_test_id("ask-option").filter(has_text="EU").click()
    expect(card).to_have_attribute("data-answer", "EU")
    expect(assistant(page).last.get_by_test_id("assistant-text")).to_have_text("Visa rules are in.")
    expect(page.get_by_test_id("ask-card")).to_have_count(1)
    users = page.get_by_test_id("user-message")
    expect(users.get_by_test_id("user-text")).to_have_text(["do I need a visa?", "EU"])
    expect(users.last.get_by_test_id("route-badge")).to_have_attribute("data-route", Route.HIL)
    expect(assistant(page).get_by_test_id("assistant-text")).to_have_text(
        ["InfoAgent_1 is checking.", "EU passports need no visa.", "Visa rules are in."]
    )


def test_chips_that_come_while_offline_show_after_the_reconnect(page, ui_server, llm):
    release = threading.Event()
    llm.script(text("Here is the plan."), match=MASTER)
    llm.script(text('{"questions": ["go ahead", "change the plan"]}', wait=release), match=suggest_for("make a plan"))
    try:
        wait_connected(page)
        send(page, "make a plan")
        expect(assistant(page)).to_have_attribute("data-done", "true")
        expect(page.get_by_test_id("stop-button")).to_have_count(0)
        task_id = only_task(ui_server, conversation_id(page))
        # the socket drops after the reply's final event, before its chips
        page.evaluate("window.__agentChat.disconnect()")
        expect(page.get_by_test_id("connection-status")).to_have_attribute("data-state", "disconnected")
        release.set()
        deadline = time.monotonic() + 10
        while SuggestionsEvent.TYPE not in [e["type"] for e in ui_server.get(f"/api/tasks/{task_id}").json()["events"]]:
            assert time.monotonic() < deadline, "no suggestions in the task's log"
            time.sleep(0.05)
        chips = page.get_by_test_id("suggestion-chip")
        expect(chips).to_have_count(0)
        page.evaluate("window.__agentChat.connect()")
        expect(chips).to_have_text(["go ahead", "change the plan"])
    finally:
        release.set()


def test_the_master_chips_survive_a_reload_when_a_sub_agent_task_is_the_last_one(page, ui_server, llm):
    gate = threading.Event()
    llm.script(
        tool_calls(("create_sub_agent", {"role": "InfoAgent", "task": "check the forecast"})),
        tool_calls(("run_command", {"command": "echo forecast-read"}), wait=gate),
        text("Sunny all week, says InfoAgent_1."),
        match=MASTER,
    )
    llm.script(text("Sunny all week."), match=sub(1))
    llm.script(text('{"questions": ["plan a picnic", "and next week?"]}'), match=suggest_for("how is the weather"))
    try:
        send(page, "how is the weather this week?")
        cid = conversation_id(page)
        deadline = time.monotonic() + 10
        while len(tasks := ui_server.get(f"/api/tasks?conversation_id={cid}").json()["data"]) < 2:
            assert time.monotonic() < deadline, "the sub-agent got no task"
            time.sleep(0.05)
        # the sub-agent's task ends while the master's turn still runs: its notice joins that turn
        assert ui_server.wait_task(tasks[1]["task_id"])["status"] == TaskStatus.SUCCEEDED
    finally:
        gate.set()
    chips = page.get_by_test_id("suggestion-chip")
    expect(chips).to_have_text(["plan a picnic", "and next week?"])
    master_task, sub_task = ui_server.get(f"/api/tasks?conversation_id={cid}").json()["data"]
    assert master_task["agent_id"] != sub_task["agent_id"]
    assert ui_server.wait_task(master_task["task_id"])["status"] == TaskStatus.SUCCEEDED

    # the last finished task is the sub-agent's, yet the chips are the master's reply's
    page.reload()
    expect(assistant(page).last.get_by_test_id("assistant-text")).to_have_text("Sunny all week, says InfoAgent_1.")
    expect(chips).to_have_text(["plan a picnic", "and next week?"])
