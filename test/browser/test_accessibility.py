"""axe-core over the main screens, light and dark, desktop and phone: no violation (WCAG 2.2 AA)."""

from __future__ import annotations

import re

from playwright.sync_api import Page, expect

from modules.event_catalogue import AskUserEvent, UserMessageEvent
from modules.statuses import MessageSource, Visibility
from test.browser.axe import describe, violations
from test.browser.conftest import DESKTOP, PHONE
from test.browser.helpers import assistant, conversation_id, inject, send, suggest_for, wait_connected
from test.scripted_llm import match_system, text, tool_calls

MASTER = match_system("You are MasterAgent")
REPLY = (
    "Done: the listing is above.\n\n"
    "```python\nprint('hi')\n```\n\n- [x] listed\n- [ ] checked the sizes\n\n$E=mc^2$"
)


def _busy_conversation(page: Page, llm) -> str:
    """A conversation with a tool card, a reply with code, suggestions, a question and notices."""
    llm.script(tool_calls(("run_command", {"command": "echo listing"}), text="Let me look."), text(REPLY), match=MASTER)
    llm.script(text('{"questions": ["continue", "Show sizes"]}'), match=suggest_for("list the workspace"))
    send(page, "list the workspace")
    expect(assistant(page).last).to_have_attribute("data-done", "true")
    expect(page.get_by_test_id("suggestion-chip")).to_have_count(2)
    cid = conversation_id(page)
    master = page.evaluate("() => window.__agentChat.state.masterAgentId")
    notice = {"message": "[Sub-agent InfoAgent_1 succeeded in 2.1 s]\nResult:\nThe layout is fine.",
              "message_id": "notice-a11y", "source": MessageSource.SUB_AGENT, "visibility": Visibility.COMPACT,
              "starts_work": False,
              "metadata": {"sub_agent_notice": True}}  # fmt: skip
    inject(page, cid, master, "task-a11y", [
        (0, UserMessageEvent.TYPE, notice),
        (1, AskUserEvent.TYPE, {"question_id": "q-a11y", "question": "Which format?", "options": ["CSV", "JSON"]}),
    ])  # fmt: skip
    expect(page.get_by_test_id("ask-card")).to_have_count(1)
    page.get_by_test_id("tool-toggle").first.click()
    return cid


def _check(page: Page, screen: str, found: dict) -> None:
    for scheme in ("light", "dark"):
        page.emulate_media(color_scheme=scheme, reduced_motion="reduce")
        v = violations(page)
        if v:
            found[f"{screen} ({scheme})"] = v


def test_no_axe_violations_on_the_main_screens(open_page, ui_server, llm):
    found: dict = {}
    page = open_page(ui_server, viewport=DESKTOP)
    wait_connected(page)
    _check(page, "welcome", found)
    cid = _busy_conversation(page, llm)
    _check(page, "chat", found)
    page.get_by_test_id("conversation-menu").first.click()
    expect(page.get_by_test_id("conversation-actions")).to_be_visible()
    _check(page, "conversation menu", found)
    page.keyboard.press("Escape")
    page.get_by_test_id("open-settings").click()
    _check(page, "settings", found)
    page.keyboard.press("Escape")
    page.get_by_test_id("agent-row").first.click()
    expect(page.get_by_test_id("agent-history")).to_be_visible()
    _check(page, "agent history", found)

    phone = open_page(ui_server, viewport=PHONE, path=f"/#/c/{cid}")
    expect(assistant(phone).last).to_have_attribute("data-done", "true")
    _check(phone, "phone chat", found)
    phone.get_by_test_id("toggle-conversations").click()
    expect(phone.get_by_test_id("conversation-sidebar")).to_have_class(re.compile(r"\bopen\b"))
    _check(phone, "phone conversations", found)
    phone.keyboard.press("Escape")
    phone.get_by_test_id("toggle-team").click()
    expect(phone.get_by_test_id("team-panel-wrap")).to_be_visible()
    _check(phone, "phone team", found)
    total = sum(len(v["nodes"]) for vs in found.values() for v in vs)
    print(f"axe-core: {total} violations")
    assert not found, f"{total} violations:\n" + describe(found)


def test_no_axe_violations_with_versions_attachments_and_an_edit(open_page, ui_server, llm, tmp_path):
    """Issue 27's additions: the ‹ 1/2 › switcher, file chips on a message and in the composer, the edit line."""
    found: dict = {}
    page = open_page(ui_server, viewport=DESKTOP)
    llm.script(text("Ready."), text("First take."), text("Second take."), match=MASTER)
    send(page, "hello")
    expect(assistant(page).last).to_have_attribute("data-done", "true")
    notes = tmp_path / "notes.txt"
    notes.write_text("hello\n")
    page.get_by_test_id("file-input").set_input_files(str(notes))
    expect(page.get_by_test_id("attachment-chip")).to_have_count(1)
    send(page, "read the notes")
    expect(assistant(page).last.get_by_test_id("assistant-text")).to_have_text("First take.")
    assistant(page).last.get_by_test_id("regenerate").click()
    expect(page.get_by_test_id("version-label")).to_have_text("2/2")
    page.get_by_test_id("user-message").last.get_by_test_id("edit-message").click()
    expect(page.get_by_test_id("attachment-chip")).to_have_count(1)  # the files come back with the edit
    expect(page.get_by_test_id("editing-banner")).to_be_visible()
    _check(page, "versions, chips and an edit", found)
    assert not found, describe(found)
