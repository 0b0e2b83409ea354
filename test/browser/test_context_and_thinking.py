"""The model's thinking, a cut-off reply and a summarised history as the user sees them (README, "Long
conversations", "Providers"): a collapsed "Thinking" block apart from the reply, a note on a reply cut at
the output limit, and a quiet "earlier messages summarised" line whose summary opens on demand; live and
after a reload."""

from __future__ import annotations

from playwright.sync_api import expect

from test.browser.helpers import assistant, conversation_id, send
from test.provider_replies import cut_at_length, deepseek_thinking
from test.scripted_llm import match_system, text
from test.windowed_model import WindowedModel

MASTER = match_system("You are MasterAgent")
THOUGHT = "The second option is cheaper and leaves earlier."


def test_thinking_is_a_collapsed_block_apart_from_the_reply_and_a_cut_reply_says_so(page, llm):
    llm.script(deepseek_thinking(THOUGHT, "Take the second one."), match=MASTER)
    llm.script(cut_at_length("The list goes on: one, two, thr"), match=MASTER)
    send(page, "which one?")
    first = assistant(page).first
    expect(first).to_have_attribute("data-done", "true")
    send(page, "list them all")
    second = assistant(page).nth(1)
    expect(second).to_have_attribute("data-truncated", "true")
    for reloaded in (False, True):
        if reloaded:
            page.reload()
            first, second = assistant(page).first, assistant(page).nth(1)
        expect(first.get_by_test_id("assistant-text")).to_have_text("Take the second one.")
        thinking = first.get_by_test_id("thinking")
        expect(thinking.get_by_test_id("thinking-text")).to_be_hidden()
        thinking.locator("summary").click()
        expect(thinking.get_by_test_id("thinking-text")).to_have_text(THOUGHT)
        expect(second.get_by_test_id("truncated")).to_be_visible()
        expect(second.get_by_test_id("thinking")).to_have_count(0)


def test_a_summarised_history_shows_a_quiet_line_with_the_summary(open_page, make_server, llm):
    model = WindowedModel(4000, lambda body: text("noted", chunk_size=10)).serve(llm)
    server = make_server(env={"MODEL_CONTEXT_TOKENS": "4000"})
    page = open_page(server)
    filler = " ".join(f"w{i}" for i in range(120))
    send(page, f"INSTRUCTION: call me Ishmael. {filler}")
    cid = conversation_id(page)
    lines = page.get_by_test_id("chat").get_by_test_id("context-compacted")
    for turn in range(2, 30):
        expect(assistant(page)).to_have_count(turn - 1)
        expect(assistant(page).last).to_have_attribute("data-done", "true")
        if model.summaries:
            break
        send(page, f"turn {turn}: {filler}")
    expect(lines).to_have_count(1)  # live, from the context_compacted event
    [stored] = server.get(f"/api/conversations/{cid}/summaries").json()["data"]
    assert "call me Ishmael" in stored["summary"]
    for reloaded in (False, True):
        if reloaded:
            page.reload()
            expect(lines).to_have_count(1)  # from the stored summaries
        expect(lines.first.get_by_test_id("context-summary")).to_be_hidden()
        lines.first.locator("summary").click()
        expect(lines.first.get_by_test_id("context-summary")).to_contain_text("call me Ishmael")
    expect(page.get_by_test_id("user-message").first).to_contain_text("INSTRUCTION: call me Ishmael")
