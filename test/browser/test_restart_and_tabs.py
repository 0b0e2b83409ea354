"""A reply a server restart cut short reads "cut off" (also after a reload), the offline team panel shows no
live state, and a message queued from another tab shows in every tab (issue 27)."""

from __future__ import annotations

import re
import threading

from playwright.sync_api import expect

from test.browser.helpers import assistant, conversation_id, send, wait_connected
from test.scripted_llm import match_system, text

MASTER = match_system("You are MasterAgent")


def test_a_reply_cut_by_a_restart_reads_cut_off_and_offline_shows_no_green_dot(make_server, open_page, llm):
    server = make_server()
    words = " ".join(f"word{i}" for i in range(600))
    llm.script(text(words, chunk_size=6, delay_s=0.03), match=MASTER)
    page = open_page(server)
    send(page, "write a long essay")
    reply = assistant(page)
    expect(reply.get_by_test_id("assistant-text")).to_contain_text("word3")
    dot = page.get_by_test_id("agent-row").filter(has_text="MasterAgent").get_by_test_id("agent-dot")
    expect(dot).to_have_class(re.compile(r"\bstate-running\b"))
    server.kill()
    expect(page.get_by_test_id("connection-error")).to_have_attribute("data-reason", "unreachable")
    expect(dot).not_to_have_class(re.compile(r"\bstate-running\b"))  # no green dot for what cannot be seen
    expect(dot).to_have_class(re.compile(r"\bstate-unknown\b"))
    server.start()
    wait_connected(page)
    expect(reply).to_have_attribute("data-interrupted", "true")  # live, once the task's end is known
    expect(reply.get_by_test_id("cut-off")).to_be_visible()

    page.reload()  # the stored history lacks the reply: it comes back from the task's log, cut off
    reply = assistant(page)
    expect(reply).to_have_count(1)
    expect(reply.get_by_test_id("assistant-text")).to_contain_text("word3")
    expect(reply).to_have_attribute("data-interrupted", "true")
    expect(reply.get_by_test_id("cut-off")).to_be_visible()
    assert "word599" not in reply.get_by_test_id("assistant-text").inner_text()


def test_a_message_queued_in_another_tab_shows_in_every_tab(open_page, ui_server, llm):
    gate = threading.Event()
    llm.script(text("A slow answer.", wait=gate), text("Took the queued one."), match=MASTER)
    first = open_page(ui_server)
    try:
        send(first, "start something slow")
        expect(assistant(first)).to_have_attribute("data-done", "false")
        cid = conversation_id(first)
        second = open_page(ui_server, path=f"/#/c/{cid}")
        wait_connected(second)
        expect(assistant(second)).to_have_attribute("data-done", "false")
        send(first, "and this, from the first tab")
        queued = second.get_by_test_id("user-message").and_(second.locator("[data-queued=true]"))
        expect(queued.get_by_test_id("user-text")).to_have_text("and this, from the first tab")
    finally:
        gate.set()
    for page in (first, second):
        expect(assistant(page).last.get_by_test_id("assistant-text")).to_have_text("Took the queued one.")
        expect(page.get_by_test_id("user-message").get_by_test_id("user-text")).to_have_text(
            ["start something slow", "and this, from the first tab"])
        expect(page.locator("[data-queued=true]")).to_have_count(0)
