"""A long conversation in the browser against the real server: it opens on its latest turns, and earlier ones
come as the reader scrolls up (or asks), with what was being read kept in place."""

from __future__ import annotations

from playwright.sync_api import expect

from modules.storage import messages as message_store
from modules.storage.db import Database
from modules.storage.message_meta import MessageMeta
from modules.storage.messages import MessageDraft
from test.browser.helpers import wait_opened

TURNS = 150  # 300 items: more than the 120 a conversation opens with


def _stored_turns(database_url: str, cid: str, agent_id: str) -> None:
    """TURNS questions and answers written straight into the master's history, as hours of talk leave them."""
    db = Database(database_url)
    try:
        with db.write() as s:
            message_store.append_in(s, cid, agent_id, [
                draft for i in range(TURNS) for draft in (
                    MessageDraft(role="user", content=f"question {i}"),
                    MessageDraft(role="assistant", content=f"answer {i}"))])
    finally:
        db.dispose()


def test_a_long_conversation_opens_on_its_latest_turns_and_earlier_ones_come_as_the_reader_scrolls_up(
        open_page, ui_server):
    conv = ui_server.post("/api/conversations", {"title": "Hours of talk"}).json()
    _stored_turns(ui_server.database_url, conv["conversation_id"], conv["agents"][0]["agent_id"])
    page = open_page(ui_server, path=f"/#/c/{conv['conversation_id']}")
    wait_opened(page, "Hours of talk")
    texts = page.get_by_test_id("user-text")

    expect(texts.last).to_have_text(f"question {TURNS - 1}")
    expect(texts.first).to_have_text("question 90")  # the last 120 items: turns 90 to 149
    read = texts.filter(has_text="question 90")
    page.get_by_test_id("timeline").evaluate("el => { el.scrollTop = 0; }")

    expect(texts.first).to_have_text("question 30")
    expect(read).to_be_in_viewport()  # what was on screen stays there: the new turns went in above it
    page.get_by_test_id("show-earlier").click()
    expect(texts.first).to_have_text("question 0")
    expect(texts).to_have_count(TURNS)
    expect(page.get_by_test_id("show-earlier")).to_have_count(0)


def test_a_long_conversation_is_read_in_pages_and_an_edit_far_back_still_switches_its_versions(open_page, ui_server):
    """The UI asks for the latest page, not the whole history, and reads earlier pages as the reader scrolls up:
    every message once, in order, down to the first; an edit whose turn is pages earlier switches as it did."""
    conv = ui_server.post("/api/conversations", {"title": "Pages of talk"}).json()
    cid = conv["conversation_id"]
    turns = [MessageDraft(role=role, content=f"{word} {i}")
             for i in range(300) for role, word in (("user", "question"), ("assistant", "answer"))]
    root = turns[400].message_id  # question 200
    edited = [MessageDraft(role="user", content="question 200, edited",
                           meta=MessageMeta(version_of=root, edit_of=root)),
              MessageDraft(role="assistant", content="answer to the edit")]
    after = [MessageDraft(role=role, content=f"{word} after {i}")
             for i in range(150) for role, word in (("user", "question"), ("assistant", "answer"))]
    db = Database(ui_server.database_url)
    try:
        with db.write() as s:
            message_store.append_in(s, cid, conv["agents"][0]["agent_id"], turns + edited + after)
    finally:
        db.dispose()
    asked: list[str] = []
    page = open_page(ui_server)
    page.on("request", lambda r: asked.append(r.url) if f"/api/conversations/{cid}/messages" in r.url else None)
    page.goto(f"{ui_server.url}/#/c/{cid}")
    wait_opened(page, "Pages of talk")
    texts = page.get_by_test_id("user-text")
    expect(texts.last).to_have_text("question after 149")
    assert asked and "limit=" in asked[0] and "before=" not in asked[0], asked

    expected = [f"question {i}" for i in range(200)] + ["question 200, edited"] + [
        f"question after {i}" for i in range(150)]
    timeline = page.get_by_test_id("timeline")
    for _ in range(40):  # each scroll to the top shows the next earlier page
        first = texts.first.text_content()
        if first == "question 0":
            break
        timeline.evaluate("el => { el.scrollTop = 0; }")
        expect(texts.first).not_to_have_text(first or "", timeout=10_000)
    expect(texts).to_have_text(expected)
    assert all("limit=" in url for url in asked), asked
    expect(page.get_by_test_id("show-earlier")).to_have_count(0)

    label = page.get_by_test_id("version-label")
    expect(label).to_have_text("2/2")
    page.get_by_test_id("version-prev").click()
    expect(label).to_have_text("1/2")
    expect(texts).to_have_text([f"question {i}" for i in range(300)])
    page.get_by_test_id("version-next").click()
    expect(label).to_have_text("2/2")
    expect(texts).to_have_text(expected)


def test_an_earlier_page_that_fails_to_load_is_said_and_show_earlier_asks_again(open_page, ui_server):
    """Reading earlier history can fail (the network, the server restarting): the reader is told, not left with a
    button that seems to do nothing, and "Show earlier" reads it once the server answers again."""
    conv = ui_server.post("/api/conversations", {"title": "A failing page"}).json()
    cid = conv["conversation_id"]
    db = Database(ui_server.database_url)
    try:
        with db.write() as s:
            message_store.append_in(s, cid, conv["agents"][0]["agent_id"], [
                MessageDraft(role=role, content=f"{word} {i}")
                for i in range(150) for role, word in (("user", "question"), ("assistant", "answer"))])
    finally:
        db.dispose()
    page = open_page(ui_server)
    page.route("**/messages?*before=*", lambda route: route.fulfill(
        status=503, content_type="application/json",
        body='{"success": false, "code": "database_unavailable", "error": "the database is unavailable"}'))
    page.goto(f"{ui_server.url}/#/c/{cid}")
    wait_opened(page, "A failing page")
    texts = page.get_by_test_id("user-text")
    expect(texts.last).to_have_text("question 149")

    page.get_by_test_id("show-earlier").click()
    expect(page.get_by_test_id("earlier-error")).to_contain_text("Earlier messages could not be loaded")

    page.unroute("**/messages?*before=*")
    page.get_by_test_id("show-earlier").click()
    expect(page.get_by_test_id("earlier-error")).to_have_count(0)
    for _ in range(10):
        if texts.first.text_content() == "question 0":
            break
        page.get_by_test_id("show-earlier").click()
    expect(texts.first).to_have_text("question 0")
