"""bench/conversation_pages.py runs against the current schema, before and after migration 0014's index."""

from __future__ import annotations

import re

from bench.conversation_pages import main


def test_the_conversation_pages_bench_times_each_page_with_either_index(capsys, tmp_path):
    assert main(["--conversations", "300", "--calls", "2", "--database-url", f"sqlite:///{tmp_path / 'b.db'}"]) == 0
    out = capsys.readouterr().out
    for label in ("with 0014's index", "with 0013's (updated_at alone)"):
        assert re.search(rf"^  {re.escape(label)}: first page [\d.]+ ms, at 150 [\d.]+ ms, at 200 [\d.]+ ms$", out,
                         re.M), out
    assert "USING INDEX ix_conversations_user_page (user_id=? AND updated_at<?)" in out
