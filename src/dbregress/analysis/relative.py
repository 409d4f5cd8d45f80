"""Values relative to the base build, and the marks METHOD.md section 5 defines."""

from __future__ import annotations

import math

from dbregress.analysis.metrics import Better

REGRESSION_AT = 0.95  # rQPS at or below: a regression
IMPROVEMENT_AT = 1.05  # rQPS at or above: an improvement


def relative(value: float | None, base: float | None) -> float | None:
    """value / base; `inf` when the base is 0 and the value is not, 1 when both are 0."""
    if value is None or base is None:
        return None
    if base == 0:
        return 1.0 if value == 0 else math.inf
    return value / base


def change(rel: float | None, better: Better = "higher") -> str:
    """'regression', 'improvement' or '' (might be noise) for a relative value.

    For lower-is-better metrics the thresholds mirror: 1/0.95 is a regression.
    """
    if rel is None:
        return ""
    score = (
        rel if better == "higher" else (0.0 if rel == math.inf else 1 / rel if rel else math.inf)
    )
    if score <= REGRESSION_AT:
        return "regression"
    if score >= IMPROVEMENT_AT:
        return "improvement"
    return ""
