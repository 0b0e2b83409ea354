"""Browser fixtures: the built UI served by a real `run.py`, driven by Debian's Chromium through Playwright.

Outside CI a missing build or browser skips the browser suite with a clear message; in CI
(`CI` set) it fails, so a broken set-up cannot pass silently.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from test.conftest import ROOT, ServerProcess

DIST_INDEX = ROOT / "frontend" / "dist" / "index.html"
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
EXPECT_TIMEOUT_MS = 15_000
DESKTOP = {"width": 1280, "height": 820}
PHONE = {"width": 390, "height": 844}


def _unavailable(reason: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(reason, pytrace=False)
    pytest.skip(reason)


@pytest.fixture(scope="session")
def built_ui() -> Path:
    if not DIST_INDEX.is_file():
        _unavailable(f"{DIST_INDEX.relative_to(ROOT)} is missing: build the UI with `make frontend`")
    return DIST_INDEX


@pytest.fixture(scope="package")
def browser(built_ui: Path) -> Iterator[Any]:
    if not CHROMIUM.exists():
        _unavailable(f"{CHROMIUM} is missing: `apt-get install -y chromium`")
    try:
        from playwright.sync_api import expect, sync_playwright
    except ImportError:
        _unavailable("playwright is not installed: `pip install -r requirements-dev.txt`")
    expect.set_options(timeout=EXPECT_TIMEOUT_MS)
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True)
        try:
            yield browser
        finally:
            browser.close()


@pytest.fixture(scope="package")
def ui_server(tmp_path_factory: pytest.TempPathFactory, llm_server, built_ui: Path) -> Iterator[ServerProcess]:
    """One server for the browser suite (every test works in conversations of its own); it stops
    with the package, so it cannot take scripted steps meant for later suites."""
    data_dir = tmp_path_factory.mktemp("ui-server")
    server = ServerProcess(data_dir, llm_server.base_url).start()
    try:
        yield server
    finally:
        server.stop()


class PageErrors(list):
    """Uncaught exceptions of the page and breaches of its CSP: a test fails when the UI threw or broke it."""


HOSTILE_MARKUP_REPORTS = ("Executing inline event handler", "Applying inline style")


def _breaks_csp(text: str) -> bool:
    """A breach of the server's Content-Security-Policy (docs/API.md, "Security headers") by the UI. Inline
    handlers and styles in hostile Markdown that DOMPurify parses (in an inert document, before it strips
    them) are reported by Chromium as it blocks them there: that is the policy holding, not the UI breaking it."""
    return "Content Security Policy" in text and not text.startswith(HOSTILE_MARKUP_REPORTS)


def _new_page(browser: Any, viewport: dict[str, int], errors: PageErrors) -> tuple[Any, Any]:
    context = browser.new_context(viewport=viewport, reduced_motion="reduce")
    context.set_default_timeout(EXPECT_TIMEOUT_MS)
    page = context.new_page()
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.on("console", lambda msg: _breaks_csp(msg.text) and errors.append(msg.text))
    return context, page


@pytest.fixture
def open_page(browser):
    """Factory of pages (each in a fresh browser context); `open_page(server, viewport=PHONE)`."""
    contexts: list[Any] = []
    errors = PageErrors()

    def factory(server: ServerProcess, *, viewport: dict[str, int] | None = None, path: str = "/") -> Any:
        context, page = _new_page(browser, viewport or DESKTOP, errors)
        contexts.append(context)
        page.goto(server.url + path)
        return page

    yield factory
    for context in contexts:
        context.close()
    assert not errors, f"the page threw: {errors}"


@pytest.fixture
def page(open_page, ui_server, llm):
    """A desktop page on the shared server, with a freshly reset scripted model."""
    return open_page(ui_server)


def screenshot_dir(tmp_path: Path) -> Path:
    """docs/screenshots when UPDATE_SCREENSHOTS=1, else a temporary directory."""
    if os.environ.get("UPDATE_SCREENSHOTS") == "1":
        target = ROOT / "docs" / "screenshots"
        target.mkdir(parents=True, exist_ok=True)
        return target
    return tmp_path
