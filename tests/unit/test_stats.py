"""Rank statistics on log values: known answers, agreement with scipy, interval coverage."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pytest
from scipy import stats as sps

from dbregress.analysis import stats

E = np.exp


def test_null_distribution_of_u() -> None:
    assert stats.u_counts(3, 3) == (1, 1, 2, 3, 3, 3, 3, 2, 1, 1)
    for n, m in [(1, 1), (2, 5), (5, 5), (7, 4), (10, 10)]:
        counts = stats.u_counts(n, m)
        assert len(counts) == n * m + 1 and sum(counts) == math.comb(n + m, n)
        assert counts == counts[::-1] == stats.u_counts(m, n)


def test_hodges_lehmann_known_answers() -> None:
    # pairwise ratios 0.5 1 1 2 2 2 4 4 8: the median is 2
    assert stats.hodges_lehmann([1, 2, 4], [2, 4, 8]) == pytest.approx(math.log(2))
    # log differences 1.5 + (j - i): -1.5, -0.5 x2, 0.5 x3, 1.5 x4, 2.5 x3, 3.5 x2, 4.5
    assert stats.hodges_lehmann(E([0, 1, 2, 3]), E([1.5, 2.5, 3.5, 4.5])) == pytest.approx(1.5)
    assert stats.hodges_lehmann([100, 100], [90, 90]) == pytest.approx(math.log(0.9))


def test_moses_interval_known_answers() -> None:
    x, y = E([0.0, 1, 2, 3]), E([1.5, 2.5, 3.5, 4.5])
    # 4 vs 4: P(U <= 0) = 1/70, P(U <= 1) = 2/70, P(U <= 2) = 4/70
    lo, hi, achieved = stats.moses_interval(x, y, 0.90)
    assert (math.log(lo), math.log(hi)) == pytest.approx((-0.5, 3.5))
    assert achieved == pytest.approx(1 - 4 / 70)
    lo, hi, achieved = stats.moses_interval(x, y, 0.95)
    assert (math.log(lo), math.log(hi)) == pytest.approx((-1.5, 4.5))
    assert achieved == pytest.approx(1 - 2 / 70)
    # 3 vs 3 reaches 90% at most: asking for 95% gives the widest interval at 90%
    for confidence in (0.9, 0.95):
        lo, hi, achieved = stats.moses_interval([1, 2, 4], [2, 4, 8], confidence)
        assert (lo, hi, achieved) == pytest.approx((0.5, 8.0, 0.9))


def test_mann_whitney_known_answers() -> None:
    assert stats.mann_whitney_p([1, 2, 3], [4, 5, 6]) == pytest.approx(0.1)
    assert stats.mann_whitney_p([4, 5, 6], [1, 2, 3]) == pytest.approx(0.1)
    assert stats.mann_whitney_p(range(1, 6), range(6, 11)) == pytest.approx(2 / 252)
    r = stats.mann_whitney([1, 2, 3], [4, 5, 6])
    assert (r.u, r.method) == (9.0, "exact")
    assert stats.mann_whitney_p([1, 3, 5], [2, 4, 6]) == pytest.approx(0.7)


def test_shift_is_the_three_in_one() -> None:
    rng = np.random.default_rng(8)
    x, y = rng.lognormal(0, 0.1, 6), rng.lognormal(0.1, 0.1, 7)
    s = stats.shift(x, y, (0.95, 0.9))
    assert s.estimate == stats.hodges_lehmann(x, y)
    assert s.test == stats.mann_whitney(x, y)
    assert s.intervals == (stats.moses_interval(x, y, 0.95), stats.moses_interval(x, y, 0.9))


def test_small_sample_limits() -> None:
    assert stats.smallest_p(3, 3) == pytest.approx(0.1)
    assert stats.smallest_p(5, 5) == pytest.approx(2 / 252)
    assert stats.smallest_p(1, 1) == 1.0
    assert stats.max_confidence(3, 3) == pytest.approx(0.9)
    assert stats.min_n_for_p(0.05) == 4  # 3 vs 3: 0.1; 4 vs 4: 2/70
    assert stats.min_n_for_p(0.05 / 20) == 6  # 5 vs 5: 2/252 = 0.0079; 6 vs 6: 2/924
    assert stats.smallest_p(6, 6) < 0.05 / 20 < stats.smallest_p(5, 5)


def test_exact_p_equals_scipy_exact() -> None:
    rng = np.random.default_rng(1)
    for _ in range(150):
        n, m = (int(v) for v in rng.integers(2, 10, size=2))
        x, y = rng.lognormal(0, 0.1, n), rng.lognormal(float(rng.normal(0, 0.1)), 0.1, m)
        expected = sps.mannwhitneyu(y, x, alternative="two-sided", method="exact").pvalue
        assert stats.mann_whitney_p(x, y) == pytest.approx(float(expected), abs=1e-12)


def test_ties_use_scipy_permutation_or_normal_approximation() -> None:
    x, y = [1.0, 2, 2, 3], [2.0, 3, 4, 4]
    r = stats.mann_whitney(x, y)
    assert r.method == "permutation" and r.u == 13.5
    how = sps.PermutationMethod(n_resamples=math.comb(8, 4))
    assert r.p == pytest.approx(float(sps.mannwhitneyu(y, x, method=how).pvalue))
    big = stats.mann_whitney(x * 3, y * 3)  # C(24, 12) splits: too many to enumerate
    assert big.method == "asymptotic"
    expected = sps.mannwhitneyu(y * 3, x * 3, method="asymptotic").pvalue
    assert big.p == pytest.approx(float(expected))


def test_non_positive_values_are_rejected() -> None:
    for bad in ([1.0, 0.0], [1.0, -2.0], [1.0, math.nan], [1.0, math.inf]):
        with pytest.raises(ValueError):
            stats.hodges_lehmann(bad, [1.0, 2.0])
    with pytest.raises(ValueError):
        stats.moses_interval([1.0], [], 0.9)


def test_benjamini_hochberg() -> None:
    p = [0.01, 0.02, 0.03, 0.5]
    assert stats.bh_adjusted(p) == pytest.approx([0.04, 0.04, 0.04, 0.5])
    assert stats.benjamini_hochberg(p, 0.05) == [True, True, True, False]
    assert stats.benjamini_hochberg([0.03, 0.5], 0.05) == [False, False]  # 0.03 > 0.05/2
    assert stats.benjamini_hochberg([], 0.05) == []
    rng = np.random.default_rng(2)
    for _ in range(20):
        q = rng.uniform(0, 0.2, size=int(rng.integers(1, 30)))
        assert stats.bh_adjusted(list(q)) == pytest.approx(list(sps.false_discovery_control(q)))


def test_spread_and_cv() -> None:
    assert stats.cv([90, 100, 110]) == pytest.approx(0.1)
    assert stats.robust_cv([90, 100, 110, 1000]) == pytest.approx(stats.MAD * 10 / 105)
    assert math.isnan(stats.cv([5.0]))
    rng = np.random.default_rng(3)
    sample = rng.lognormal(5, 0.04, 600)
    assert stats.robust_log_sd(sample) == pytest.approx(0.04, rel=0.08)
    # pooled within samples: a shift between them does not count as spread
    a, b = sample[:300], sample[300:] * 1.5
    assert stats.robust_log_sd(a, b) == pytest.approx(0.04, rel=0.08)
    # one disturbed repeat of five barely moves it; the sd/mean CV jumps
    five = [100.0, 101, 99, 100.5, 60]
    assert stats.robust_log_sd(five) < 0.03 < stats.cv(five)
    assert math.isnan(stats.robust_log_sd([1.0]))


def test_detectable_change_and_repeats_are_inverse() -> None:
    for sd in (0.01, 0.03, 0.08):
        for n in (5, 8, 12):
            change = stats.min_detectable_change(sd, n, 0.05, 0.8)
            assert stats.repeats_for_change(sd, change * 1.0001, 0.05, 0.8) <= n
            assert stats.repeats_for_change(sd, change * 0.98, 0.05, 0.8) > n
    # CV 3%, 5 per side: about 5.5%; the exact test cannot reach 0.05 with 3 per side
    assert stats.min_detectable_change(0.03, 5) == pytest.approx(0.0546, abs=0.001)
    assert stats.min_detectable_change(0.03, 3) == math.inf
    assert stats.repeats_for_change(0.001, 0.5) == 4
    assert stats.repeats_for_change(0.03, 0.05) == 6


Draw = Callable[[np.random.Generator, int], np.ndarray]
DRAWS: dict[str, Draw] = {
    "lognormal": lambda rng, n: rng.normal(0, 0.05, n),
    "log-t3": lambda rng, n: 0.03 * rng.standard_t(3, n),
    # one repeat in five disturbed: 30% slower
    "contaminated": lambda rng, n: rng.normal(0, 0.02, n) - 0.3 * (rng.random(n) < 0.2),
}


@pytest.mark.parametrize("name", sorted(DRAWS))
def test_moses_interval_covers_the_true_ratio(name: str) -> None:
    """The Moses interval is exact for a pure shift: coverage >= the achieved confidence
    (here 5 vs 6 repeats, 95% asked), whatever the distribution's shape."""
    rng, draw, true = np.random.default_rng(4), DRAWS[name], 0.93
    sims, covered = 1500, 0
    for _ in range(sims):
        x = 1000 * E(draw(rng, 5))
        y = 1000 * true * E(draw(rng, 6))
        lo, hi, achieved = stats.moses_interval(x, y, 0.95)
        covered += lo <= true <= hi
    assert achieved >= 0.95
    assert covered / sims >= achieved - 0.02  # 3.5 binomial standard errors of slack
