"""Rank statistics for comparing two small samples of repeats (docs/verdicts.md).

Every function takes the measured values (positive: QPS, µs/op, ...) and works on their
logs, so a shift is a multiplicative change and results read as ratios column / base.

- Hodges-Lehmann shift estimate: the median of the n*m pairwise differences
  log y_j - log x_i (Hodges & Lehmann 1963).
- Mann-Whitney U test (Mann & Whitney 1947), two-sided, exact from the null distribution
  of U when there are no ties; with ties scipy's exact permutation test, or its normal
  approximation with tie correction for samples too large to enumerate.
- Moses interval: order statistics of the pairwise differences cut at the Mann-Whitney
  critical value (Moses 1965; Lehmann, "Nonparametrics", 1975, ch. 2), with the
  confidence it actually achieves, since tiny samples cannot reach every level.
- Benjamini-Hochberg step-up procedure (Benjamini & Hochberg 1995).
- Spread and power: Shamos' pairwise-difference scale estimate of log values, CVs, and
  the normal approximation of the minimum detectable change.
"""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from itertools import accumulate
from statistics import NormalDist

import numpy as np
import numpy.typing as npt

Values = Sequence[float] | npt.NDArray[np.float64]

EXACT_MAX_PAIRS = 2500  # n*m up to this: exact null distribution of U (50 vs 50)
PERMUTATION_MAX = 20_000  # ties: enumerate every split up to this many (9 vs 9: 48620 not)
SHAMOS = 1 / (math.sqrt(2) * NormalDist().inv_cdf(0.75))  # 1.0483: median |xi-xj| -> sigma
MAD = 1 / NormalDist().inv_cdf(0.75)  # 1.4826: median absolute deviation -> sigma
_Z = NormalDist()


def logs(values: Values) -> list[float]:
    """Natural logs of positive values; ValueError for anything else."""
    floats = [float(v) for v in values]
    if not all(0 < f < math.inf for f in floats):  # NaN fails too
        raise ValueError(f"samples must be finite positive values: {floats}")
    return list(map(math.log, floats))


def _differences(lx: list[float], ly: list[float]) -> list[float]:
    """Sorted n*m pairwise differences log y_j - log x_i (plain Python: the samples are
    small, and numpy's per-call overhead would dominate)."""
    if not lx or not ly:
        raise ValueError("both samples need at least one value")
    return sorted([b - a for b in ly for a in lx])


def _median(sorted_values: list[float]) -> float:
    k = len(sorted_values)
    return (sorted_values[(k - 1) // 2] + sorted_values[k // 2]) / 2


def hodges_lehmann(x: Values, y: Values) -> float:
    """Hodges-Lehmann estimate of the shift of log y against log x: exp() is the ratio."""
    return _median(_differences(logs(x), logs(y)))


@cache
def u_counts(n: int, m: int) -> tuple[int, ...]:
    """counts[u]: of the C(n+m, n) equally likely splits, how many give U = u.

    The generating function of U is the Gaussian binomial coefficient
    [n+m choose n]_q = prod_{i=1..n} (1 - q^(m+i)) / (1 - q^i), built factor by factor.
    """
    n, m = min(n, m), max(n, m)
    poly = [1]
    for i in range(1, n + 1):
        new = poly + [0] * (m + i)
        for k, c in enumerate(poly):
            new[k + m + i] -= c
        for k in range(i, len(new)):  # divide by 1 - q^i (exact)
            new[k] += new[k - i]
        poly = new[: i * m + 1]
    return tuple(poly)


@cache
def _u_cdf(n: int, m: int) -> tuple[float, ...]:
    counts = u_counts(n, m)
    total = math.comb(n + m, n)
    return tuple(c / total for c in accumulate(counts))


def smallest_p(n: int, m: int) -> float:
    """The smallest two-sided Mann-Whitney p-value n vs m repeats can give: 2/C(n+m, n)."""
    return min(1.0, 2 / math.comb(n + m, n))


def max_confidence(n: int, m: int) -> float:
    """The highest confidence a Moses interval from n vs m repeats can reach."""
    return 1 - smallest_p(n, m)


@dataclass(frozen=True)
class MannWhitney:
    u: float  # pairs (i, j) with y_j > x_i, ties counting 1/2
    p: float  # two-sided
    method: str  # exact | permutation (ties) | asymptotic (ties or large samples)


def mann_whitney(x: Values, y: Values) -> MannWhitney:
    """Two-sided Mann-Whitney U test of y against x.

    Without ties the p-value is exact: 2 * P(U <= min(u, nm - u)) from the null
    distribution of U, the same number as scipy.stats.mannwhitneyu(method="exact").
    With ties that distribution no longer applies: scipy's permutation test enumerates
    every split when there are at most PERMUTATION_MAX, otherwise its normal approximation
    with tie and continuity correction.
    """
    lx, ly = logs(x), logs(y)
    return _mann_whitney(lx, ly, _differences(lx, ly))


def _mann_whitney(lx: list[float], ly: list[float], d: list[float]) -> MannWhitney:
    n, m = len(lx), len(ly)
    below, above = bisect_left(d, 0.0), bisect_right(d, 0.0)
    u = n * m - above + 0.5 * (above - below)
    ties = len(set(lx + ly)) < n + m
    if not ties and n * m <= EXACT_MAX_PAIRS:
        tail = int(min(u, n * m - u))
        return MannWhitney(u, min(1.0, 2 * _u_cdf(n, m)[tail]), "exact")
    # scipy.stats costs about 2 s to import, and only tied samples need it.
    from scipy import stats as sps

    if ties and math.comb(n + m, n) <= PERMUTATION_MAX:
        how = sps.PermutationMethod(n_resamples=math.comb(n + m, n))
        r = sps.mannwhitneyu(ly, lx, alternative="two-sided", method=how)
        return MannWhitney(u, min(1.0, float(r.pvalue)), "permutation")
    r = sps.mannwhitneyu(ly, lx, alternative="two-sided", method="asymptotic")
    return MannWhitney(u, min(1.0, float(r.pvalue)), "asymptotic")


def mann_whitney_p(x: Values, y: Values) -> float:
    """Two-sided Mann-Whitney p-value of y against x (see mann_whitney)."""
    return mann_whitney(x, y).p


@cache
def _cut(n: int, m: int, confidence: float) -> tuple[int, float]:
    """(j, achieved): the interval [D(j), D(nm-1-j)] (0-based) of the sorted pairwise
    differences covers the true shift with probability achieved = 1 - 2 P(U <= j)."""
    if n * m <= EXACT_MAX_PAIRS:
        cdf = _u_cdf(n, m)
        limit = (1 - confidence) / 2 * (1 + 1e-9)  # 3 vs 3 reaches 90% exactly
        j = 0
        while j + 1 < len(cdf) and cdf[j + 1] <= limit:
            j += 1
        return j, 1 - 2 * cdf[j]
    mean, sd = n * m / 2, math.sqrt(n * m * (n + m + 1) / 12)
    z = _Z.inv_cdf((1 + confidence) / 2)
    j = max(0, math.floor(mean - 0.5 - z * sd))
    return j, 1 - 2 * _Z.cdf((j + 0.5 - mean) / sd)


def moses_interval(x: Values, y: Values, confidence: float) -> tuple[float, float, float]:
    """Moses distribution-free interval for the ratio exp(shift) of y against x:
    (low, high, achieved confidence).

    The confidence requested is met or exceeded when the sample sizes allow it; when they
    cannot reach it (3 vs 3 reaches at most 90%), the widest interval, from the smallest
    to the largest pairwise ratio, with the confidence it achieves.
    """
    return _moses(_differences(logs(x), logs(y)), len(x), len(y), confidence)


def _moses(d: list[float], n: int, m: int, confidence: float) -> tuple[float, float, float]:
    if not 0 < confidence < 1:
        raise ValueError("confidence must be between 0 and 1")
    j, achieved = _cut(n, m, confidence)
    return math.exp(d[j]), math.exp(d[-1 - j]), achieved


@dataclass(frozen=True)
class Shift:
    """hodges_lehmann, mann_whitney and moses_interval of one pair of samples."""

    estimate: float  # Hodges-Lehmann shift of the logs
    test: MannWhitney
    intervals: tuple[tuple[float, float, float], ...]  # one per confidence asked


def shift(x: Values, y: Values, confidences: Sequence[float] = ()) -> Shift:
    """The estimate, the test and Moses intervals at each confidence, from one sorted set
    of pairwise differences (what a verdict needs, computed once)."""
    lx, ly = logs(x), logs(y)
    d = _differences(lx, ly)
    intervals = tuple(_moses(d, len(lx), len(ly), c) for c in confidences)
    return Shift(_median(d), _mann_whitney(lx, ly, d), intervals)


def bh_adjusted(pvalues: Sequence[float]) -> list[float]:
    """Benjamini-Hochberg adjusted p-values: min over k >= rank of p_(k) * N / k, <= 1."""
    count = len(pvalues)
    order = sorted(range(count), key=lambda i: pvalues[i])
    out = [1.0] * count
    running = 1.0
    for rank in range(count, 0, -1):
        i = order[rank - 1]
        running = min(running, pvalues[i] * count / rank)
        out[i] = running
    return out


def benjamini_hochberg(pvalues: Sequence[float], alpha: float = 0.05) -> list[bool]:
    """Which hypotheses the Benjamini-Hochberg step-up procedure rejects at level alpha:
    every p_(k) with k <= the largest k such that p_(k) <= alpha * k / N."""
    return [q <= alpha for q in bh_adjusted(pvalues)]


def robust_log_sd(*samples: Values) -> float:
    """Robust standard deviation of log values, pooled over samples that may differ in
    location: Shamos' estimate 1.0483 * median |log a_i - log a_j| over the pairs i < j
    within each sample (50% of the pairs may be spoiled by outliers). NaN without pairs.
    """
    pairs = []
    for sample in samples:
        la = logs(sample)
        pairs += [abs(a - b) for i, a in enumerate(la) for b in la[i + 1 :]]
    return SHAMOS * _median(sorted(pairs)) if pairs else math.nan


def cv(values: Values) -> float:
    """Coefficient of variation: sample standard deviation / mean (NaN below 2 values)."""
    a = np.asarray(values, dtype=np.float64)
    return float(np.std(a, ddof=1) / np.mean(a)) if a.size >= 2 else math.nan


def robust_cv(values: Values) -> float:
    """Robust coefficient of variation: 1.4826 * median absolute deviation / median."""
    a = np.asarray(values, dtype=np.float64)
    if a.size < 2:
        return math.nan
    med = float(np.median(a))
    return MAD * float(np.median(np.abs(a - med))) / med


def min_n_for_p(alpha: float) -> int:
    """The fewest repeats per side at which the two-sided exact test can reach alpha."""
    n = 2
    while smallest_p(n, n) > alpha:
        n += 1
    return n


def _z_sum(alpha: float, power: float) -> float:
    return _Z.inv_cdf(1 - alpha / 2) + _Z.inv_cdf(power)


def min_detectable_change(sd_log: float, n: int, alpha: float = 0.05, power: float = 0.8) -> float:
    """The smallest change (0.05 = 5%) n repeats per side detect with the given power at
    two-sided level alpha, by the normal approximation on logs:
    log(1 + change) = (z_(1-alpha/2) + z_power) * sd_log * sqrt(2 / n).
    inf when n repeats cannot reach alpha at all (3 vs 3 at 0.05)."""
    if n < min_n_for_p(alpha):
        return math.inf
    return math.expm1(_z_sum(alpha, power) * sd_log * math.sqrt(2 / n))


def repeats_for_change(
    sd_log: float, change: float, alpha: float = 0.05, power: float = 0.8
) -> int:
    """Repeats per side to detect a change (0.05 = 5%, either way) with the given power at
    two-sided level alpha: the inverse of min_detectable_change, at least min_n_for_p."""
    if change <= 0:
        raise ValueError("change must be positive")
    n = math.ceil(2 * (_z_sum(alpha, power) * sd_log / math.log1p(change)) ** 2)
    return max(n, min_n_for_p(alpha))
