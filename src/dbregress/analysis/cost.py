"""Cost verdicts: the counting replays of two columns -> one verdict per (comparison,
column, step) and count metric (docs/verdicts.md, "The cost lane").

A replay's count per operation is near-deterministic: replays of one build differ by
the engine's state at the window (what background work left), not by the host, and that
state can be discrete: a step's count may take one of two values 1-2% apart, each
replay drawing one. The exact Mann-Whitney test cannot decide with 3 against 3 replays
(its smallest two-sided p is 0.1), so the lane uses Welch's t-test on the logs of the
counts (Welch 1947), whose power comes from the spread being small. What it takes as a
step's spread is measured, never assumed:

- noise floor: each side's variance is at least s**2, where s is the largest of the
  run's own pooled within-build spread of that step (both sides' deviations from their
  own means, n + m - 2 degrees of freedom), the lab's A/A calibration spread of the step
  and the step's spread in the history of the same counting method, build and step,
  when the caller gives them (`calibration`, `history`: `Floors`, see cost_floors.py),
  half the gap between clusters when a side's replays split in two (a two-state count's
  standard deviation is at most half its gap), and MIN_SD; each verdict keeps which it
  was and what the calibration and history gave (`CostComparison.floors`);
- one method per figure: replays of one step counted by different methods
  (method.count_key of their identities) or scopes (engine-calls, sessions, engine) are
  never pooled: the step keeps the replays of one (`pooled_methods`) and says how many it left
  out and why (`CostComparison.left_out`);
- clusters: a side whose sorted log counts have a gap of at least half the band and
  SPLIT_RATIO times the larger cluster's own range counts two states. Below `settled`
  (the lab's count_replays_max) replays on either side, the step is `undecided` and
  asks for more replays of both sides (`needs_more` says which steps, for the lane);
- ratio: exp(mean log column - mean log base), column over base (above 1: more work);
- interval: the Welch t-interval on that difference, Welch-Satterthwaite degrees of
  freedom; the (1 - 2 alpha) one for the equivalence test (TOST, Schuirmann 1987)
  against 1 ± cost_band, the (1 - alpha) one reported;
- p: the two-sided Welch t-test; Benjamini-Hochberg across every key of the lab, one
  family per metric, as the time lane does.

Small changes: a `same` verdict whose (1 - alpha) interval lies wholly beyond
1 ± max(cost_small_floor, noise) is marked `small` (still `same` for every gate): the
floor is what separates two builds of the same code counted in two runs, measured
(docs/ledger.md), not only two replays of one build.

Verdicts, in this order: `undecided` when a side has fewer than two ok replays, or a
side's replays split into clusters and a side has fewer than `settled`; `same` when the
(1 - 2 alpha) interval lies inside 1 ± cost_band; `slower` (more cost per operation) or
`faster` when BH rejects "no change" at alpha; else `undecided`. Assumptions: replays
are independent (a fresh engine each) and their log counts scatter around the build's
value with the same kind of spread on both sides. Two sets of replays that each sit in one
state, different on the two sides, are indistinguishable from a real change from the run
alone: only a calibration or history floor catches them, which is why those inputs
exist (docs/verdicts.md gives the simulated rates). A cost verdict says "this build
spends X% more estimated cycles (instructions) per operation in this step", never
anything about time.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from dbregress.analysis import state, stats
from dbregress.analysis.cost_floors import (
    Floors,
    FloorSeen,
    Noise,
    as_floors,
    floor_seen,
    known_floors,
    side_builds,
)
from dbregress.analysis.cost_methods import (
    COST_METRICS,
    HEADLINE,
    CostMetric,
    Group,
    Key,
    counts_by_group,
    keeps,
    pooled_methods,
)
from dbregress.analysis.cost_stats import (
    Welch,
    cluster_gap,
    interval,
    log_values,
    spread,
    sum_squares,
    welch,
)
from dbregress.analysis.state import SideState
from dbregress.analysis.state_bias import ratio_bias, widen
from dbregress.lab.file import VerdictPolicy
from dbregress.shapes.replay import ReplayRecord
from dbregress.shapes.run import RunJson

# The smallest spread the verdict takes (standard deviation of log counts, 0.02%): the
# steadiest steps' replays agree within 0.002-0.03% (PostgreSQL's loads, docs/verdicts.md),
# so three replays that agree exactly are no evidence of more precision than that, and a
# change this small is a fiftieth of the default band. Every other floor is measured.
MIN_SD = 0.0002
# History's change-point detection (analysis/series.py) floors a cost series' spread
# here; the verdicts of a run use the measured floor above.
FLOOR_SD = 0.001


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
    noise: float | None = None  # the sd of log counts each side's variance was floored at
    noise_from: str = ""  # which measurement gave it (run, calibration, history, ...)
    # what the A/A calibration and the history gave this step (each a FloorSeen)
    floors: tuple[FloorSeen, ...] = ()
    # replays of the step left out: counted by another method or scope than those kept
    left_out: str = ""
    # (base, column): the counted windows' engine state against the timed window's
    # (analysis/state.py); a side whose state differs makes the verdict `undecided`
    state: tuple[SideState | None, SideState | None] = (None, None)
    # a `same` verdict whose interval lies wholly beyond 1 ± `small_floor`: a change
    # too small for the gate, sized and named (docs/ledger.md)
    small: bool = False
    small_floor: float | None = None  # the margin (log) the interval had to clear

    @property
    def size(self) -> float | None:
        """The change as a fraction (ratio - 1): +0.0042 is 0.42% more work."""
        return None if self.ratio is None else self.ratio - 1


@dataclass(frozen=True)
class CostVerdicts:
    policy: VerdictPolicy
    metrics: dict[str, dict[Key, CostComparison]]  # metric key -> verdicts
    replays: int  # planned per column

    def headline(self) -> dict[Key, CostComparison]:
        return self.metrics.get(HEADLINE, {})

    def slower(self) -> list[Key]:
        return [k for k, c in self.headline().items() if c.verdict == "slower"]


def needs_more(
    sides: Sequence[Sequence[float]],
    band: float,
    pairs: Sequence[tuple[Sequence[float], Sequence[float]]] = (),
    alpha: float = VerdictPolicy.alpha,
) -> bool:
    """Whether a step's replays call for more replays of every side (the lane's
    extension, up to count_replays_max): some side's replays split into clusters, or
    disagree beyond the band, or a (base, column) pair of `pairs` would be `undecided`
    (its interval neither inside the band nor clear of "no change"): an undecided step
    gets more replays, never a guess. The second look is part of the procedure whose
    A/A false-verdict rate tests/unit/test_cost_verdict.py computes exactly."""
    if any(len(v) >= 2 and (cluster_gap(v, band) > 0 or spread(v) > band) for v in sides):
        return True
    policy = VerdictPolicy(alpha=alpha, cost_band=band)
    return any(
        len(x) >= 2
        and len(y) >= 2
        and compare_counts(x, y, policy, settled=0).verdict == "undecided"
        for x, y in pairs
    )


def _mean(values: Sequence[float]) -> float | None:
    return statistics.fmean(values) if values else None


@dataclass(frozen=True)
class _Test:
    """One step's test before the lab-wide correction."""

    welch: Welch
    noise: float
    noise_from: str
    gap: float  # the larger side's cluster gap (log), 0 without clusters


def _test(
    x: Sequence[float], y: Sequence[float], band: float, known: Sequence[tuple[str, float]]
) -> _Test:
    lx, ly = log_values(x), log_values(y)
    gap = max(cluster_gap(x, band), cluster_gap(y, band))
    pooled = math.sqrt((sum_squares(lx) + sum_squares(ly)) / (len(lx) + len(ly) - 2))
    candidates = [("minimum", MIN_SD), ("this run's replays", pooled), *known]
    if gap > 0:
        candidates.append(("half the clusters' gap", gap / 2))
    source, noise = max(candidates, key=lambda c: c[1])
    return _Test(welch(lx, ly, noise), noise, source, gap)


def _judge(
    metric: str,
    x: list[float],
    y: list[float],
    adjusted: float | None,
    t: _Test | None,
    policy: VerdictPolicy,
    background: tuple[float | None, float | None],
    settled: int,
    floors: tuple[FloorSeen, ...] = (),
    left_out: str = "",
    states: tuple[SideState | None, SideState | None] | None = None,
) -> CostComparison:
    spreads = (spread(x), spread(y))
    ratio: float | None = None
    ci: tuple[float, float] | None = None
    verdict = "undecided"
    small, margin = False, None
    if t is None or adjusted is None:
        if x and y:
            ratio = statistics.fmean(y) / statistics.fmean(x)
        why = f"fewer than 2 ok replays of {'the base' if len(x) < 2 else 'the column'}"
    else:
        ratio, ci, verdict, why, small, margin = _decide(
            metric, x, y, adjusted, t, policy, settled, states
        )
    if left_out:
        why = f"{why}; {left_out}"
    return CostComparison(
        metric=metric,
        ratio=ratio,
        ci=ci,
        p_value=t.welch.p if t is not None else None,
        verdict=verdict,
        replays=(len(x), len(y)),
        base=_mean(x),
        value=_mean(y),
        spread=spreads,
        reason=why,
        background=background,
        noise=t.noise if t is not None else None,
        noise_from=t.noise_from if t is not None else "",
        floors=floors,
        left_out=left_out,
        small=small,
        small_floor=margin,
    )


def _decide(
    metric: str,
    x: list[float],
    y: list[float],
    adjusted: float,
    t: _Test,
    policy: VerdictPolicy,
    settled: int,
    states: tuple[SideState | None, SideState | None] | None,
) -> tuple[float, tuple[float, float], str, str, bool, float | None]:
    """A step's ratio, interval, verdict, why, whether it is a small change and the
    margin its interval had to clear (`_judge` with two replays a side or more)."""
    band, alpha = policy.cost_band, policy.alpha
    verdict, small, margin = "undecided", False, None
    w = t.welch
    ratio, ci = math.exp(w.d), interval(w, 1 - alpha)
    lo, hi = interval(w, 1 - 2 * alpha)
    bias = _bias(states, metric)
    if bias is not None:
        ci, (lo, hi) = widen(*ci, bias), widen(lo, hi, bias)
    test = f"Welch t p={w.p:.2g} (BH-adjusted {adjusted:.2g}), df {w.df:.1f}"
    tost = f"{1 - 2 * alpha:.0%} CI {lo:.4f}-{hi:.4f}"
    floor = f"noise sd {t.noise:.3%} from {t.noise_from}"
    if t.gap > 0 and min(len(x), len(y)) < settled:
        why = _split_why(x, y, band, t.gap, settled)
    elif lo >= 1 - band and hi <= 1 + band:
        verdict, why = "same", f"{tost} inside ±{band:.0%}; {floor}"
        margin = max(policy.cost_small_floor, t.noise)
        # beyond the floor, and "no change" rejected at the lab's rate (BH), as a
        # small change point must be
        small = is_small(ci, margin) and adjusted <= alpha
        if small:
            why = f"{why}; a small change: the interval clears ±{math.expm1(margin):.2%}"
    elif adjusted <= alpha and not ci[0] <= 1 <= ci[1]:
        verdict, why = ("slower" if w.d > 0 else "faster"), f"{test}; {floor}"
    elif adjusted <= alpha:
        why = f"{test}; the engine states' possible bias puts 1 inside the interval"
    else:
        why = f"{test}; {tost} not inside ±{band:.0%}; {floor}"
    if bias is not None:
        why += (
            f"; intervals widened by the engine states' possible bias "
            f"[{bias[0]:+.3%}, {bias[1]:+.3%}]"
        )
    return ratio, ci, verdict, why, small, margin


def _bias(
    states: tuple[SideState | None, SideState | None] | None, metric: str
) -> tuple[float, float] | None:
    """The bias the sides' engine states may still put in the ratio within their
    tolerance (analysis/state_bias.py), None where there is none to hold: the verdict's
    intervals are widened by it."""
    bias = ratio_bias(states, metric) if states is not None else None
    return None if bias is None or bias == (0.0, 0.0) else bias


def _split_why(x: list[float], y: list[float], band: float, gap: float, settled: int) -> str:
    sides = [side for side, v in (("base", x), ("column", y)) if cluster_gap(v, band) > 0]
    return (
        f"the {' and '.join(sides)} replays split into two clusters "
        f"{math.expm1(gap):.2%} apart: the count depends on the engine's state "
        f"at the window; both sides need {settled} replays"
    )


def is_small(ci: tuple[float, float] | None, margin: float) -> bool:
    """Whether an interval (on a ratio) lies wholly beyond 1 ± margin (log)."""
    if ci is None:
        return False
    return ci[0] > math.exp(margin) or ci[1] < math.exp(-margin)


def cost_class(c: CostComparison | None) -> str:
    """A cost verdict's class for the ledger and the exports: slower, faster, small,
    same or undecided (no verdict at all: undecided)."""
    if c is None:
        return "undecided"
    return "small" if c.small else c.verdict


def _withheld(
    verdict: CostComparison, pair: tuple[SideState | None, SideState | None] | None
) -> CostComparison:
    """state.withheld, and a withheld verdict is no small change either."""
    found = state.withheld(verdict, pair)
    if found.small and found.verdict != "same":
        return dataclasses.replace(found, small=False)
    return found


def compare_counts(
    x: Sequence[float],
    y: Sequence[float],
    policy: VerdictPolicy | None = None,
    settled: int = 5,
    known_sd: Sequence[tuple[str, float]] = (),
    metric: str = HEADLINE,
) -> CostComparison:
    """One step's verdict from its base's and column's counts per operation alone (a
    family of one: no lab-wide correction); `known_sd` adds measured floors, (source,
    sd of log counts) pairs."""
    policy = policy or VerdictPolicy()
    xs, ys = list(x), list(y)
    t = None
    if len(xs) >= 2 and len(ys) >= 2:
        t = _test(xs, ys, policy.cost_band, known_sd)
    adjusted = t.welch.p if t is not None else None
    return _judge(metric, xs, ys, adjusted, t, policy, (None, None), settled)


def _samples(
    record: RunJson,
    replays: list[ReplayRecord],
    metric: CostMetric,
    methods: Mapping[Key, tuple[Group, str]] | None = None,
) -> dict[Key, tuple[list[float], list[float], tuple[float | None, float | None]]]:
    """Per key, the base's and the column's counts of the step (only those of the group
    `methods` keeps, where it names one) and their background's means."""
    methods = methods or {}
    grouped = counts_by_group(replays, metric)
    bg: dict[tuple[str, str], list[float]] = {}
    steps: dict[str, list[str]] = {}
    for column, step in grouped:
        order = steps.setdefault(column, [])
        if step not in order:
            order.append(step)
    for r in replays:
        if r.get("status") != "ok":
            continue
        for step, figures in r["steps"].items():
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
                key = (comp["name"], label, step)
                kept = methods[key][0] if key in methods else None
                out[key] = (
                    [v for v, g in grouped.get((base, step), []) if kept in (None, g)],
                    [v for v, g in grouped.get((label, step), []) if kept in (None, g)],
                    (_mean(bg.get((base, step), [])), _mean(bg.get((label, step), []))),
                )
    return out


def cost_verdicts(
    record: RunJson,
    replays: list[ReplayRecord],
    policy: VerdictPolicy | None = None,
    planned: int = 0,
    settled: int = 5,
    calibration: Floors | Noise | None = None,
    history: Floors | Noise | None = None,
) -> CostVerdicts | None:
    """The cost lane's verdicts of a run (pure: replays in, verdicts out); None when the
    run has no counting replays. `settled` is the lab's count_replays_max; `calibration`
    and `history` are measured spreads of the steps (`Floors`, or their bare noise:
    metric -> step key -> sd of log counts, cost_floors.replay_noise computes them),
    each a floor of the step's noise when given. A step's replays counted by two methods or scopes
    are not pooled (`pooled_methods`). run.json and the replays come typed or as read
    (store/run.py, store/replays.py)."""
    if not replays:
        return None
    if policy is None:
        policy = VerdictPolicy.of_record(record)
    sources = {"calibration": as_floors(calibration), "history": as_floors(history)}
    metrics: dict[str, dict[Key, CostComparison]] = {}
    methods = pooled_methods(record, replays)
    # each side's state over the replays its verdict pools, not over those left out
    states = state.sides(record, replays, policy.cost_band, keeps(methods))
    for metric in COST_METRICS:
        samples = _samples(record, replays, metric, methods)
        seen = {
            k: tuple(
                floor_seen(metric.key, k, side_builds(record, k), n, f) for n, f in sources.items()
            )
            for k in samples
        }
        tests = {
            k: _test(x, y, policy.cost_band, known_floors(seen[k]))
            for k, (x, y, _) in samples.items()
            if len(x) >= 2 and len(y) >= 2
        }
        pvalues = [t.welch.p for t in tests.values()]
        adjusted = dict(zip(tests, stats.bh_adjusted(pvalues), strict=True))
        metrics[metric.key] = {
            k: _withheld(
                _judge(
                    metric.key,
                    x,
                    y,
                    adjusted.get(k),
                    tests.get(k),
                    policy,
                    bg,
                    settled,
                    seen[k],
                    methods[k][1] if k in methods else "",
                    states.get(k),
                ),
                states.get(k),
            )
            for k, (x, y, bg) in samples.items()
        }
    return CostVerdicts(policy, metrics, planned)
