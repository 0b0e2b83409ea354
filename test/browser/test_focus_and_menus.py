"""Keyboard use: menus close on Escape and outside clicks, Escape cancels a rename, and the focus moves into
popovers, drawers and side views and back to the button that opened them."""

from __future__ import annotations

from playwright.sync_api import Page, expect

from test.browser.conftest import PHONE
from test.browser.helpers import assistant, conversation_id, send, wait_connected
from test.scripted_llm import text


def _focused_testid(page: Page) -> str | None:
    return page.evaluate("() => document.activeElement?.closest('[data-testid]')?.dataset.testid ?? null")


def _focus_within(page: Page, testid: str) -> bool:
    return page.evaluate(
        "(id) => !!document.activeElement?.closest(`[data-testid=\"${id}\"]`)", testid
    )


def _conversation(page: Page, llm, prompt: str) -> str:
    llm.script(text("Noted."))
    send(page, prompt)
    expect(assistant(page).last).to_have_attribute("data-done", "true")
    return conversation_id(page)


def test_the_conversation_menu_closes_on_escape_and_outside_clicks(page, llm):
    wait_connected(page)
    _conversation(page, llm, "menu keyboard check")
    more = page.get_by_test_id("conversation-menu").first
    menu = page.get_by_test_id("conversation-actions")
    more.click()
    expect(menu).to_be_visible()
    assert _focus_within(page, "conversation-actions"), "the focus did not move into the menu"
    page.keyboard.press("Escape")
    expect(menu).to_have_count(0)
    assert _focused_testid(page) == "conversation-menu"

    more.click()
    expect(menu).to_be_visible()
    page.get_by_test_id("timeline").click(position={"x": 20, "y": 20})
    expect(menu).to_have_count(0)


def test_escape_cancels_a_rename(page, ui_server, llm):
    wait_connected(page)
    cid = _conversation(page, llm, "keep this title")
    page.get_by_test_id("conversation-menu").first.click()
    page.get_by_test_id("rename-conversation").click()
    box = page.get_by_test_id("rename-input")
    box.fill("a title I did not want")
    box.press("Escape")
    expect(box).to_have_count(0)
    item = page.locator(f'[data-testid="conversation-item"][data-conversation-id="{cid}"]')
    expect(item).to_contain_text("keep this title")
    titles = [c["title"] for c in ui_server.get("/api/conversations").json()["data"] if c["conversation_id"] == cid]
    assert titles == ["keep this title"]


def test_focus_moves_into_the_settings_and_the_agent_history_and_back(page, llm):
    wait_connected(page)
    _conversation(page, llm, "focus round trip")
    page.get_by_test_id("open-settings").click()
    expect(page.get_by_test_id("settings")).to_be_visible()
    assert _focused_testid(page) == "token-input"
    page.keyboard.press("Escape")
    expect(page.get_by_test_id("settings")).to_have_count(0)
    assert _focused_testid(page) == "open-settings"

    row = page.get_by_test_id("agent-row").first
    row.focus()
    page.keyboard.press("Enter")
    expect(page.get_by_test_id("agent-history")).to_be_visible()
    assert _focus_within(page, "agent-history")
    page.keyboard.press("Escape")
    expect(page.get_by_test_id("agent-history")).to_have_count(0)
    assert _focused_testid(page) == "agent-row"


def test_phone_drawers_take_the_focus_and_give_it_back(open_page, ui_server, llm):
    page = open_page(ui_server, viewport=PHONE)
    wait_connected(page)
    page.get_by_test_id("toggle-conversations").click()
    expect(page.get_by_test_id("conversation-sidebar")).to_have_attribute("class", "sidebar open")
    assert _focus_within(page, "conversation-sidebar")
    page.keyboard.press("Escape")
    assert _focused_testid(page) == "toggle-conversations"

    page.get_by_test_id("toggle-team").click()
    expect(page.get_by_test_id("team-panel-wrap")).to_be_visible()
    assert _focus_within(page, "team-panel-wrap")
    page.keyboard.press("Escape")
    expect(page.get_by_test_id("team-panel-wrap")).to_have_count(0)
    assert _focused_testid(page) == "toggle-team"
