"""A user with more conversations than one page of the list reaches the oldest: the list loads the next page
as it is scrolled to its end, or on "Show more" from the keyboard; a search pages the same way, and a
conversation that moves to the top meanwhile shows once."""

from __future__ import annotations

from playwright.sync_api import Page, expect

from test.browser.helpers import wait_connected

COUNT = 230  # three pages of the UI's 100


def _title(i: int) -> str:
    return f"Topic {i:03d} {'even' if i % 2 == 0 else 'odd'}"


def _scroll_to_end(page: Page) -> None:
    page.get_by_test_id("conversation-sidebar").evaluate("el => { el.scrollTop = el.scrollHeight; }")


def _ids(page: Page) -> list[str]:
    return page.get_by_test_id("conversation-item").evaluate_all("els => els.map((e) => e.dataset.conversationId)")


def test_the_list_loads_older_conversations_as_it_is_scrolled_and_from_the_keyboard(make_server, open_page):
    server = make_server(env={"RATE_LIMIT_CONVERSATIONS_PER_MIN": "1000"})
    for i in range(COUNT):  # created oldest first: the last is the newest
        assert server.post("/api/conversations", {"title": _title(i)}).status_code == 201
    page = open_page(server)
    wait_connected(page)
    items = page.get_by_test_id("conversation-item")
    more = page.get_by_test_id("conversations-more")
    expect(items).to_have_count(100)
    expect(items.first).to_contain_text(_title(COUNT - 1))

    # The keyboard: Enter on "Show more" (focused without scrolling it into view, where it would load by itself)
    # adds the next page and takes the focus to its first conversation.
    more.evaluate("el => el.focus({ preventScroll: true })")
    page.keyboard.press("Enter")
    expect(items).to_have_count(200)
    expect(items.nth(100)).to_be_focused()
    expect(items.nth(100)).to_contain_text(_title(COUNT - 101))

    _scroll_to_end(page)
    expect(items).to_have_count(COUNT)
    expect(items.last).to_contain_text(_title(0))
    expect(more).to_have_count(0)

    # The oldest, renamed, moves to the top (the list reloads its first page): once, and none is lost.
    page.get_by_role("button", name=f"Actions for {_title(0)}").click()
    page.get_by_test_id("rename-conversation").click()
    page.get_by_test_id("rename-input").fill("Oldest, renamed")
    page.get_by_test_id("rename-input").press("Enter")
    expect(items.first).to_contain_text("Oldest, renamed")
    expect(items).to_have_count(COUNT)
    expect(items.last).to_contain_text(_title(1))
    assert len(set(_ids(page))) == COUNT

    # A search pages the same way: 114 titles say "even" now.
    page.get_by_test_id("conversation-search").fill("even")
    expect(items).to_have_count(100)
    expect(items.first).to_contain_text(_title(228))
    _scroll_to_end(page)
    expect(items).to_have_count(114)
    expect(items.last).to_contain_text(_title(2))
    expect(more).to_have_count(0)
    assert len(set(_ids(page))) == 114
