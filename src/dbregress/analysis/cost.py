"""Cost verdicts: the counting replays of two columns -> one verdict per (comparison,
column, step) and count metric (docs/verdicts.md, "The cost lane").

A replay's count per operation is near-deterministic: replays of one build differ by
the engine's state at the window (what background work left), not by the host. The
exact Mann-Whitney test cannot decide with 3 against 3 replays (its smallest two-sided
p is 0.1), so the lane uses Welch's t-test on the logs of the counts (Welch 1947), whose
power comes from the spread being small, with each side's variance floored at
FLOOR_SD**2 so that replays that agree exactly do not claim infinite precision:

- ratio: exp(mean log column - mean log base), column over base (above 1: more work);
- interval: the Welch t-interval on that difference, Welch-Satterthwaite degrees of
  freedom; the (1 - 2 alpha) one for the equivalence test (TOST, Schuirmann 1987)
  against 1 ± cost_band, the (1 - alpha) one reported;
- p: the two-sided Welch t-test; Benjamini-Hochberg across every key of the lab, one
  family per metric, as the time lane does.

Verdicts, in this order: `undecided` when a side has fewer than two ok replays, or fewer
than `settled` (the lab's count_replays_max) that disagree beyond the band (max/min - 1
> cost_band: the count depends on what background work left at the window, and with
three replays a guess would be the state of one window; the lane adds replays up to
`settled`, and from there the Welch interval, whose variance is that disagreement,
decides); `same` when the (1 - 2 alpha) interval lies inside 1 ± cost_band;
`slower` (more cost per operation) or `faster` when BH rejects "no change" at alpha;
else `undecided`. Assumptions: replays are independent (a fresh engine each), their log
counts roughly normal around the build's value, and the spread is the same kind on both
sides. A cost verdict says "this build spends X% more estimated cycles (instructions)
per operation in this step", never anything about time.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from scipy import stats as sps

from dbregress.analysis import stats
from dbregress.explain import state
from dbregress.explain.state import SideState
from dbregress.lab import VerdictPolicy

Key = tuple[str, str, str]  # (comparison, column, step)

# The floor of each side's standard deviation of log counts: 0.1%. Two replays of one
# build agreed within 0.2% on 35 of 38 quickstart (step, build) pairs (docs/metrics.md),
# so a smaller spread seen in three replays is luck, not precision.
FLOOR_SD = 0.001


@dataclass(frozen=True)
class CostMetric:
    key: str
    label: str  # short, for tables
    unit: str
    parts: tuple[str, ...]  # explain's per-op figures summed into this one


# The lane's metrics, the headline first. All per operation of the step's Q unit.
COST_METRICS: tuple[CostMetric, ...] = (
    CostMetric("estimated_cycles", "est. cycles/op", "cycles/op", ("estimated_cycles",)),
    CostMetric("instructions", "instr/op", "instr/op", ("instructions",)),
    CostMetric(
        "l1_misses",
        "L1 miss/op",
        "misses/op",
        ("i1_misses", "d1_read_misses", "d1_write_misses"),
    ),
    CostMetric("ll_misses", "LL miss/op", "misses/op", ("ll_read_misses", "ll_write_misses")),
    CostMetric(
        "branch_mispredictions", "mispred/op", "mispredictions/op", ("branch_mispredictions",)
    ),
    CostMetric("system_calls", "syscalls/op", "syscalls/op", ("system_calls",)),
)
HEADLINE = COST_METRICS[0].key


def value_of(per_op: Mapping[str, float], metric: CostMetric) -> float | None:
    if not all(p in per_op for p in metric.parts):
        return None
    return float(sum(per_op[p] for p in metric.parts))


@dataclass(frozen=True)
class CostComparison:
    metric: str
    ratio: float | None  # column over base: above 1 = more cost per operation
    ci: tuple[float, float] | None  # (1 - alpha) Welch interval on the ratio
    p_value: float | None  # two-sided Welch, before BH
    verdict: str  # same | slower | faster | undecided
    replays: tuple[int, int]  # ok replays used: (base, column)
    base: float | None  # mean per operation
    value: float | None
    spread: tuple[float, float]  # max/min - 1 of each side's replays
    reason: str
    background: tuple[float | None, float | None] = (None, None)  # est. cycles/op
    # (base, column): the counted windows' engine state against the timed window's
    # (explain/state.py); a side whose state differs makes the verdict `undecided`
    state: tuple[SideState | None, SideState | None] = (None, None)


@dataclass(frozen=True)
class CostVerdicts:
    policy: VerdictPolicy
    metrics: dict[str, dict[Key, CostComparison]]  # metric key -> verdicts
    replays: int  # planned per column

    def headline(self) -> dict[Key, CostComparison]:
        return self.metrics.get(HEADLINE, {})

    def slower(self) -> list[Key]:
        return [k for k, c in self.headline().items() if c.verdict == "slower"]


@dataclass(frozen=True)
class _Welch:
    d: float
    se: float
    df: float
    p: float


def _welch(x: Sequence[float], y: Sequence[float]) -> _Welch:
    lx, ly = [math.log(v) for v in x], [math.log(v) for v in y]
    vx = max(statistics.variance(lx), FLOOR_SD**2)
    vy = max(statistics.variance(ly), FLOOR_SD**2)
    ax, ay = vx / len(lx), vy / len(ly)
    se = math.sqrt(ax + ay)
    df = (ax + ay) ** 2 / (ax**2 / (len(lx) - 1) + ay**2 / (len(ly) - 1))
    d = statistics.fmean(ly) - statistics.fmean(lx)
    p = float(2 * sps.t.sf(abs(d) / se, df))
    return _Welch(d, se, df, p)


def _interval(w: _Welch, confidence: float) -> tuple[float, float]:
    half = float(sps.t.ppf(0.5 + confidence / 2, w.df)) * w.se
    return math.exp(w.d - half), math.exp(w.d + half)


def spread(values: Sequence[float]) -> float:
    return max(values) / min(values) - 1 if len(values) >= 2 else 0.0


def _mean(values: Sequence[float]) -> float | None:
    return statistics.fmean(values) if values else None


def _judge(
    metric: str,
    x: list[float],
    y: list[float],
    adjusted: float | None,
    w: _Welch | None,
    policy: VerdictPolicy,
    background: tuple[float | None, float | None],
    settled: int,
) -> CostComparison:
    band, alpha = policy.cost_band, policy.alpha
    spreads = (spread(x), spread(y))
    ratio: float | None = None
    ci: tuple[float, float] | None = None
    verdict = "undecided"
    if w is None or adjusted is None:
        if x and y:
            ratio = statistics.fmean(y) / statistics.fmean(x)
        why = f"fewer than 2 ok replays of {'the base' if len(x) < 2 else 'the column'}"
    else:
        ratio, ci = math.exp(w.d), _interval(w, 1 - alpha)
        lo, hi = _interval(w, 1 - 2 * alpha)
        test = f"Welch t p={w.p:.2g} (BH-adjusted {adjusted:.2g}), df {w.df:.1f}"
        tost = f"{1 - 2 * alpha:.0%} CI {lo:.4f}-{hi:.4f}"
        sides = [
            side
            for side, s, n in zip(("base", "column"), spreads, (len(x), len(y)), strict=True)
            if s > band and n < settled
        ]
        if sides:
            why = (
                f"the {' and '.join(sides)} replays disagree by {max(spreads):.2%} (beyond "
                f"±{band:.0%}): the count depends on the engine's state at the window"
            )
        elif lo >= 1 - band and hi <= 1 + band:
            verdict, why = "same", f"{tost} inside ±{band:.0%}"
        elif adjusted <= alpha:
            verdict, why = ("slower" if w.d > 0 else "faster"), test
        else:
            why = f"{test}; {tost} not inside ±{band:.0%}"
    return CostComparison(
        metric=metric,
        ratio=ratio,
        ci=ci,
        p_value=w.p if w is not None else None,
        verdict=verdict,
        replays=(len(x), len(y)),
        base=_mean(x),
        value=_mean(y),
        spread=spreads,
        reason=why,
        background=background,
    )


def _samples(
    record: dict[str, Any], replays: list[dict[str, Any]], metric: CostMetric
) -> dict[Key, tuple[list[float], list[float], tuple[float | None, float | None]]]:
    by_cell: dict[tuple[str, str], list[float]] = {}
    bg: dict[tuple[str, str], list[float]] = {}
    steps: dict[str, list[str]] = {}
    for r in replays:
        if r.get("status") != "ok":
            continue
        for step, figures in r["steps"].items():
            v = value_of(figures["per_op"], metric)
            if v is not None and v > 0 and math.isfinite(v):
                by_cell.setdefault((r["column"], step), []).append(v)
                order = steps.setdefault(r["column"], [])
                if step not in order:
                    order.append(step)
            b = (figures.get("background_per_op") or {}).get("estimated_cycles")
            if b is not None:
                bg.setdefault((r["column"], step), []).append(float(b))
    out = {}
    for comp in record["comparisons"]:
        base, *others = comp["labels"]
        for label in others:
            first = steps.get(base, [])
            names = first + [s for s in steps.get(label, []) if s not in first]
            for step in names:
                out[(comp["name"], label, step)] = (
                    by_cell.get((base, step), []),
                    by_cell.get((label, step), []),
                    (_mean(bg.get((base, step), [])), _mean(bg.get((label, step), []))),
                )
    return out


def cost_verdicts(
    record: dict[str, Any],
    replays: list[dict[str, Any]],
    policy: VerdictPolicy | None = None,
    planned: int = 0,
    settled: int = 5,
) -> CostVerdicts | None:
    """The cost lane's verdicts of a run (pure: replays in, verdicts out); None when the
    run has no counting replays."""
    if not replays:
        return None
    if policy is None:
        stored = record.get("verdict_policy") or {}
        policy = VerdictPolicy(**stored) if stored else VerdictPolicy()
    metrics: dict[str, dict[Key, CostComparison]] = {}
    states = state.sides(record, replays)
    for metric in COST_METRICS:
        samples = _samples(record, replays, metric)
        tests = {k: _welch(x, y) for k, (x, y, _) in samples.items() if len(x) >= 2 and len(y) >= 2}
        adjusted = dict(zip(tests, stats.bh_adjusted([t.p for t in tests.values()]), strict=True))
        metrics[metric.key] = {
            k: state.withheld(
                _judge(metric.key, x, y, adjusted.get(k), tests.get(k), policy, bg, settled),
                states.get(k),
            )
            for k, (x, y, bg) in samples.items()
        }
    return CostVerdicts(policy, metrics, planned)
