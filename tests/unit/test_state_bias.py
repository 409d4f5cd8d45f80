"""The bias a state within its tolerance may still put in a ratio (analysis/state.py):
each side may count up to a quarter of the cost band more or less than its timed state
would, so two sides off in opposite directions move their ratio by up to half the band
while the verdict's interval, from the replays' spread alone, ignores it. Each side's
possible bias and the ratio's are given, and an interval widened by them holds the
ratio of the timed states."""

from __future__ import annotations

import pytest

from dbregress.analysis import state, state_bias
from tests.unit.test_state_tolerance import KEY, RECORD, _mean_per_op, _replay

BAND = 0.01
CYCLES = {"pg12": 284_000.0, "pg17": 301_000.0}


def _edge(column: str, sign: float) -> list[object]:
    """Three replays of `column` whose counted windows read 99% of the tolerance more
    (sign 1) or fewer (-1) blocks per query than its timed windows."""
    tol = state.tolerance("postgres", _mean_per_op(CYCLES[column]), BAND)
    assert tol is not None
    timed = 1.0 * 100_000  # blocks over the timed window's 100,000 queries: 1 per query
    counted = (1.0 + sign * 0.99 * tol) * 500  # over the counted window's 500
    return [_replay(column, n, counted, CYCLES[column], timed) for n in (1, 2, 3)]


def test_opposite_states_within_their_tolerance_bias_a_ratio_by_half_the_band() -> None:
    # the base counted fewer misses than it timed, the column more: both judged ...
    base, column = state.sides(RECORD, _edge("pg12", -1) + _edge("pg17", 1), BAND)[KEY]  # type: ignore[arg-type]
    assert base is not None and column is not None
    assert base.mismatch is None and column.mismatch is None
    # ... each side's count may be off by up to a quarter of the band in the metric
    # whose tolerance is the smaller (instructions here), less in the other ...
    assert base.bias["instructions"] == pytest.approx(-0.99 * BAND / 4, rel=1e-3)
    assert column.bias["instructions"] == pytest.approx(0.99 * BAND / 4, rel=1e-3)
    assert 0 < column.bias["estimated_cycles"] < column.bias["instructions"]
    # ... so the ratio may be up to half the band above the timed states' ratio
    low, high = state_bias.ratio_bias((base, column), "instructions")  # type: ignore[misc]
    assert low == 0.0
    assert high == pytest.approx((1 + 0.99 * BAND / 4) / (1 - 0.99 * BAND / 4) - 1)
    assert high > 0.99 * BAND / 2
    # an interval widened by it holds the ratio the timed states would have given
    measured = CYCLES["pg17"] / CYCLES["pg12"]
    timed_ratio = measured * (1 - 0.99 * BAND / 4) / (1 + 0.99 * BAND / 4)
    lo, hi = measured * 0.999, measured * 1.001  # the replays' own interval
    assert not lo <= timed_ratio <= hi
    wide = state_bias.widen(lo, hi, (low, high))
    assert wide[0] <= timed_ratio <= wide[1] and wide[1] == hi


def test_states_off_the_same_way_bias_a_ratio_by_at_most_one_side() -> None:
    base, column = state.sides(RECORD, _edge("pg12", 1) + _edge("pg17", 1), BAND)[KEY]  # type: ignore[arg-type]
    low, high = state_bias.ratio_bias((base, column), "instructions")  # type: ignore[misc]
    assert low == pytest.approx(1 / (1 + 0.99 * BAND / 4) - 1, rel=1e-3)
    assert high == pytest.approx(0.99 * BAND / 4, rel=1e-3)


def test_sides_that_meet_their_timed_state_or_report_none_bias_nothing() -> None:
    same = [_replay(c, n, 500.0, CYCLES[c], 100_000.0) for c in CYCLES for n in (1, 2)]
    pair = state.sides(RECORD, same, BAND)[KEY]
    assert state_bias.ratio_bias(pair, "estimated_cycles") == (0.0, 0.0)
    assert state_bias.ratio_bias(None, "estimated_cycles") == (0.0, 0.0)  # no state at all
    # a metric without a cost per miss: the bias is not known, not 0
    assert state_bias.ratio_bias(pair, "l1_misses") is None
