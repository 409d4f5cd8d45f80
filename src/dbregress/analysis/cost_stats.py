"""Welch's t-test on log counts, and the spreads the cost verdicts floor it with: the
pooled within-build spread, the gap between two clusters of one build's replays, a
side's range. Pure functions of numbers, apart from analysis/cost.py, which decides
which replays and floors go in and what the figures mean."""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from dbregress.analysis import distributions

# Clusters: a gap between a side's sorted log counts at least this many times the larger
# cluster's own range (and at least half the band) says the count took two states.
SPLIT_RATIO = 4.0


@dataclass(frozen=True)
class Welch:
    d: float
    se: float
    df: float
    p: float


def log_values(values: Sequence[float]) -> list[float]:
    return [math.log(v) for v in values]


def sum_squares(logs: Sequence[float]) -> float:
    mean = statistics.fmean(logs)
    return sum((v - mean) ** 2 for v in logs)


def pooled_log_sd(groups: Iterable[Sequence[float]]) -> float | None:
    """The pooled within-group standard deviation of log counts: each group (the replays
    of one build in one run) deviates from its own mean, sum of squares over sum of
    (n - 1). None without a group of two."""
    ss = df = 0.0
    for g in groups:
        values = [v for v in g if v > 0 and math.isfinite(v)]
        if len(values) >= 2:
            ss += sum_squares(log_values(values))
            df += len(values) - 1
    return math.sqrt(ss / df) if df else None


def cluster_gap(values: Sequence[float], band: float) -> float:
    """The gap (in log) between two clusters of one build's replays, 0 when they do not
    split: a gap between sorted log counts of at least band / 2 and at least SPLIT_RATIO
    times the larger of the two clusters' ranges (two states of the count)."""
    logs = sorted(log_values([v for v in values if v > 0 and math.isfinite(v)]))
    best = 0.0
    for k in range(len(logs) - 1):
        gap = logs[k + 1] - logs[k]
        within = max(logs[k] - logs[0], logs[-1] - logs[k + 1])
        if gap >= band / 2 and gap > SPLIT_RATIO * within:
            best = max(best, gap)
    return best


def welch(lx: Sequence[float], ly: Sequence[float], floor: float) -> Welch:
    vx = max(statistics.variance(lx), floor**2)
    vy = max(statistics.variance(ly), floor**2)
    ax, ay = vx / len(lx), vy / len(ly)
    se = math.sqrt(ax + ay)
    df = (ax + ay) ** 2 / (ax**2 / (len(lx) - 1) + ay**2 / (len(ly) - 1))
    d = statistics.fmean(ly) - statistics.fmean(lx)
    p = 2 * distributions.t_sf(abs(d) / se, df)
    return Welch(d, se, df, p)


def interval(w: Welch, confidence: float) -> tuple[float, float]:
    half = distributions.t_ppf(0.5 + confidence / 2, w.df) * w.se
    return math.exp(w.d - half), math.exp(w.d + half)


def spread(values: Sequence[float]) -> float:
    return max(values) / min(values) - 1 if len(values) >= 2 else 0.0
