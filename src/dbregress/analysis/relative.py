"""Values relative to the base build (a relative value is `inf` when the base
is 0 and the value is not, and 1 when both are 0). Whether a change is real is the
verdict's business (analysis/verdict.py), never a fixed threshold on one ratio."""

from __future__ import annotations

import math


def relative(value: float | None, base: float | None) -> float | None:
    """value / base; `inf` when the base is 0 and the value is not, 1 when both are 0."""
    if value is None or base is None:
        return None
    if base == 0:
        return 1.0 if value == 0 else math.inf
    return value / base
