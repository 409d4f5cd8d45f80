"""The drift ledger (docs/ledger.md): along an ordered series of points (a run's columns,
or the nights and releases of a lab's history from a pinned reference), each point's
cumulative change from the first and its increment over the previous one, per step and
lane, each with its interval and class (slower, faster, small, same, undecided).

Pure: a record and its counting replays in, rows out. The cost lane's figures are the
cost verdicts' own (analysis/cost.py `cost_verdicts`: Welch on log counts, the measured
floors, one counting method per figure, the engine-state check), computed once for the
cumulative changes (every point against the first) and once per increment (each point
against the one before). A ratio is exp(mean log y - mean log x), so when every point
keeps the same replays the increments' product telescopes to the total exactly; the
remainder says how far apart they are where a point's replays differ between the two
(another counting method left out, a withheld side).
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import cast

from dbregress.analysis.cost import CostComparison, cost_class, cost_verdicts
from dbregress.analysis.cost_floors import Floors
from dbregress.analysis.cost_methods import group_of, pooled_methods
from dbregress.analysis.functions_moved import FunctionMove, functions_moved
from dbregress.analysis.verdict import StepVerdict
from dbregress.lab.file import VerdictPolicy
from dbregress.shapes.replay import ReplayRecord
from dbregress.shapes.run import ComparisonEntry, RunJson

MOVED = ("slower", "faster", "small")


@dataclass(frozen=True)
class Cell:
    """One change: a ratio (later over earlier; cost: above 1 is more work, time: above
    1 is more QPS), its interval, its class and why."""

    ratio: float | None
    ci: tuple[float, float] | None
    word: str  # slower | faster | small | same | undecided
    reason: str = ""
    # an increment that moved (slower, faster, small): the functions whose counted
    # instructions per operation moved most, from the same replays
    functions: tuple[FunctionMove, ...] = ()

    @classmethod
    def of_cost(cls, c: CostComparison | None) -> Cell:
        if c is None:
            return cls(None, None, "undecided", "no counts of one side")
        return cls(c.ratio, c.ci, cost_class(c), c.reason)

    @classmethod
    def of_time(cls, v: StepVerdict | None) -> Cell:
        if v is None:
            return cls(None, None, "undecided", "no repeats of one side")
        return cls(v.ratio, v.ci, v.verdict, v.reason)


@dataclass(frozen=True)
class Point:
    """A column of the series: where it was measured, what it is, and its changes
    (None at the first point, the reference)."""

    run: str
    column: str  # its label in its own run
    build: str
    commit: str | None = None
    subject: str | None = None
    cumulative: Cell | None = None
    increment: Cell | None = None


@dataclass(frozen=True)
class Row:
    """One step's ledger in one lane."""

    comparison: str
    step: str
    lane: str  # cost | time
    metric: str  # estimated_cycles | qps
    points: tuple[Point, ...]

    @property
    def total(self) -> Cell | None:
        return self.points[-1].cumulative if len(self.points) > 1 else None

    @property
    def product(self) -> float | None:
        """The product of the increments; None where one has no ratio."""
        ratios = [p.increment.ratio if p.increment else None for p in self.points[1:]]
        if not ratios or any(r is None for r in ratios):
            return None
        return math.prod(cast(list[float], ratios))

    @property
    def remainder(self) -> float | None:
        """total / product - 1: what the increments do not account for."""
        total, product = self.total, self.product
        if total is None or total.ratio is None or not product:
            return None
        return total.ratio / product - 1


@dataclass(frozen=True)
class Ledger:
    title: str  # the run or the lab
    reference: Point | None  # the pinned first point (a lab's ledger)
    rows: tuple[Row, ...]
    notes: tuple[str, ...] = field(default_factory=tuple)


def _with(record: RunJson, comparison: ComparisonEntry, labels: Sequence[str]) -> RunJson:
    """The record with one comparison of these columns, in this order."""
    out = dict(record)
    out["comparisons"] = [cast(ComparisonEntry, {**comparison, "labels": list(labels)})]
    return cast(RunJson, out)


INC = "\x1finc"  # the increments' comparison names: NAME + INC + N (never a lab's)


def _aliased(floors: Floors | None, name: str, aliases: Sequence[str]) -> Floors | None:
    """The floors with every key of comparison `name` also under each alias (the
    increments' comparisons), so an increment is floored as its comparison's steps."""
    if floors is None:
        return None
    noise: dict[str, dict[str, float]] = {}
    for metric, by_key in floors.noise.items():
        found = dict(by_key)
        for key, sd in by_key.items():
            if key.startswith(f"{name}/"):
                for alias in aliases:
                    found[alias + key[len(name) :]] = sd
        noise[metric] = found
    return Floors(noise, floors.runs, floors.note)


def cost_cells(
    record: RunJson,
    replays: list[ReplayRecord],
    comparison: ComparisonEntry,
    labels: Sequence[str],
    policy: VerdictPolicy,
    floors: tuple[Floors | None, Floors | None] = (None, None),
    settled: int = 5,
    family: Sequence[ComparisonEntry] | None = None,
) -> dict[tuple[str, str], tuple[Cell, Cell]]:
    """(label, step) -> (cumulative from labels[0], increment over the label before),
    for labels[1:] and every step the replays count. The cumulative changes are one
    family of the Benjamini-Hochberg correction (with `family`, the run's comparisons
    as its report judges them: the same verdicts), the increments another; `settled`
    is the lane's count_replays_max, as the report's."""
    name = comparison["name"]
    calibration, history = floors
    comps = list(family) if family is not None else [{**comparison, "labels": list(labels)}]
    pairs = list(itertools.pairwise(labels))
    aliases = [f"{name}{INC}{i}" for i in range(len(pairs))]
    found = cost_verdicts(
        cast(RunJson, {**record, "comparisons": comps}),
        replays,
        policy,
        settled=settled,
        calibration=calibration,
        history=history,
    )
    cumulative = {
        (k[1], k[2]): c for k, c in (found.headline() if found else {}).items() if k[0] == name
    }
    inc_comps = [
        cast(ComparisonEntry, {**comparison, "name": alias, "labels": [before, label]})
        for alias, (before, label) in zip(aliases, pairs, strict=True)
    ]
    inc_record = cast(RunJson, {**record, "comparisons": inc_comps})
    found = cost_verdicts(
        inc_record,
        replays,
        policy,
        settled=settled,
        calibration=_aliased(calibration, name, aliases),
        history=_aliased(history, name, aliases),
    )
    increments = {(k[1], k[2]): c for k, c in (found.headline() if found else {}).items()}
    previous = {label: (alias, prev) for alias, (prev, label) in zip(aliases, pairs, strict=True)}
    where = _where(inc_record, replays, previous)
    out = {}
    for k in dict.fromkeys([*cumulative, *increments]):
        inc = Cell.of_cost(increments.get(k))
        if inc.word in MOVED and k[0] in previous:
            inc = dataclasses.replace(inc, functions=where(k))
        out[k] = (Cell.of_cost(cumulative.get(k)), inc)
    return out


def _where(
    record: RunJson, replays: list[ReplayRecord], previous: dict[str, tuple[str, str]]
) -> Callable[[tuple[str, str]], tuple[FunctionMove, ...]]:
    """Where an increment (label, step) moved, from the replays its verdict pools (the
    counting group `pooled_methods` keeps for it)."""
    kept = pooled_methods(record, replays)

    def where(k: tuple[str, str]) -> tuple[FunctionMove, ...]:
        alias, prev = previous[k[0]]
        group = kept.get((alias, k[0], k[1]))
        pooled = [
            r
            for r in replays
            if k[1] in r.get("steps", {}) and (group is None or group_of(r, k[1]) == group[0])
        ]
        return tuple(functions_moved(pooled, prev, k[0], k[1]))

    return where


def rows_of(
    comparison: str,
    lane: str,
    metric: str,
    points: Sequence[Point],
    cells: dict[tuple[str, str], tuple[Cell, Cell]],
    keys: Sequence[str],
    steps: Sequence[str],
) -> list[Row]:
    """One row per step: `points` in order, `keys` their labels in `cells`."""
    out = []
    for step in steps:
        found = [cells.get((k, step)) for k in keys[1:]]
        if not any(found):
            continue
        shown = [points[0]]
        for p, pair in zip(points[1:], found, strict=True):
            cum, inc = pair if pair is not None else (Cell.of_cost(None), Cell.of_cost(None))
            shown.append(_point(p, cum, inc))
        out.append(Row(comparison, step, lane, metric, tuple(shown)))
    return out


def _point(p: Point, cumulative: Cell, increment: Cell) -> Point:
    return Point(p.run, p.column, p.build, p.commit, p.subject, cumulative, increment)


@dataclass(frozen=True)
class Drift:
    """A point whose cumulative cost change is beyond the limit (its interval all above
    1 + limit), with the increments up to it that added work, largest first."""

    row: Row
    point: Point
    contributors: tuple[Point, ...]

    @property
    def total(self) -> Cell:
        assert self.point.cumulative is not None
        return self.point.cumulative


JUDGED = ("same", "small", "slower", "faster")


def drift(ledger: Ledger, limit: float, last_only: bool = False) -> list[Drift]:
    """The cost lane's points whose cumulative change is beyond `limit` (a fraction)
    the slower way, whole interval, of a judged class (an undecided or withheld figure
    is a gap: `drift_gaps`): every such column of a run, or (`last_only`, a lab's
    history) the newest point only, as where the series stands now. Each with the
    increments up to it that added work (slower or small), largest first."""
    out = []
    for row in ledger.rows:
        if row.lane != "cost":
            continue
        points = row.points[1:]
        for i, p in enumerate(points):
            if last_only and i != len(points) - 1:
                continue
            total = p.cumulative
            if total is None or total.ci is None or total.word not in JUDGED:
                continue
            # a `same` that is not small lies within the floor of what separates two
            # builds of one code: no drift, whatever the limit
            if total.word not in ("small", "slower"):
                continue
            if total.ci[0] <= 1 + limit:
                continue
            adding = [
                q
                for q in points[: i + 1]
                if q.increment is not None
                and q.increment.word in ("small", "slower")
                and (q.increment.ratio or 0) > 1
            ]
            adding.sort(key=lambda q: -(q.increment.ratio or 0) if q.increment else 0)
            out.append(Drift(row, p, tuple(adding)))
    return out


def drift_gaps(ledger: Ledger, last_only: bool = False, limit: float | None = None) -> list[str]:
    """What keeps a drift gate from judging: no cost row at all, a judged point whose
    cumulative figure is undecided (withheld, too few counts, another method), or (with
    the gate's `limit`) a `same` that is not small whose interval lies beyond the limit:
    it did not clear the small-change floor (or "no change" was not rejected after
    BH), so it is too close to call for drift, never a pass (as the report's gate)."""
    rows = [r for r in ledger.rows if r.lane == "cost"]
    if not rows:
        return ["no step has a cost-lane figure (no counting replays, or none comparable)"]
    out = []
    for row in rows:
        points = row.points[1:]
        for i, p in enumerate(points):
            if last_only and i != len(points) - 1:
                continue
            c = p.cumulative
            where = f"{row.comparison}/{row.step} {p.column}"
            if c is None or c.word not in JUDGED:
                why = c.reason if c is not None else "no figure"
                out.append(f"{where}: undecided ({why})")
            elif limit is not None and c.word == "same" and c.ci and c.ci[0] > 1 + limit:
                out.append(
                    f"{where}: beyond the drift limit but not a small change (inside the "
                    "floor, or not rejected after BH): too close to call for drift"
                )
    return out
