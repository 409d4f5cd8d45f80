"""The bias an engine state within its tolerance may still put in a ratio (analysis/
state.py judges the states): each side may count up to BAND_SHARE of the cost band more
or less than its timed state would have given, and two sides off in opposite directions
move their ratio by up to twice that, which the verdict's interval, from the replays'
spread alone, does not hold. `ratio_bias` gives the ratio's possible bias from both
sides' measured differences (`SideState.bias`), `widen` an interval that holds it
(docs/verdicts.md, "What the tolerance still lets through").
"""

from __future__ import annotations

from dbregress.analysis.state import SideState


def ratio_bias(
    pair: tuple[SideState | None, SideState | None] | None, metric: str
) -> tuple[float, float] | None:
    """The bias the two sides' states may put in a column/base ratio of `metric`:
    (low, high) such that the counted ratio lies within [1 + low, 1 + high] times the
    ratio the timed states would give. Each side's count may hold anywhere from none to
    all of its bias (`SideState.bias`: the true cost per miss lies between 0 and
    COST_PER_MISS), so sides that differ from their timed states in opposite directions
    add up: within the tolerance each side may move its count by BAND_SHARE of the cost
    band, a ratio by up to twice that, which the verdict's interval ignores unless it is
    widened by this (`widen`). (0, 0) for sides without a state (an engine that reports
    none); None where a side's state gives no bias for `metric` (unmeasured, or a
    metric without a cost per miss)."""
    if pair is None:
        return (0.0, 0.0)
    spans = []
    for side in pair:
        if side is None:
            spans.append((0.0, 0.0))
            continue
        b = side.bias.get(metric)
        if b is None:
            return None
        spans.append((min(0.0, b), max(0.0, b)))
    (base_low, base_high), (col_low, col_high) = spans
    return (1 + col_low) / (1 + base_high) - 1, (1 + col_high) / (1 + base_low) - 1


def widen(low: float, high: float, bias: tuple[float, float]) -> tuple[float, float]:
    """A ratio's interval [low, high] widened by the states' possible bias (ratio_bias):
    the timed states' ratio lies within [low / (1 + its high), high / (1 + its low)]."""
    return low / (1 + bias[1]), high / (1 + bias[0])
