"""PELT (Killick, Fearnhead & Eckley 2012) from `ruptures` over a series of column means,
with the segment cost of a constant level under known per-column weights: the search
behind analysis/changepoints.py. A module of its own so that only a command that
segments a series imports ruptures, which loads scipy.stats, scipy.spatial and
scipy.signal as it is imported (about 2.5 s at every start of the command line)."""

from __future__ import annotations

import math

import numpy as np
import ruptures


class WeightedLevel(ruptures.base.BaseCost):  # type: ignore[misc]
    """Segment cost for ruptures: the weighted squared deviations of the column means
    from the segment's weighted mean (cumulative sums make each call O(1))."""

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


def segment_starts(m: np.ndarray, w: np.ndarray) -> list[int]:
    """Indices where PELT starts a new segment, with Schwarz's penalty 2 log K."""
    algo = ruptures.Pelt(custom_cost=WeightedLevel(m, w), min_size=1, jump=1)
    ends = algo.fit(m.reshape(-1, 1)).predict(pen=2 * math.log(len(m)))
    return [int(e) for e in ends[:-1]]
