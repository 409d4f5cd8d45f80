"""The three quantiles and tail areas the verdicts need: Student's t and chi-squared.

They come from `scipy.special`, the same functions `scipy.stats.t` and `scipy.stats.chi2`
call underneath (stdtr, stdtrit, gammaincinv), so every figure is the same to the last
bit. Importing `scipy.stats` costs about 2 s more at each start of the command line
(its distributions, sparse matrices and optimizers load at import), which every report,
fleet worker and test pays; only the rare tied-sample rank test needs it, and imports it
there.
"""

from __future__ import annotations

from scipy import special


def t_sf(x: float, df: float) -> float:
    """P(T > x) for Student's t with df degrees of freedom."""
    return float(special.stdtr(df, -x))


def t_ppf(q: float, df: float) -> float:
    """The q quantile of Student's t with df degrees of freedom."""
    return float(special.stdtrit(df, q))


def chi2_ppf(q: float, df: float) -> float:
    """The q quantile of chi-squared with df degrees of freedom."""
    return float(2 * special.gammaincinv(df / 2, q))
