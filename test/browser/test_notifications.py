"""A browser notification (and the tab title) when a background command or a sub-agent finishes while the tab
is hidden; the permission is asked on the user's first send, never at load (issue 27)."""

from __future__ import annotations

import re

from playwright.sync_api import expect

from modules.event_catalogue import UserMessageEvent
from modules.statuses import MessageSource, Visibility
from test.browser.helpers import assistant, inject, open_synthetic_conversation, send, wait_connected, wait_opened
from test.scripted_llm import match_system, text, tool_calls

MASTER = match_system("You are MasterAgent")

# The Notification API as a page sees it, recorded; and a tab the test can hide.
FAKE_NOTIFICATIONS = """
window.__notes = []; window.__asked = 0; window.__hidden = sessionStorage.getItem("hidden") === "1";
class FakeNotification {
  constructor(title, options) { window.__notes.push({ title, body: (options || {}).body || "" }); }
  close() {}
}
FakeNotification.permission = "default";
FakeNotification.requestPermission = () => {
  window.__asked++; FakeNotification.permission = "granted"; return Promise.resolve("granted");
};
window.Notification = FakeNotification;
Object.defineProperty(document, "hidden", { configurable: true, get: () => window.__hidden });
Object.defineProperty(document, "visibilityState", { configurable: true,
  get: () => (window.__hidden ? "hidden" : "visible") });
"""
SET_HIDDEN = "(h) => { window.__hidden = h; document.dispatchEvent(new Event('visibilitychange')); }"


def test_a_background_command_that_ends_while_the_tab_is_hidden_notifies(open_page, ui_server, llm):
    page = open_page(ui_server)
    page.context.add_init_script(FAKE_NOTIFICATIONS)
    page.reload()
    wait_connected(page)
    assert page.evaluate("window.__asked") == 0, "the permission was asked at load, not on a gesture"
    llm.script(tool_calls(("run_command", {"command": "sleep 2; echo built", "run_in_background": True})),
               text("Started it."), text("The build finished."), match=MASTER)  # fmt: skip
    send(page, "build it in the background")
    page.wait_for_function("window.__asked === 1")
    expect(assistant(page).last.get_by_test_id("assistant-text")).to_have_text("Started it.")
    assert page.evaluate("window.__notes.length") == 0, "notified while the tab was shown"
    page.evaluate(SET_HIDDEN, True)

    expect(page.get_by_test_id("notice")).to_have_count(1)  # the command's end, reported
    expect(page).to_have_title(re.compile(r"^✓ Done · "))
    page.wait_for_function("window.__notes.length >= 1")
    note = page.evaluate("window.__notes[0]")
    assert re.fullmatch(r"Command \w+.* · build it in the background", note["title"]), note  # ended, as it did
    assert note["body"].startswith("sleep 2; echo built"), note
    page.evaluate(SET_HIDDEN, False)
    expect(page).not_to_have_title(re.compile(r"^✓ Done"))
    llm.script(text("You are welcome."), match=MASTER)
    send(page, "thanks")  # a second send asks no more
    assert page.evaluate("window.__asked") == 1
    expect(assistant(page).last.get_by_test_id("assistant-text")).to_have_text("You are welcome.")
    expect(page.get_by_test_id("stop-button")).to_have_count(0)  # its turn ended: nothing ends after the reload

    # reopened in a hidden tab, the stored report is history, not news
    page.evaluate("sessionStorage.setItem('hidden', '1')")
    page.reload()
    expect(page.get_by_test_id("notice")).to_have_count(1)
    expect(assistant(page).last.get_by_test_id("assistant-text")).to_have_text("You are welcome.")
    assert page.evaluate("document.hidden") is True
    assert page.evaluate("window.__notes.length") == 0
    expect(page).not_to_have_title(re.compile(r"^✓ Done"))


def test_a_sub_agent_report_while_the_tab_is_hidden_notifies_once(open_page, ui_server, llm):
    page, cid, master = open_synthetic_conversation(open_page, ui_server, "sub-agent report")
    page.context.add_init_script(FAKE_NOTIFICATIONS)
    page.reload()
    wait_opened(page, "sub-agent report")  # the reloaded page drops events for a conversation it has not opened yet
    page.evaluate("window.Notification.permission = 'granted'")  # granted at an earlier visit
    report = {"message": "[Sub-agent InfoAgent_1 succeeded in 2.0 s]\nResult:\nAll **12** tests pass.",
              "message_id": "n-report", "source": MessageSource.SUB_AGENT, "visibility": Visibility.COMPACT,
              "starts_work": False,
              "metadata": {"sub_agent_notice": True}}  # fmt: skip
    page.evaluate(SET_HIDDEN, True)
    inject(page, cid, master, "task-r", [(0, UserMessageEvent.TYPE, report)])
    expect(page.get_by_test_id("notice")).to_have_count(1)
    expect(page).to_have_title("✓ Done · sub-agent report · Agent team chat")
    page.wait_for_function("window.__notes.length === 1")
    note = page.evaluate("window.__notes[0]")
    assert note["title"].endswith("· sub-agent report") and "InfoAgent_1" in note["title"], note
    assert "12 tests pass" in note["body"], note
    inject(page, cid, master, "task-r", [(0, UserMessageEvent.TYPE, report)])  # the same event again: no second one
    page.evaluate(SET_HIDDEN, False)
    assert page.evaluate("window.__notes.length") == 1
