"""What the agents cost, in the browser (README, "Usage, budgets and metrics"): a reply shows its turn's
tokens and cost on hover, the header the conversation's total, and a send over budget says so."""

from __future__ import annotations

import re

from playwright.sync_api import expect

from test.browser.helpers import assistant, send
from test.scripted_llm import StepUsage, match_system, text

MASTER = match_system("You are MasterAgent")
PRICES = '[models."scripted-model"]\ninput = 2.0\noutput = 8.0\n'


def test_a_replys_tokens_and_cost_on_hover_the_total_in_the_header_and_the_budgets_end(
        make_server, open_page, llm, tmp_path):
    prices = tmp_path / "prices.toml"
    prices.write_text(PRICES)
    server = make_server(env={"MODEL_PRICES": str(prices), "BUDGET_TOKENS_PER_DAY": "1000"})
    page = open_page(server)
    llm.script(text("An answer that costs.", usage=StepUsage(900, 100)), match=MASTER)
    send(page, "spend some tokens")
    reply = assistant(page)
    expect(reply).to_have_attribute("data-done", "true")
    figures = reply.get_by_test_id("reply-usage")
    expect(figures).to_have_text("1.0k tokens · $0.0026")  # (900 × 2 + 100 × 8) / 1,000,000
    expect(figures).to_have_attribute("title", "900 prompt tokens (0 cached)\n100 completion tokens (0 reasoning)\n"
                                               "1 model request\ncost $0.0026")
    reply.hover()
    expect(figures).to_have_css("opacity", "1")
    header = page.get_by_test_id("conversation-usage")
    expect(header).to_contain_text("tokens · $")  # the routing request's estimate is part of the total
    expect(header).to_have_attribute("title", re.compile(r"model requests, \d+ estimated"))

    send(page, "and more")
    expect(page.get_by_test_id("send-error")).to_contain_text("budget of 1000 tokens is used up")
    expect(page.get_by_test_id("send-error")).to_contain_text("it resets at")
