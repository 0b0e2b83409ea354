"""bench/load.py's comparison with the relays (issue 26): where a goal is out of reach, it says what bounds it."""

from __future__ import annotations

from bench.streaming.report import Summary, compare_with_relay

RELAY = Summary("bare relay", 4.3, 1.8, 110.0, 152.0, True)
PRODUCT = Summary("product (sqlite)", 8.2, 4.3, 60.0, 64.5, True)


def test_a_goal_the_relay_making_the_same_requests_misses_is_named_out_of_reach(capsys):
    compare_with_relay(RELAY, PRODUCT, Summary("relay, 3 requests", 5.2, 2.6, 95.0, 152.0, True))
    out = capsys.readouterr().out

    assert "product / relay, 3 requests            1.58x            1.65x" in out
    assert "first chunk p99 < 2 s is out of reach here" in out
    assert "completion p99 <= 1.5x the bare relay's is out of reach" not in out  # 5.2 s is within 1.5 x 4.3 s


def test_goals_the_relay_making_the_same_requests_meets_are_not_called_out_of_reach(capsys):
    compare_with_relay(RELAY, PRODUCT, Summary("relay, 3 requests", 5.0, 1.9, 95.0, 152.0, True))
    out = capsys.readouterr().out

    assert "MISSED first chunk p99 < 2 s" in out
    assert "out of reach" not in out


def test_without_the_staged_relay_only_the_bare_ratio_is_printed(capsys):
    compare_with_relay(RELAY, PRODUCT)
    out = capsys.readouterr().out

    assert "product / relay " in out and "relay, 3 requests" not in out and "what bounds them" not in out
