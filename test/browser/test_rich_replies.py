"""Replies with math, task lists and diagrams, as the scripted model writes them, rendered in Chromium."""

from __future__ import annotations

from playwright.sync_api import expect

from test.browser.helpers import assistant, send
from test.scripted_llm import text

MATH_REPLY = (
    "Energy: $E=mc^2$, and inline \\(a_1 + a_2\\).\n\n"
    "$$\\int_0^1 x^2 \\, dx = \\frac{1}{3}$$\n\n"
    "\\[\n\\sum_{k=1}^{n} k = \\frac{n(n+1)}{2}\n\\]\n\n"
    "It costs $5 and $10 in total.\n\n"
    "Shell: `echo $HOME $PATH` stays code.\n\n"
    "```sh\nexport A=$1 B=$2\n```\n"
)

TASKS_REPLY = "Plan:\n\n- [x] read the logs\n- [ ] fix the parser\n- plain item\n"

MERMAID_REPLY = (
    "The flow:\n\n"
    "```mermaid\ngraph TD\n  A[Start] --> B{Works?}\n  B -->|yes| C[Ship]\n"
    '  B -->|no| D["<img src=x onerror=window.__xss=1> fix"]\n  click C call window.__clicked()\n```\n'
)


def _reply(page, llm, body: str, prompt: str):
    llm.script(text(body, chunk_size=9))
    send(page, prompt)
    reply = assistant(page).last
    expect(reply).to_have_attribute("data-done", "true")
    return reply.get_by_test_id("assistant-text")


def test_math_is_typeset_inline_and_display_and_leaves_prices_and_code_alone(page, llm):
    body = _reply(page, llm, MATH_REPLY, "show me some maths")
    expect(body.locator(".katex")).to_have_count(4)
    expect(body.locator(".katex-display")).to_have_count(2)
    # KaTeX's MathML copy holds the TeX as its annotation: what was typeset is what was written
    tex = body.locator("annotation").all_text_contents()
    assert tex == ["E=mc^2", "a_1 + a_2", "\\int_0^1 x^2 \\, dx = \\frac{1}{3}",
                   "\\sum_{k=1}^{n} k = \\frac{n(n+1)}{2}"], tex  # fmt: skip
    expect(body).to_contain_text("It costs $5 and $10 in total.")
    expect(body.locator("p code")).to_have_text("echo $HOME $PATH")
    expect(body.locator("pre code")).to_have_text("export A=$1 B=$2")


def test_a_task_list_shows_disabled_boxes(page, llm):
    body = _reply(page, llm, TASKS_REPLY, "what is the plan")
    boxes = body.locator("li input[type=checkbox]")
    expect(boxes).to_have_count(2)
    expect(boxes.first).to_be_checked()
    expect(boxes.first).to_be_disabled()
    expect(boxes.nth(1)).not_to_be_checked()
    expect(boxes.nth(1)).to_be_disabled()
    expect(body.locator("li").nth(2).locator("input")).to_have_count(0)


def test_mermaid_is_loaded_only_for_a_diagram_and_drawn_without_script(page, llm):
    body = _reply(page, llm, "No diagram here, just `code`.", "say something plain")
    expect(body).to_contain_text("No diagram here")
    loaded = "() => performance.getEntriesByType('resource').some((e) => /mermaid/.test(e.name))"
    assert page.evaluate(loaded) is False, "mermaid was loaded before any diagram"

    body = _reply(page, llm, MERMAID_REPLY, "draw the flow")
    diagram = body.get_by_test_id("mermaid-diagram")
    expect(diagram.locator("svg")).to_have_count(1)
    expect(diagram).to_contain_text("Ship")
    assert page.evaluate(loaded) is True
    expect(body.locator("code.language-mermaid")).to_have_count(0)
    expect(diagram.locator("script, foreignObject, img, a")).to_have_count(0)
    handlers = diagram.evaluate(
        "(d) => [...d.querySelectorAll('*')].flatMap((el) => el.getAttributeNames().filter((n) => /^on/i.test(n)))"
    )
    assert handlers == []
    diagram.get_by_text("Ship").click()
    assert page.evaluate("() => [window.__xss, window.__clicked]") == [None, None]


def test_a_broken_diagram_stays_as_code_with_the_reason(page, llm):
    body = _reply(page, llm, "```mermaid\ngraph TD\n  A --> (((\n```\n", "draw a broken one")
    expect(body.get_by_test_id("mermaid-error")).to_contain_text("Diagram not drawn")
    expect(body.locator("code.language-mermaid")).to_contain_text("graph TD")
