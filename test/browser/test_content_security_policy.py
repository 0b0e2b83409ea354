"""The UI under the strictest Content-Security-Policy it supports: scripts from the site only (no inline script,
no eval), styles from the site plus inline ones (KaTeX's and mermaid's). Math, diagrams and the chat work and the
browser reports no violation. The policy is added to every response here, as a server would send it."""

from __future__ import annotations

from playwright.sync_api import expect

from test.browser.helpers import assistant, send, wait_connected
from test.scripted_llm import text

UI_CSP = ("default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
          "font-src 'self' data:; connect-src 'self' ws: wss:; object-src 'none'; base-uri 'self'")  # fmt: skip
REPLY = "Math $E=mc^2$ and\n\n$$\\int_0^1 x\\,dx$$\n\n```mermaid\ngraph TD\n  A[Start] --> B[Ship]\n```\n"
WATCH = """window.__csp = []; document.addEventListener('securitypolicyviolation',
  (e) => window.__csp.push(`${e.violatedDirective} ${e.blockedURI}`));"""


def test_math_diagrams_and_chat_work_under_the_ui_policy(browser, ui_server, llm):
    context = browser.new_context()
    try:
        page = context.new_page()

        def with_policy(route):
            response = route.fetch()
            route.fulfill(response=response, headers={**response.headers, "content-security-policy": UI_CSP})

        page.route(f"{ui_server.url}/**", with_policy)
        page.add_init_script(WATCH)
        page.goto(ui_server.url + "/")
        wait_connected(page)
        llm.script(text(REPLY))
        send(page, "math and a diagram under the policy")
        body = assistant(page).last.get_by_test_id("assistant-text")
        expect(body.locator(".katex")).to_have_count(2)
        expect(body.get_by_test_id("mermaid-diagram").locator("svg")).to_have_count(1)
        assert page.evaluate("() => window.__csp") == []
        page.unroute_all(behavior="ignoreErrors")
    finally:
        context.close()
