"""The chat UI in a real browser while the connection is down or the user moves on: stops and replies by
polling, conversations created behind the user's back, turns that start offline."""

from __future__ import annotations

import re
import threading
import time

import pytest
from playwright.sync_api import expect

from modules.statuses import TaskStatus
from test.browser.helpers import assistant, conversation_id, only_task, send, state, wait_connected
from test.scripted_llm import text, tool_calls


def test_stop_while_offline_cancels_at_once(page, ui_server, llm):
    llm.script(tool_calls(("run_command", {"command": "sleep 30"})))
    wait_connected(page)
    send(page, "sleep while I go offline")
    card = page.get_by_test_id("tool-card")
    expect(card).to_have_attribute("data-status", "running")
    task_id = only_task(ui_server, conversation_id(page))
    page.evaluate("window.__agentChat.disconnect()")
    expect(page.get_by_test_id("connection-status")).to_have_attribute("data-state", "disconnected")
    page.get_by_test_id("stop-button").click()
    # well before the 10 s a stop over the socket would wait for its acknowledgement
    assert ui_server.wait_task(task_id, timeout=5)["status"] == TaskStatus.STOPPED
    # still offline, the page polls the task's log
    expect(page.get_by_test_id("status-line")).to_have_attribute("data-tone", "stopped")
    expect(page.get_by_test_id("stop-button")).to_have_count(0)


def test_a_reply_to_a_message_sent_offline_comes_in_by_polling(page, ui_server, llm):
    release = threading.Event()
    llm.script(text("Answered while offline.", wait=release))
    wait_connected(page)
    page.evaluate("window.__agentChat.disconnect()")
    expect(page.get_by_test_id("connection-status")).to_have_attribute("data-state", "disconnected")
    try:
        # the page reads the task's log once right after the REST send; the reply comes later
        with page.expect_response(re.compile(r"/api/tasks/[^/?]+\?from=")):
            send(page, "are you there?")
        release.set()
        reply = assistant(page)
        expect(reply.get_by_test_id("assistant-text")).to_have_text("Answered while offline.")
        expect(reply).to_have_attribute("data-done", "true")
        expect(page.get_by_test_id("stop-button")).to_have_count(0)
        expect(page.get_by_test_id("connection-status")).to_have_attribute("data-state", "disconnected")
    finally:
        release.set()


def _wait_for(check, what: str, timeout: float = 10):
    deadline = time.monotonic() + timeout
    while not (found := check()):
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)
    return found


@pytest.mark.parametrize("move_to", ["another conversation", "a new chat"])
def test_a_conversation_created_after_the_user_moved_on_does_not_take_the_view(open_page, ui_server, llm, move_to):
    other = ui_server.post("/api/conversations", {"title": "somewhere else"}).json()["conversation_id"]
    page = open_page(ui_server)
    before = {c["conversation_id"] for c in ui_server.get("/api/conversations").json()["data"]}
    llm.script(text("Answered in the background."))
    held: list = []

    def hold_create(route):
        if route.request.method == "POST":
            held.append(route)
        else:
            route.fallback()

    wait_connected(page)
    expect(page.locator(f'[data-testid=conversation-item][data-conversation-id="{other}"]')).to_have_count(1)
    page.route("**/api/conversations", hold_create)
    send(page, "start something new")
    deadline = time.monotonic() + 10
    while not held:  # the page's create request reaches the route handler
        assert time.monotonic() < deadline, "the page did not create a conversation"
        page.wait_for_timeout(20)

    # the user moves on while the conversation is being created
    if move_to == "another conversation":
        page.locator(f'[data-testid=conversation-item][data-conversation-id="{other}"]').click()
        expect(page.get_by_test_id("conversation-title")).to_have_text("somewhere else")
        expect(page.get_by_test_id("timeline-loading")).to_have_count(0)
    else:
        page.get_by_test_id("new-conversation").click()
        expect(page.get_by_test_id("example-chip").first).to_be_enabled()
    held[0].continue_()
    page.unroute("**/api/conversations", hold_create)

    # the conversation is created and its message sent and answered, in the background
    def created():
        ids = {c["conversation_id"] for c in ui_server.get("/api/conversations").json()["data"]} - before
        return next(iter(ids), None)

    cid = _wait_for(created, "the new conversation")
    _wait_for(
        lambda: [m["content"] for m in ui_server.get(f"/api/conversations/{cid}/messages").json()["data"]
                 if m["role"] == "assistant"] == ["Answered in the background."],
        "the reply in the new conversation",
    )
    expect(page.locator(f'[data-testid=conversation-item][data-conversation-id="{cid}"]')).to_have_count(1)
    # ...and the view stays where the user went
    expect(page.get_by_test_id("user-message")).to_have_count(0)
    expect(assistant(page)).to_have_count(0)
    if move_to == "another conversation":
        assert conversation_id(page) == other
        expect(page.get_by_test_id("conversation-title")).to_have_text("somewhere else")
    else:
        assert "#/c/" not in page.url
        expect(page.get_by_test_id("welcome")).to_be_visible()
        assert state(page)["conversationId"] is None


def test_a_turn_that_starts_while_offline_comes_in_by_polling(open_page, ui_server, llm):
    cid = ui_server.post("/api/conversations", {"title": "offline turns"}).json()["conversation_id"]
    page = open_page(ui_server, path=f"/#/c/{cid}")
    expect(page.get_by_test_id("conversation-title")).to_have_text("offline turns")
    expect(page.get_by_test_id("timeline-loading")).to_have_count(0)
    wait_connected(page)
    page.evaluate("window.__agentChat.disconnect()")
    expect(page.get_by_test_id("connection-status")).to_have_attribute("data-state", "disconnected")
    release = threading.Event()
    llm.script(text("Answered while you were offline.", wait=release))
    try:
        # a turn this page did not start (another tab's message): no socket tells the page about it
        ui_server.send("sent from another tab", cid)
        user = page.get_by_test_id("user-message")
        expect(user.get_by_test_id("user-text")).to_have_text("sent from another tab")
        expect(page.get_by_test_id("stop-button")).to_be_visible()
        release.set()
        reply = assistant(page)
        expect(reply.get_by_test_id("assistant-text")).to_have_text("Answered while you were offline.")
        expect(reply).to_have_attribute("data-done", "true")
        expect(page.get_by_test_id("stop-button")).to_have_count(0)
        expect(user).to_have_count(1)
        expect(reply).to_have_count(1)
        expect(page.get_by_test_id("connection-status")).to_have_attribute("data-state", "disconnected")
        assert state(page)["textMismatches"] == 0
    finally:
        release.set()
