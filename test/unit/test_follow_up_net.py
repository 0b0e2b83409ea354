"""bench/fastpath/follow_up_net.py: the network of `bench/train_follow_up.py --net` (issue 23, sixth round)."""

from __future__ import annotations

import random

import pytest

pytest.importorskip("numpy")

from bench.fastpath import follow_up_net as net_module  # noqa: E402
from bench.train_follow_up import Example  # noqa: E402


def xor_data(n: int = 400) -> list[Example]:
    """A follow-up when exactly one of `a`, `b` is there: a conjunction no linear model forms."""
    rng = random.Random(0)
    out = []
    for i in range(n):
        a, b = rng.random() < 0.5, rng.random() < 0.5
        names = ("bias", *(["a"] if a else []), *(["b"] if b else []), f"noise{i % 7}")
        out.append(Example("set", f"set:{i}", "en", names, int(a != b), True, False))
    return out


def test_the_fit_is_the_same_each_run_and_the_pure_python_score_is_numpy_s(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(net_module, "MIN_HIDDEN_COUNT", 5)
    monkeypatch.setattr(net_module, "EPOCHS", 30)
    data = xor_data()
    first, again = net_module.fit_net(data, seed=3), net_module.fit_net(data, seed=3)
    assert first == again
    second = net_module.fit_net(data, seed=4)
    fast = net_module.probabilities([first, second], data)
    slow = [(first.probability(e.names) + second.probability(e.names)) / 2 for e in data[:20]]
    assert fast[:20] == pytest.approx(slow, abs=1e-12)
    right = sum((p >= 0.5) == bool(e.label) for p, e in zip(fast, data, strict=True))
    assert right >= 0.95 * len(data)  # the units learn what the linear part cannot
