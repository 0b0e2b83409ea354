"""The limits a command cannot talk its way out of: its timeout and the size of its log."""

from __future__ import annotations

import math

import pytest

from modules.tools.capped_log import CappedLog
from modules.tools.run_command import parse_timeout


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf, -5, 0, "10", True, [1]])
def test_a_timeout_that_is_not_a_positive_finite_number_is_refused(value):
    with pytest.raises(ValueError, match="timeout"):
        parse_timeout(value, 600)


@pytest.mark.parametrize(("value", "expected"), [(None, 600.0), (5, 5.0), (2.5, 2.5), (10_000, 600.0)])
def test_a_timeout_is_capped_by_the_operators_limit(value, expected):
    assert parse_timeout(value, 600) == expected


def test_a_log_under_its_cap_is_kept_whole(tmp_path):
    log = CappedLog(tmp_path / "out.log", max_bytes=1000)
    log.write(b"hello\n")
    log.close()
    assert (tmp_path / "out.log").read_bytes() == b"hello\n"


def test_a_log_past_its_cap_keeps_its_head_and_its_latest_tail(tmp_path):
    path = tmp_path / "out.log"
    log = CappedLog(path, max_bytes=1000)
    data = b"".join(b"%06d\n" % i for i in range(10_000))  # 70,000 bytes
    for start in range(0, len(data), 333):
        log.write(data[start:start + 333])
        log.flush()  # what a reader of a running command sees stays well formed
        assert len(path.read_bytes()) <= 1000 + 60
    log.close()
    content = path.read_bytes()
    head, marker, tail = content[:500], content[500:-500], content[-500:]
    assert head == data[:500] and tail == data[-500:]
    assert marker == b"\n[... 69000 bytes of output dropped ...]\n"
    assert log.dropped == 69_000


def test_what_a_running_command_printed_is_on_disk_at_once(tmp_path):
    path = tmp_path / "out.log"
    log = CappedLog(path, max_bytes=1000)
    log.write(b"started\n")
    assert path.read_bytes() == b"started\n"  # the API reads a running command's output from its log
    log.close()
