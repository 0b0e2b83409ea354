"""bench/train_follow_up.py's estimate of what its thresholds do on dialogues they were not chosen on."""

from __future__ import annotations

from bench.train_follow_up import Example, out_of_sample


def turn(dialogue: int, label: int, p: float) -> tuple[Example, float]:
    return Example("set", f"set:{dialogue}", "en", (), label, True, False), p


def test_each_turn_is_counted_once_per_halving_on_the_half_that_did_not_choose():
    part = [turn(d, 1, 0.99) for d in range(40)] + [turn(d, 0, 0.2) for d in range(40)]
    est = out_of_sample(part, 0.02, splits=3)["set"]
    assert (est.follow_ups, est.switches) == (3 * 40, 3 * 40)
    assert (est.hits, est.misroutes) == (3 * 40, 0)  # clean data: every follow-up kept, no switch taken


def test_a_switch_the_choosing_half_never_saw_is_counted_where_it_falls():
    # one sure-looking switch in one dialogue: a half without it keeps everything, and takes it on the other half
    part = [turn(d, 1, 0.99) for d in range(40)] + [turn(0, 0, 0.995)] + [turn(d, 0, 0.2) for d in range(1, 40)]
    est = out_of_sample(part, 0.02, splits=4)["set"]
    assert est.misroutes == 4  # each halving: the half without it chose a low keep; the switch was counted once
