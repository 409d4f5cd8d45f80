"""The t and chi-squared functions from scipy.special give scipy.stats' figures to the bit
(the verdicts and stored reports must not move when the import changes)."""

from __future__ import annotations

import pytest
from scipy import stats as sps

from dbregress.analysis import distributions

DFS = [1, 1.5, 2, 3, 4.7, 5, 9, 19, 30, 99, 1000, 1e6]


@pytest.mark.parametrize("df", DFS)
def test_t_tail_matches_scipy_stats(df: float) -> None:
    for x in [0.0, 1e-9, 0.3, 1.0, 1.96, 2.5, 5.0, 40.0, 1e3]:
        assert distributions.t_sf(x, df) == float(sps.t.sf(x, df))


@pytest.mark.parametrize("df", DFS)
def test_quantiles_match_scipy_stats(df: float) -> None:
    for q in [0.025, 0.05, 0.5, 0.9, 0.95, 0.975, 0.99, 0.999]:
        assert distributions.t_ppf(q, df) == float(sps.t.ppf(q, df))
        assert distributions.chi2_ppf(q, df) == float(sps.chi2.ppf(q, df))
