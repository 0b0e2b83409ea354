"""The UI under the server's own Content-Security-Policy (server/security_headers.py): scripts from the site only
(no inline script, no eval), styles from the site plus inline ones (mermaid's SVG carries a <style>). Math,
diagrams and the chat work and the browser reports no violation."""

from __future__ import annotations

from playwright.sync_api import expect

from test.browser.helpers import assistant, send, wait_connected
from test.scripted_llm import text

REPLY = "Math $E=mc^2$ and\n\n$$\\int_0^1 x\\,dx$$\n\n```mermaid\ngraph TD\n  A[Start] --> B[Ship]\n```\n"
WATCH = """window.__csp = []; document.addEventListener('securitypolicyviolation',
  (e) => window.__csp.push(`${e.violatedDirective} ${e.blockedURI}`));"""


def test_math_diagrams_and_chat_work_under_the_servers_policy(browser, ui_server, llm):
    context = browser.new_context()
    try:
        page = context.new_page()
        page.add_init_script(WATCH)
        response = page.goto(ui_server.url + "/")
        assert response is not None and "script-src 'self';" in response.headers["content-security-policy"]
        wait_connected(page)
        llm.script(text(REPLY))
        send(page, "math and a diagram under the policy")
        body = assistant(page).last.get_by_test_id("assistant-text")
        expect(body.locator(".katex")).to_have_count(2)
        expect(body.get_by_test_id("mermaid-diagram").locator("svg")).to_have_count(1)
        assert page.evaluate("() => window.__csp") == []
    finally:
        context.close()
