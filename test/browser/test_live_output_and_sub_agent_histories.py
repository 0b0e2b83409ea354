"""What the page shows live: a running command's output as it prints, a sub-agent's history while it works,
and what a restart that killed a command leaves in sight (issue 11's defects 3 and 7; each test failed before
its fix)."""

from __future__ import annotations

import re
import threading

from playwright.sync_api import expect

from modules.event_catalogue import TextChunkEvent
from modules.statuses import AgentState
from test.browser.helpers import assistant, conversation_id, send, wait_connected
from test.conftest import wait_until
from test.scripted_llm import match_system, text, tool_calls

MASTER = match_system("You are MasterAgent")


def test_a_running_command_shows_its_output_as_it_prints(page, ui_server, llm):
    loop = "for i in $(seq 1 24); do echo tick-$i; sleep 0.25; done"
    llm.script(tool_calls(("run_command", {"command": loop})), text("Ticked."), match=MASTER)
    send(page, "run the ticker in the foreground")
    card = page.get_by_test_id("tool-card")
    live = card.get_by_test_id("live-output")
    expect(live).to_contain_text("tick-2")
    expect(card).to_have_attribute("data-status", "running")  # the output came before the command ended
    expect(assistant(page).last.get_by_test_id("assistant-text")).to_have_text("Ticked.", timeout=20_000)
    expect(card).to_have_attribute("data-status", "done")
    expect(live).to_have_count(0)


def test_a_working_sub_agents_history_fills_in_while_it_works(page, ui_server, llm):
    start, finish = threading.Event(), threading.Event()
    llm.script(tool_calls(("create_sub_agent", {"role": "CoderAgent", "task": "scout the area"})),
               text("CoderAgent_1 started."), match=MASTER)
    llm.script(tool_calls(("run_command", {"command": "echo scouted-north"}), wait=start),
               text("Scouting done.", wait=finish), match=match_system("You are CoderAgent_1 "))
    try:
        send(page, "scout the area")
        row = page.get_by_test_id("agent-row").filter(has_text="CoderAgent_1")
        expect(row).to_have_attribute("data-state", AgentState.RUNNING)
        row.click()
        side = page.get_by_test_id("agent-history")
        expect(side.get_by_test_id("tool-card")).to_have_count(0)
        start.set()
        card = side.get_by_test_id("tool-card")
        expect(card).to_have_attribute("data-status", "done")  # while the sub-agent still works
        card.get_by_test_id("tool-toggle").click()
        expect(card.get_by_test_id("tool-output")).to_contain_text("scouted-north")
        expect(row).to_have_attribute("data-state", AgentState.RUNNING)
    finally:
        start.set()
        finish.set()
    expect(row).to_have_attribute("data-state", re.compile("idle|completed"))


def test_a_sub_agents_reply_streams_into_its_open_history(page, ui_server, llm):
    finish = threading.Event()
    llm.script(tool_calls(("create_sub_agent", {"role": "CoderAgent", "task": "write the report"})),
               text("CoderAgent_1 started."), match=MASTER)
    llm.script(text("drafting the report " * 200, chunk_size=5, delay_s=0.01, wait=finish),
               match=match_system("You are CoderAgent_1 "))
    try:
        send(page, "write the report")
        row = page.get_by_test_id("agent-row").filter(has_text="CoderAgent_1")
        expect(row).to_have_attribute("data-state", AgentState.RUNNING)
        row.click()
        side = page.get_by_test_id("agent-history")
        finish.set()
        expect(side.get_by_test_id("assistant-message")).to_contain_text("drafting the report")
        expect(row).to_have_attribute("data-state", AgentState.RUNNING)  # seen while it streams, not at its end
    finally:
        finish.set()
    expect(row).to_have_attribute("data-state", re.compile("idle|completed"), timeout=30_000)


def test_after_a_restart_and_a_reload_the_failure_and_the_partial_output_stay(make_server, open_page, llm):
    server = make_server()
    llm.script(tool_calls(("run_command", {"command": "echo partial-4410; sleep 60"})), match=MASTER)
    page = open_page(server)
    send(page, "run the long one")
    card = page.get_by_test_id("tool-card")
    expect(card.get_by_test_id("live-output")).to_contain_text("partial-4410")
    server.kill()
    expect(page.get_by_test_id("connection-error")).to_have_attribute("data-reason", "unreachable")
    server.start()
    wait_connected(page)
    expect(page.get_by_test_id("status-line")).to_contain_text("the server process running this task stopped")
    page.reload()
    line = page.get_by_test_id("status-line")
    expect(line).to_have_count(1)
    expect(line).to_contain_text("the server process running this task stopped")
    card = page.get_by_test_id("tool-card")
    expect(card).to_have_attribute("data-status", "failed")
    card.get_by_test_id("tool-toggle").click()
    expect(card.get_by_test_id("tool-output")).to_contain_text("partial-4410")


def test_a_sub_agents_history_opened_mid_reply_shows_the_reply_from_its_start(page, ui_server, llm):
    llm.script(tool_calls(("create_sub_agent", {"role": "CoderAgent", "task": "write the memo"})),
               text("CoderAgent_1 started."), match=MASTER)
    llm.script(text("OPENING-LINE " + "memo text " * 300, chunk_size=5, delay_s=0.01),
               match=match_system("You are CoderAgent_1 "))
    send(page, "write the memo")
    row = page.get_by_test_id("agent-row").filter(has_text="CoderAgent_1")
    expect(row).to_have_attribute("data-state", AgentState.RUNNING)
    cid = conversation_id(page)

    def sub_agent_streams():
        tasks = ui_server.get(f"/api/tasks?conversation_id={cid}&status=active").json()["data"]
        return any(e["type"] == TextChunkEvent.TYPE for t in tasks
                   for e in ui_server.get(f"/api/tasks/{t['task_id']}").json()["events"])

    wait_until(sub_agent_streams, 15, what="the sub-agent's reply streaming")
    row.click()
    reply = page.get_by_test_id("agent-history").get_by_test_id("assistant-message")
    expect(reply).to_contain_text("OPENING-LINE")
    expect(reply).to_contain_text("memo text memo text")
    expect(row).to_have_attribute("data-state", AgentState.RUNNING)  # still streaming
    expect(row).to_have_attribute("data-state", re.compile("idle|completed"), timeout=30_000)
