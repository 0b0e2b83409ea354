"""bench/orm_reads.py runs against the current schema and prints its three series and the ORM's share."""

from __future__ import annotations

import re

from bench.orm_reads import main


def test_the_orm_reads_bench_prints_each_series_and_the_difference(capsys, tmp_path):
    assert main(["--calls", "20", "--rounds", "2", "--agents", "2",
                 "--database-url", f"sqlite:///{tmp_path / 'bench.db'}"]) == 0
    out = capsys.readouterr().out
    for series in ("orm", "core", "session, no statement"):
        assert re.search(rf"^ *{re.escape(series)}: +\d+ µs a call \(rounds: \d+, \d+\)$", out, re.M), out
    assert re.search(r"^the ORM adds -?\d+ µs a read \(\d+\.\d\dx the Core read\), with 3 agents$", out, re.M), out
