"""The English follow-up network of `bench/train_follow_up.py --net K` (issue 23's fifth and sixth rounds).

A linear part over every feature the logistic regression reads, plus `HIDDEN` rectified units fed by the features at
least `MIN_HIDDEN_COUNT` English turns have, fitted jointly on the English turns by AdaGrad (one example at a time,
the linear model's rate, L2 and weight on switches): the units can form the conjunctions a linear model cannot
(a short answer after a question that names another agent's domain). `K` networks fitted from different random
draws are averaged (the mean of their probabilities): one network's figures move 1-2 points with its seed. Chinese
messages keep the logistic regression (a network fitted on every turn lowered CrossWOZ). numpy is for the fit only;
each network is seeded, so the same data gives the same networks each run.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

HIDDEN, MIN_HIDDEN_COUNT, INIT = 16, 20, 0.1
EPOCHS, RATE, L2, MIN_COUNT, SWITCH_WEIGHT = 6, 0.2, 1e-3, 2, 5.0
DIGITS = 4  # weights are rounded as they are written, and every probability is computed from the rounded ones


class Labelled(Protocol):
    @property
    def names(self) -> tuple[str, ...]: ...

    @property
    def label(self) -> int: ...


@dataclass(frozen=True)
class Net:
    """One fitted network: p = sigmoid(sum of `linear` over the names + `out` . relu(`bias` + sum of `hidden` rows))."""

    linear: dict[str, float]
    hidden: dict[str, list[float]]  # a feature's row: what it adds to each unit's input, once per occurrence
    bias: list[float]
    out: list[float]

    def probability(self, names: Sequence[str]) -> float:
        z = sum(self.linear.get(n, 0.0) for n in names)
        units = list(self.bias)
        for n in names:
            row = self.hidden.get(n)
            if row is not None:
                units = [u + r for u, r in zip(units, row, strict=True)]
        z += sum(o * u for o, u in zip(self.out, units, strict=True) if u > 0.0)
        return 1.0 / (1.0 + math.exp(-max(-30.0, min(30.0, z))))

    def to_json(self) -> dict[str, object]:
        return {"linear": self.linear, "hidden": self.hidden, "bias": self.bias, "out": self.out}


def _index(data: Sequence[Labelled], min_count: int) -> dict[str, int]:
    counts: dict[str, int] = defaultdict(int)
    for e in data:
        for n in set(e.names):
            counts[n] += 1
    return {n: i for i, n in enumerate(sorted(n for n, c in counts.items() if c >= min_count))}


def _encode(names: Sequence[str], index: dict[str, int]) -> tuple[np.ndarray, np.ndarray]:
    ids, counts = np.unique(np.array([index[n] for n in names if n in index], dtype=np.int64), return_counts=True)
    return ids, counts.astype(np.float64)


def fit_net(data: Sequence[Labelled], seed: int) -> Net:
    """One network fitted on `data` (English turns), its random draws (initial hidden weights, order) from `seed`."""
    lin_index = _index(data, MIN_COUNT)
    hid_index = _index(data, MIN_HIDDEN_COUNT)
    rng = np.random.default_rng(seed)
    w, gw = np.zeros(len(lin_index)), np.full(len(lin_index), 1e-8)
    hw = rng.normal(0.0, INIT, (len(hid_index), HIDDEN))
    ghw = np.full_like(hw, 1e-8)
    b, gb = np.zeros(HIDDEN), np.full(HIDDEN, 1e-8)
    v = rng.normal(0.0, INIT, HIDDEN)
    gv = np.full(HIDDEN, 1e-8)
    encoded = [(*_encode(e.names, lin_index), *_encode(e.names, hid_index), e.label) for e in data]
    order = np.arange(len(encoded))
    for _ in range(EPOCHS):
        rng.shuffle(order)
        for i in order:
            li, lc, hi, hc, y = encoded[i]
            rows = hw[hi]
            pre = hc @ rows + b
            act = np.maximum(pre, 0.0)
            z = max(-30.0, min(30.0, float(lc @ w[li] + act @ v)))
            g = (1.0 / (1.0 + math.exp(-z)) - y) * (1.0 if y else SWITCH_WEIGHT)
            g_lin = g * lc + L2 * w[li]
            gw[li] += g_lin * g_lin
            w[li] -= RATE * g_lin / np.sqrt(gw[li])
            g_units = g * v * (pre > 0.0)
            g_v = g * act + L2 * v
            gv += g_v * g_v
            v -= RATE * g_v / np.sqrt(gv)
            g_rows = np.outer(hc, g_units) + L2 * rows
            ghw[hi] += g_rows * g_rows
            hw[hi] = rows - RATE * g_rows / np.sqrt(ghw[hi])
            gb += g_units * g_units
            b -= RATE * g_units / np.sqrt(gb)
    return Net({n: round(float(w[i]), DIGITS) for n, i in lin_index.items() if round(float(w[i]), DIGITS)},
               {n: [round(float(x), DIGITS) for x in hw[i]] for n, i in hid_index.items()},
               [round(float(x), DIGITS) for x in b], [round(float(x), DIGITS) for x in v])


def probabilities(nets: Sequence[Net], data: Sequence[Labelled]) -> list[float]:
    """The ensemble's probability (the mean of its networks') for each example, computed with numpy."""
    total = np.zeros(len(data))
    for net in nets:
        lin = {n: i for i, n in enumerate(net.linear)}
        hid = {n: i for i, n in enumerate(net.hidden)}
        w = np.array(list(net.linear.values()))
        hw = np.array(list(net.hidden.values())).reshape(len(hid), HIDDEN)
        b, v = np.array(net.bias), np.array(net.out)
        for k, e in enumerate(data):
            li, lc = _encode(e.names, lin)
            hi, hc = _encode(e.names, hid)
            z = float(lc @ w[li] + np.maximum(hc @ hw[hi] + b, 0.0) @ v)
            total[k] += 1.0 / (1.0 + math.exp(-max(-30.0, min(30.0, z))))
    return [float(p) for p in total / len(nets)]


def fit_ensemble(data: Sequence[Labelled], seeds: Sequence[int]) -> list[Net]:
    return [fit_net(data, s) for s in seeds]
