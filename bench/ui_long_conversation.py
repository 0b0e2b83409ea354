"""Benchmark: opening a long conversation in the chat UI (hours of talk: a thousand turns with a command each).

A real `run.py` (eventlet, SQLite in a temp dir) serves the built UI (frontend/dist). The bench writes N turns
straight into a conversation's master history (the user's question, the master's `run_command` call, its 1.5 KB
result, an 840-character answer: 4 messages a turn), then times `GET /api/conversations/<cid>/messages` and,
in Debian's Chromium (headless, through Playwright), opening the conversation from the list until its last
question shows, with the page's element count and JavaScript heap after it.

The UI renders a long conversation's last 120 items and more as the reader scrolls up (ChatTimeline.vue), and reads
the history in pages (frontend/src/chat/pages.ts): the bytes of the master's history the open downloaded are printed
too. `--ui DIR` serves another build (`FRONTEND_DIR`), e.g. one of an earlier commit, to compare (docs/PERFORMANCE.md).

Run: `.venv/bin/python bench/ui_long_conversation.py` (`make frontend` first); `--turns N [N ...]` (default 1000
5000), `--runs N` (default 3), `--ui DIR`.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from modules.storage import messages as message_store  # noqa: E402
from modules.storage.db import Database  # noqa: E402
from modules.storage.messages import MessageDraft  # noqa: E402
from test.browser.conftest import CHROMIUM, CHROMIUM_ARGS, DESKTOP  # noqa: E402
from test.conftest import ServerProcess  # noqa: E402
from test.scripted_llm import ScriptedLLMServer  # noqa: E402

ANSWER = "A reply of ordinary length, as an agent writes after a command. " * 13
OUTPUT = json.dumps({"success": True, "output": "drwxr-xr-x 2 user user 4096 Dec  5 12:00 data\n" * 22})


def turns(n: int) -> list[MessageDraft]:
    drafts = []
    for i in range(n):
        call = {"id": f"call_{i}", "type": "function",
                "function": {"name": "run_command", "arguments": json.dumps({"command": "ls -la /workspace"})}}
        drafts += [MessageDraft(role="user", content=f"question {i}: what is in the workspace now?"),
                   MessageDraft(role="assistant", tool_calls=[call]),
                   MessageDraft(role="tool", content=OUTPUT, tool_call_id=f"call_{i}", name="run_command"),
                   MessageDraft(role="assistant", content=ANSWER)]
    return drafts


def title(n: int) -> str:
    return f"Hours of talk ({n} turns)"


def store(server: ServerProcess, n: int) -> str:
    conv = server.post("/api/conversations", {"title": title(n)}).json()
    db = Database(server.database_url)
    try:
        drafts = turns(n)
        for start in range(0, len(drafts), 500):
            with db.write() as s:
                message_store.append_in(s, conv["conversation_id"], conv["agents"][0]["agent_id"],
                                        drafts[start:start + 500])
    finally:
        db.dispose()
    return str(conv["conversation_id"])


def open_once(browser, server: ServerProcess, cid: str, n: int) -> tuple[float, int, float, int]:
    from playwright.sync_api import expect

    context = browser.new_context(viewport=DESKTOP)
    try:
        page = context.new_page()
        page.goto(server.url + "/")
        item = page.get_by_test_id("conversation-item").filter(has_text=title(n))
        master = f"/api/conversations/{cid}/messages"
        history: list = []  # the master's history, as the UI reads it
        page.on("response", lambda r: history.append(r) if master in r.url and "agent=" not in r.url else None)
        expect(item).to_be_visible(timeout=20_000)
        started = time.perf_counter()
        item.click()
        expect(page.get_by_text(f"question {n - 1}:")).to_be_visible(timeout=120_000)
        took = time.perf_counter() - started
        elements = page.evaluate("() => document.getElementsByTagName('*').length")
        heap = page.evaluate("() => performance.memory ? performance.memory.usedJSHeapSize : 0")
        return took, elements, heap / 1e6, sum(len(r.body()) for r in history)
    finally:
        context.close()


def bench(server: ServerProcess, browser, n: int, runs: int) -> None:
    cid = store(server, n)
    reads = []
    for _ in range(runs):
        started = time.perf_counter()
        answer = server.get(f"/api/conversations/{cid}/messages")
        reads.append(time.perf_counter() - started)
    print(f"history: {n} turns, {len(answer.json()['data'])} messages, "
          f"{len(answer.content) / 1e6:.1f} MB; GET messages median {statistics.median(reads) * 1000:.0f} ms")
    opens = [open_once(browser, server, cid, n) for _ in range(runs)]
    for i, (took, elements, heap, read) in enumerate(opens, 1):
        print(f"open {i}: {took * 1000:5.0f} ms, {elements} elements, {heap:.0f} MB JS heap, "
              f"{read / 1e6:.2f} MB of history read")
    print(f"open median ({n} turns): {statistics.median(o[0] for o in opens) * 1000:.0f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, nargs="+", default=[1000, 5000])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--ui", type=Path, default=ROOT / "frontend" / "dist", help="the built UI to serve")
    args = parser.parse_args()
    if not (args.ui / "index.html").is_file():
        sys.exit(f"{args.ui} is missing: run `make frontend`")
    from playwright.sync_api import sync_playwright

    data_dir = Path(tempfile.mkdtemp(prefix="ui-long-"))
    with ScriptedLLMServer() as llm:
        server = ServerProcess(data_dir, llm.base_url, env={"FRONTEND_DIR": str(args.ui.resolve())}).start()
        try:
            with sync_playwright() as pw:
                browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True)
                try:
                    for n in args.turns:
                        bench(server, browser, n, args.runs)
                finally:
                    browser.close()
        finally:
            server.stop()
            shutil.rmtree(data_dir, ignore_errors=True)


if __name__ == "__main__":
    main()
