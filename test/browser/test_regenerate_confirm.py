"""Regenerate of a turn that ran commands or started sub-agents asks first and says what will run again."""

from __future__ import annotations

from playwright.sync_api import expect

from test.browser.helpers import assistant, send
from test.scripted_llm import match_system, text, tool_calls

MASTER = match_system("You are MasterAgent")


def _master_requests(llm) -> int:
    return len([r for r in llm.requests if MASTER(r.body)])


def test_regenerate_over_a_command_asks_and_names_it(page, llm):
    llm.script(tool_calls(("run_command", {"command": "echo deployed"}), text="Deploying."), text("Deployed."),
               text("Deployed again."), match=MASTER)  # fmt: skip
    send(page, "deploy it")
    reply = assistant(page).last
    expect(reply.get_by_test_id("assistant-text")).to_have_text("Deployed.")
    expect(reply).to_have_attribute("data-done", "true")
    before = _master_requests(llm)

    reply.get_by_test_id("regenerate").click()
    confirm = page.get_by_test_id("regenerate-confirm")
    expect(confirm).to_be_visible()
    expect(confirm.get_by_test_id("regenerate-action")).to_have_text(["Command echo deployed"])
    page.keyboard.press("Escape")  # the focus is on Cancel: Escape cancels too
    expect(confirm).to_have_count(0)
    assert _master_requests(llm) == before, "regenerate ran without a yes"
    expect(page.get_by_test_id("stop-button")).to_have_count(0)

    reply.get_by_test_id("regenerate").click()
    confirm.get_by_test_id("regenerate-confirm-yes").click()
    expect(assistant(page).last.get_by_test_id("assistant-text")).to_have_text("Deployed again.")


def test_regenerate_of_a_text_only_turn_does_not_ask(page, llm):
    llm.script(text("Just words."), text("Other words."), match=MASTER)
    send(page, "say something")
    expect(assistant(page).last).to_have_attribute("data-done", "true")
    assistant(page).last.get_by_test_id("regenerate").click()
    expect(assistant(page).last.get_by_test_id("assistant-text")).to_have_text("Other words.")
    expect(page.get_by_test_id("regenerate-confirm")).to_have_count(0)
