"""Benchmark: opening a long conversation in the chat UI (hours of talk: a thousand turns with a command each).

A real `run.py` (eventlet, SQLite in a temp dir) serves the built UI (frontend/dist). The bench writes N turns
straight into a conversation's master history (the user's question, the master's `run_command` call, its 1.5 KB
result, an 840-character answer: 4 messages a turn), then times `GET /api/conversations/<cid>/messages` and,
in Debian's Chromium (headless, through Playwright), opening the conversation from the list until its last
question shows, with the page's element count and JavaScript heap after it.

The UI renders a long conversation's last 120 items and more as the reader scrolls up (ChatTimeline.vue): before,
1,000 turns took 2.9-4.6 s to open, with 24,109 elements and 176-209 MB of heap (docs/PERFORMANCE.md).

Run: `.venv/bin/python bench/ui_long_conversation.py` (`make frontend` first); `--turns N` (default 1000),
`--runs N` (default 3).
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


def store(server: ServerProcess, n: int) -> str:
    conv = server.post("/api/conversations", {"title": "Hours of talk"}).json()
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


def open_once(browser, server: ServerProcess, cid: str, n: int) -> tuple[float, int, float]:
    from playwright.sync_api import expect

    context = browser.new_context(viewport=DESKTOP)
    try:
        page = context.new_page()
        page.goto(server.url + "/")
        item = page.get_by_test_id("conversation-item").filter(has_text="Hours of talk")
        expect(item).to_be_visible(timeout=20_000)
        started = time.perf_counter()
        item.click()
        expect(page.get_by_text(f"question {n - 1}:")).to_be_visible(timeout=120_000)
        took = time.perf_counter() - started
        elements = page.evaluate("() => document.getElementsByTagName('*').length")
        heap = page.evaluate("() => performance.memory ? performance.memory.usedJSHeapSize : 0")
        return took, elements, heap / 1e6
    finally:
        context.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    if not (ROOT / "frontend" / "dist" / "index.html").is_file():
        sys.exit("frontend/dist is missing: run `make frontend`")
    from playwright.sync_api import sync_playwright

    data_dir = Path(tempfile.mkdtemp(prefix="ui-long-"))
    with ScriptedLLMServer() as llm:
        server = ServerProcess(data_dir, llm.base_url).start()
        try:
            cid = store(server, args.turns)
            reads = []
            for _ in range(args.runs):
                started = time.perf_counter()
                answer = server.get(f"/api/conversations/{cid}/messages")
                reads.append(time.perf_counter() - started)
            print(f"history: {args.turns} turns, {len(answer.json()['data'])} messages, "
                  f"{len(answer.content) / 1e6:.1f} MB; GET messages median {statistics.median(reads) * 1000:.0f} ms")
            with sync_playwright() as pw:
                browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True)
                try:
                    opens = [open_once(browser, server, cid, args.turns) for _ in range(args.runs)]
                finally:
                    browser.close()
            for i, (took, elements, heap) in enumerate(opens, 1):
                print(f"open {i}: {took * 1000:5.0f} ms, {elements} elements, {heap:.0f} MB JS heap")
            print(f"open median: {statistics.median(o[0] for o in opens) * 1000:.0f} ms")
        finally:
            server.stop()
            shutil.rmtree(data_dir, ignore_errors=True)


if __name__ == "__main__":
    main()
