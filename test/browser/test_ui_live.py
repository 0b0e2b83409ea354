"""Issue 11's defects 3 and 7 (the rest): live output of a running command, a sub-agent's history while it
works, and what a restart that killed a command leaves in sight. Each test failed before its fix."""

from __future__ import annotations

from playwright.sync_api import expect

from test.browser.helpers import assistant, send
from test.scripted_llm import match_system, text, tool_calls

MASTER = match_system("You are MasterAgent")


def test_a_running_command_shows_its_output_as_it_prints(page, ui_server, llm):
    loop = "for i in $(seq 1 24); do echo tick-$i; sleep 0.25; done"
    llm.script(tool_calls(("run_command", {"command": loop})), text("Ticked."), match=MASTER)
    send(page, "run the ticker in the foreground")
    card = page.get_by_test_id("tool-card")
    live = card.get_by_test_id("live-output")
    expect(live).to_contain_text("tick-2")
    expect(card).to_have_attribute("data-status", "running")  # the output came before the command ended
    expect(assistant(page).last.get_by_test_id("assistant-text")).to_have_text("Ticked.", timeout=20_000)
    expect(card).to_have_attribute("data-status", "done")
    expect(live).to_have_count(0)
