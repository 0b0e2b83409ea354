"""Benchmark: an agent's model requests as its conversation grows (README, "Long conversations").

A conversation of T turns (T = 10, 100, 1,000) is written into a real SQLite database, as the turn loop
writes it: each turn a user message of about 80 words and a reply, every fifth turn a command whose
8,000-character output comes back as a tool result. Before each turn's model request the agent's view is
built by `server/turns/context_window.build_model_messages` (the summary request answered at once by a
stand-in model whose summary keeps the user's instruction lines, as a real model told so would). Printed
per conversation length:

- tokens/request: the estimated size (modules/llm/tokens.py) of the last requests, with compaction and
  without it (the whole history, as the server sent it before);
- compaction requests per 100 turns: the extra model requests compaction costs;
- build ms: the time to build one request (database read included), with compaction and without.

Run: `.venv/bin/python bench/context.py` (about a minute); `--window N` for another context window
(default 16,384 tokens), `--quick` for a smoke run.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # `python bench/context.py` puts bench/ first, not the project
    sys.path.insert(0, str(ROOT))

from modules.agents.profiles import load_profiles  # noqa: E402
from modules.config import Settings  # noqa: E402
from modules.context.budget import RefusedSizes  # noqa: E402
from modules.context.view import HistoryRow, HistoryView  # noqa: E402
from modules.llm import ModelReply  # noqa: E402
from modules.llm.tokens import count_messages, count_tools  # noqa: E402
from modules.storage import conversations  # noqa: E402
from modules.storage import messages as message_store  # noqa: E402
from modules.storage.db import Database  # noqa: E402
from modules.storage.messages import MessageDraft  # noqa: E402
from modules.storage.users import get_or_create_user  # noqa: E402
from modules.tools.agent_tools import AGENT_TOOLS  # noqa: E402
from modules.tools.registry import ToolRegistry  # noqa: E402
from modules.tools.run_command import RUN_COMMAND  # noqa: E402
from server.turns.context_window import build_model_messages  # noqa: E402
from server.turns.types import Turn  # noqa: E402

TOOLS = ToolRegistry([RUN_COMMAND, *AGENT_TOOLS])
PROFILES = load_profiles(None, {t.name for t in (RUN_COMMAND, *AGENT_TOOLS)})
LENGTHS = (10, 100, 1000)
SAMPLE = 10  # the figures of the last SAMPLE requests of a conversation
RULE = "INSTRUCTION: answer in English, cite the file you read"


class Summariser:
    """Answers a summary request at once: the instruction lines it was given, and one line on the rest."""

    def __init__(self) -> None:
        self.requests = 0

    def stream_chat(self, *, messages: list[dict], **_: object) -> ModelReply:
        self.requests += 1
        seen = "\n".join(m["content"] for m in messages[1:])
        rules = sorted({line.split("INSTRUCTION", 1)[1] for line in seen.splitlines() if "INSTRUCTION" in line})
        return ModelReply("\n".join(f"- the user said: INSTRUCTION{r}" for r in rules) +
                          "\n- since then: questions on the items, answered; logs read", [], "stop")


class Sink:
    def emit(self, event: object) -> None:
        pass


def turn_drafts(turn: int) -> list[MessageDraft]:
    said = RULE if turn == 1 else f"turn {turn}: what about item {turn}? " + " ".join(
        f"detail{(turn * 7 + i) % 89}" for i in range(80))
    drafts = [MessageDraft(role="user", content=said)]
    if turn % 5 == 0:
        call = {"id": f"c{turn}", "type": "function", "function": {"name": "run_command",
                                                                   "arguments": json.dumps({"command": "make"})}}
        output = "".join(f"step {i}: compiled module_{i}.o in {i % 7}.{i % 10}s\n" for i in range(400))[:8000]
        drafts += [MessageDraft(role="assistant", tool_calls=[call]),
                   MessageDraft(role="tool", content=json.dumps({"success": True, "output": output}),
                                tool_call_id=f"c{turn}")]
    return drafts


def whole_history(db: Database, agent_id: str, system: dict) -> list[dict]:
    """The request as the server built it before compaction: every stored message."""
    rows = [HistoryRow.from_row(r) for r in message_store.history_after(db, agent_id, -1)]
    return [system, *HistoryView.of(rows, 2**62, producer="").messages]


def run(turns: int, window: int, workdir: Path) -> dict[str, float]:
    db = Database(f"sqlite:///{workdir / f'context-{turns}.db'}")
    db.migrate()
    conv, master = conversations.create_conversation(db, get_or_create_user(db, "bench").id, "bench")
    model = Summariser()
    rt = SimpleNamespace(db=db, model=model, settings=Settings(llm_model="bench-model", model_context_tokens=window),
                         refused_sizes=RefusedSizes())
    profile = PROFILES["MasterAgent"]
    tools = TOOLS.definitions(list(profile.tools))
    system = {"role": "system", "content": profile.system_message("MasterAgent")}
    sizes: list[int] = []
    build_s: list[float] = []
    for turn in range(1, turns + 1):
        drained = message_store.append_messages(db, conv.id, master.id, turn_drafts(turn))
        task = Turn(task_id=f"t{turn}", conversation_id=conv.id, agent_id=master.id, display_name="MasterAgent",
                    profile=profile, drained=drained[:1])
        started = time.perf_counter()
        messages = build_model_messages(rt, task, Sink(), tools)
        build_s.append(time.perf_counter() - started)
        sizes.append(count_messages(messages) + count_tools(tools))
        if RULE not in "\n".join(m.get("content") or "" for m in messages):
            raise AssertionError(f"turn {turn}: the instruction of turn 1 is gone from the request")
        message_store.append_messages(db, conv.id, master.id,
                                      [MessageDraft(role="assistant", content=f"Item {turn}: done.")])
    whole_s = []
    for _ in range(3):
        started = time.perf_counter()
        whole = whole_history(db, master.id, system)
        whole_s.append(time.perf_counter() - started)
    db.dispose()
    return {
        "tokens": statistics.mean(sizes[-SAMPLE:]), "tokens_max": max(sizes),
        "whole_tokens": count_messages(whole) + count_tools(tools),
        "compactions_per_100": model.requests * 100 / turns,
        "build_ms": statistics.median(build_s[-SAMPLE:]) * 1000, "whole_ms": statistics.median(whole_s) * 1000,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--window", type=int, default=16_384, help="the model's context window in tokens")
    parser.add_argument("--quick", action="store_true", help="10 and 100 turns only")
    args = parser.parse_args(argv)
    lengths = LENGTHS[:2] if args.quick else LENGTHS
    print(f"context window {args.window:,} tokens (a quarter kept for the reply); master agent with its 6 tools")
    print(f"{'turns':>6} | {'tokens/request':>14} {'(max)':>7} | {'without':>9} | {'compaction req/100 turns':>24} "
          f"| {'build ms':>8} | {'without':>8}")
    with tempfile.TemporaryDirectory() as tmp:
        for turns in lengths:
            r = run(turns, args.window, Path(tmp))
            print(f"{turns:>6} | {r['tokens']:>14,.0f} {r['tokens_max']:>7,} | {r['whole_tokens']:>9,} | "
                  f"{r['compactions_per_100']:>24.1f} | {r['build_ms']:>8.2f} | {r['whole_ms']:>8.2f}")
    print("tokens/request: mean of the last 10 requests (estimate of modules/llm/tokens.py); without: the whole "
          "history as sent before compaction; build ms: median of the last 10 (with) and of 3 whole reads")
    return 0


if __name__ == "__main__":
    sys.exit(main())
