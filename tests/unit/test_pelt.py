"""analysis/pelt.py gives exactly the segments `ruptures`' Pelt gives with the same cost
and penalty (the library is the reference here; the site needs the speed): on random
series of many lengths, with steps, ties, flat stretches and uneven weights."""

from __future__ import annotations

import math

import numpy as np
import ruptures

from dbregress.analysis.pelt import segment_starts


class WeightedLevel(ruptures.base.BaseCost):  # type: ignore[misc]
    """The segment cost as ruptures takes it: weighted squared deviations of the means
    from the segment's weighted mean."""

    model = "weighted_level"
    min_size = 1

    def __init__(self, m: np.ndarray, w: np.ndarray) -> None:
        zero = np.zeros(1)
        self.sw = np.concatenate([zero, np.cumsum(w)])
        self.swm = np.concatenate([zero, np.cumsum(w * m)])
        self.swm2 = np.concatenate([zero, np.cumsum(w * m * m)])
        self.signal = m.reshape(-1, 1)

    def fit(self, signal: np.ndarray) -> WeightedLevel:
        return self

    def error(self, start: int, end: int) -> float:
        sw = self.sw[end] - self.sw[start]
        swm = self.swm[end] - self.swm[start]
        return float(self.swm2[end] - self.swm2[start] - swm * swm / sw)


def reference(m: np.ndarray, w: np.ndarray) -> list[int]:
    algo = ruptures.Pelt(custom_cost=WeightedLevel(m, w), min_size=1, jump=1)
    ends = algo.fit(m.reshape(-1, 1)).predict(pen=2 * math.log(len(m)))
    return [int(e) for e in ends[:-1]]


def series(rng: np.random.Generator, n: int, kind: int) -> tuple[np.ndarray, np.ndarray]:
    level = np.zeros(n)
    for _ in range(rng.integers(0, 4)):
        level[rng.integers(0, n) :] += rng.normal(0, 0.2)
    noise = rng.normal(0, 10 ** rng.uniform(-4, -1), n)
    m = level + noise
    if kind == 1:  # ties: values repeated exactly
        m = np.round(m, 2)
    elif kind == 2:  # flat stretches
        m[: n // 2] = m[0]
    w = rng.uniform(0.5, 2.0, n) * 10 ** rng.uniform(2, 6)
    if kind == 3:
        w = np.full(n, w[0])
    return m, w


def test_the_same_segments_as_ruptures() -> None:
    rng = np.random.default_rng(44)
    for trial in range(600):
        n = int(rng.integers(2, 60)) if trial % 10 else int(rng.integers(60, 300))
        m, w = series(rng, n, trial % 4)
        assert segment_starts(m, w) == reference(m, w), (trial, n)


def test_an_exact_step_and_a_flat_series() -> None:
    m = np.array([1.0] * 10 + [1.2] * 10)
    w = np.full(20, 1e4)
    assert segment_starts(m, w) == reference(m, w) == [10]
    flat = np.full(12, 3.0)
    assert segment_starts(flat, w[:12]) == reference(flat, w[:12]) == []
