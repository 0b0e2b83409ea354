"""The threshold search of bench/train_follow_up.py: one threshold per tie of the rules' verdict, each tune set's
misroutes within the bound, and the rate of switches among what the model takes from "undecided" over all sets."""

from __future__ import annotations

from bench.train_follow_up import Example, thresholds
from modules.multi_agent.follow_up import Tie


def examples(group: str, tie: Tie, label: int, p: float, n: int) -> list[tuple[Example, float]]:
    rules_continue = tie in (Tie.REPLY, Tie.REFERENCE)
    return [(Example(group, f"{group}:{tie}:{label}:{i}", "en", (), label, rules_continue, False, tie), p)
            for i in range(n)]


def search(part: list[tuple[Example, float]], bound: float = 0.02) -> dict[Tie, float]:
    return thresholds([e for e, _ in part], [p for _, p in part], bound)[0]


def test_an_answer_to_the_reply_and_a_reference_back_get_thresholds_of_their_own():
    part = (examples("a", Tie.REPLY, 1, 0.6, 100) + examples("a", Tie.REFERENCE, 1, 0.99, 100)
            + examples("a", Tie.REFERENCE, 0, 0.95, 10) + examples("a", Tie.REFERENCE, 1, 0.9, 100)
            + examples("a", Tie.NO_TIE, 0, 0.3, 40))
    chosen = search(part)
    assert chosen[Tie.REPLY] <= 0.6  # no switch among the answers: all kept
    assert 0.95 < chosen[Tie.REFERENCE] <= 0.99  # the references' switches held back with those under 0.99
    assert chosen[Tie.NO_TIE] > 1  # nothing to gain: never taken


def test_the_rate_of_switches_taken_from_undecided_is_over_all_sets():
    # one switch among a small set's 50 takes is 2 %; among every set's 1,050 takes, under 0.5 %
    part = (examples("small", Tie.NO_TIE, 1, 0.999, 49) + examples("small", Tie.NO_TIE, 0, 0.999, 1)
            + examples("small", Tie.NO_TIE, 0, 0.1, 99) + examples("big", Tie.NO_TIE, 1, 0.999, 1000)
            + examples("big", Tie.NO_TIE, 0, 0.1, 100))
    assert search(part)[Tie.NO_TIE] <= 0.999
    too_many = part + examples("big", Tie.NO_TIE, 0, 0.999, 5)  # 6 of 1,055: over 0.5 %
    assert search(too_many, bound=0.1)[Tie.NO_TIE] > 1
