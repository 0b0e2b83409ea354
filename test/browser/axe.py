"""axe-core (npm `axe-core`, pinned in frontend/package.json) run inside a page: WCAG 2.2 A and AA rules."""

from __future__ import annotations

from typing import Any

from playwright.sync_api import Page

from test.conftest import ROOT

AXE_JS = ROOT / "frontend" / "node_modules" / "axe-core" / "axe.min.js"
RUN = """() => axe.run(document, { runOnly: { type: 'tag', values: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa',
  'wcag22aa', 'best-practice', 'experimental'] }, resultTypes: ['violations'] })
  .then((r) => r.violations.map((v) => ({ id: v.id, help: v.help,
    nodes: v.nodes.map((n) => ({ target: n.target.join(' '), summary: n.failureSummary })) })))"""


def violations(page: Page) -> list[dict[str, Any]]:
    """axe's violations on the page as it is now (axe injected on first use)."""
    if not page.evaluate("() => typeof window.axe === 'object'"):
        # Evaluated through the debugging protocol: a <script> tag would break the server's CSP (script-src
        # 'self'), which the suite enforces.
        page.evaluate(AXE_JS.read_text() + "\n;typeof window.axe")
    return page.evaluate(RUN)


def describe(found: dict[str, list[dict[str, Any]]]) -> str:
    """One line per failing node, under the screen it was found on."""
    lines = []
    for screen, vs in found.items():
        for v in vs:
            for n in v["nodes"]:
                lines.append(f"{screen}: {v['id']} at {n['target']}: {n['summary'].splitlines()[-1].strip()}")
    return "\n".join(lines)
