"""Benchmark: peak Python memory of exporting a long conversation, whole against streamed (docs/PERFORMANCE.md).

A conversation of `--turns` turns (the user's message and a reply of `--reply-chars` characters each: about 3 MB
of history at 1,000 turns of 3,000 characters) and a sub-agent with a short history, in a new SQLite file. Each
format is exported the way the server did before (every history read whole, the document built, then rendered at
once: test/export_reference.py) and the way it does now (server/api/export.py's batches written piece by piece by
server/api/export_formats.py), the chunks consumed as a client reads them. Prints tracemalloc's peak over each
(what the export allocated beyond what was held before it began) and checks that both wrote the same bytes.

Run: `.venv/bin/python bench/export_memory.py [--turns N] [--reply-chars C]` (about a minute at 1,000 turns).
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import tempfile
import tracemalloc
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from modules.storage import conversations, messages  # noqa: E402
from modules.storage.db import Database  # noqa: E402
from modules.storage.messages import MessageDraft  # noqa: E402
from modules.storage.models import Conversation  # noqa: E402
from server.api.export import agent_histories, agents_master_first  # noqa: E402
from server.api.export_formats import json_chunks, markdown_chunks  # noqa: E402
from server.api.serializers import agent_out, conversation_out, message_out  # noqa: E402
from test.export_reference import export_json, export_markdown  # noqa: E402
from test.unit.teams import conversation_with_sub_agent  # noqa: E402

EXPORTED_AT = "2026-12-05T00:00:00Z"


def _fill(db: Database, turns: int, reply_chars: int) -> Conversation:
    conv, master, sub, _ = conversation_with_sub_agent(db)
    line = "The museum opens at ten; tickets are sold until half past five. "
    reply = (line * (reply_chars // len(line) + 1))[:reply_chars]
    for start in range(0, turns, 100):
        drafts = []
        for turn in range(start, min(turns, start + 100)):
            drafts += [MessageDraft("user", f"turn {turn}: when does it open?"),
                       MessageDraft("assistant", f"{turn}: {reply}")]
        messages.append_messages(db, conv.id, master.id, drafts)
    messages.append_messages(db, conv.id, sub.id, [MessageDraft("user", "find opening hours"),
                                                   MessageDraft("assistant", "Open 10:00-18:00.")])
    found = conversations.get_conversation(db, conv.id)
    assert found is not None
    return found


def _whole_document(db: Database, conv: Conversation) -> dict[str, Any]:
    """The document as the server built it before it streamed: every history read whole."""
    entries = []
    for agent in agents_master_first(db, conv.id):
        kept = [m for m in messages.list_messages(db, agent.id) if m.typed_meta.regenerate_of is None]
        entries.append({"agent": agent_out(agent).model_dump(mode="json"),
                        "messages": [message_out(m).model_dump(mode="json") for m in kept]})
    return {"conversation": conversation_out(conv).model_dump(mode="json"), "agents": entries}


def _digest(chunks: Iterable[str]) -> tuple[str, int]:
    """What a client receives, consumed chunk by chunk: its SHA-256 and length in bytes."""
    sha, size = hashlib.sha256(), 0
    for chunk in chunks:
        data = chunk.encode()
        sha.update(data)
        size += len(data)
    return sha.hexdigest(), size


def _peak(export: Callable[[], tuple[str, int]]) -> tuple[float, tuple[str, int]]:
    """MB tracemalloc saw at most while `export` ran, and what it wrote."""
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        base = tracemalloc.get_traced_memory()[0]
        written = export()
        return (tracemalloc.get_traced_memory()[1] - base) / 1e6, written
    finally:
        tracemalloc.stop()


def measure(db: Database, conv: Conversation) -> list[tuple[str, float, float, int]]:
    """(format, MB whole, MB streamed, bytes written) of each format."""
    conversation = conversation_out(conv).model_dump(mode="json")

    def histories() -> Any:
        return agent_histories(db, agents_master_first(db, conv.id))

    formats = {
        "json": (lambda: _digest([export_json(_whole_document(db, conv))]),
                 lambda: _digest(json_chunks(conversation, histories()))),
        "md": (lambda: _digest([export_markdown(_whole_document(db, conv), EXPORTED_AT)]),
               lambda: _digest(markdown_chunks(conversation, histories(), EXPORTED_AT))),
    }
    rows = []
    for name, (whole, streamed) in formats.items():
        whole_mb, whole_out = _peak(whole)
        streamed_mb, streamed_out = _peak(streamed)
        if whole_out != streamed_out:
            raise AssertionError(f"{name}: the streamed export differs from the whole one")
        rows.append((name, whole_mb, streamed_mb, whole_out[1]))
    return rows


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--turns", type=int, default=1000)
    p.add_argument("--reply-chars", type=int, default=3000)
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        db = Database(f"sqlite:///{tmp}/export_memory.db")
        conv = _fill(db, args.turns, args.reply_chars)
        print(f"{args.turns} turns, replies of {args.reply_chars} characters")
        for name, whole_mb, streamed_mb, size in measure(db, conv):
            print(f"{name:>4}: {size / 1e6:.1f} MB written; peak Python memory {whole_mb:.1f} MB whole, "
                  f"{streamed_mb:.1f} MB streamed ({whole_mb / streamed_mb:.0f}x less), same bytes")
        db.dispose()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
