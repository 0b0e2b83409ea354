"""The message box: Enter never sends mid-composition (any engine's event order), drafts per conversation."""

from __future__ import annotations

from playwright.sync_api import expect

from test.browser.helpers import assistant, conversation_id, send, wait_connected
from test.scripted_llm import text

# Safari/iOS confirm a candidate with compositionend first, then an Enter keydown whose isComposing is false
# and keyCode 229; a keydown in the same tick as compositionend is the confirming key too.
SAFARI_ORDER = """([keyCode]) => new Promise((done) => {
  const box = document.querySelector('[data-testid="message-input"]');
  box.dispatchEvent(new CompositionEvent('compositionstart', { bubbles: true, data: '' }));
  box.dispatchEvent(new CompositionEvent('compositionend', { bubbles: true, data: '你好' }));
  box.dispatchEvent(new KeyboardEvent('keydown', { key: 'Enter', code: 'Enter', keyCode, which: keyCode,
    isComposing: false, bubbles: true, cancelable: true }));
  requestAnimationFrame(() => requestAnimationFrame(() => done(box.value)));
})"""


def test_enter_that_confirms_a_composition_does_not_send(page, llm):
    llm.script(text("Got it."))
    wait_connected(page)
    box = page.get_by_test_id("message-input")
    box.fill("你好")
    for key_code in (229, 13):
        assert page.evaluate(SAFARI_ORDER, [key_code]) == "你好", f"keyCode {key_code} sent the message"
    expect(page.get_by_test_id("user-message")).to_have_count(0)
    # the user's own Enter, later, sends
    box.press("Enter")
    expect(page.get_by_test_id("user-message")).to_have_count(1)
    expect(page.get_by_test_id("user-text")).to_have_text("你好")


def _conversation(page, llm, prompt: str) -> str:
    llm.script(text(f"Reply to {prompt}."))
    page.get_by_test_id("new-conversation").click()
    send(page, prompt)
    expect(assistant(page).last).to_have_attribute("data-done", "true")
    return conversation_id(page)


def _open(page, cid: str) -> None:
    page.locator(f'[data-testid="conversation-item"][data-conversation-id="{cid}"]').click()
    expect(page.get_by_test_id("conversation-title")).not_to_have_text("New conversation")
    expect(page.get_by_test_id("timeline-loading")).to_have_count(0)


def test_a_draft_stays_in_its_conversation_and_survives_a_reload(page, llm):
    wait_connected(page)
    first = _conversation(page, llm, "first topic")
    second = _conversation(page, llm, "second topic")
    box = page.get_by_test_id("message-input")
    box.fill("half a thought for the second")
    _open(page, first)
    expect(box).to_have_value("")
    box.fill("a note for the first")
    page.get_by_test_id("new-conversation").click()
    expect(box).to_have_value("")

    page.reload()
    wait_connected(page)
    expect(box).to_have_value("")
    _open(page, second)
    expect(box).to_have_value("half a thought for the second")
    _open(page, first)
    expect(box).to_have_value("a note for the first")
    # a sent draft is gone for good
    box.press("Enter")
    expect(box).to_have_value("")
    page.reload()
    wait_connected(page)
    expect(page.get_by_test_id("user-text").last).to_have_text("a note for the first")
    expect(box).to_have_value("")


def test_edit_keeps_an_unsent_draft(page, llm):
    wait_connected(page)
    _conversation(page, llm, "the original question")
    box = page.get_by_test_id("message-input")
    box.fill("my unsent draft")
    page.get_by_test_id("user-message").last.hover()
    page.get_by_test_id("edit-message").click()
    expect(box).to_have_value("the original question")
    expect(page.get_by_test_id("draft-kept")).to_be_visible()
    page.get_by_test_id("restore-draft").click()
    expect(box).to_have_value("my unsent draft")
    expect(page.get_by_test_id("draft-kept")).to_have_count(0)

    # edited and sent, the draft comes back
    page.get_by_test_id("edit-message").click()
    llm.script(text("Reply to the edit."))
    box.fill("the original question, edited")
    box.press("Enter")
    expect(box).to_have_value("my unsent draft")
