"""bench/export_memory.py exports a small conversation both ways, checks they wrote the same bytes, and prints
each format's peak memory."""

from __future__ import annotations

import re

from bench.export_memory import main


def test_the_export_memory_bench_prints_both_peaks_of_each_format(capsys):
    assert main(["--turns", "30", "--reply-chars", "500"]) == 0
    out = capsys.readouterr().out
    for name in ("json", "md"):
        assert re.search(rf"^ *{name}: \d+\.\d MB written; peak Python memory \d+\.\d MB whole, \d+\.\d MB streamed "
                         r"\(\d+x less\), same bytes$", out, re.M), out
