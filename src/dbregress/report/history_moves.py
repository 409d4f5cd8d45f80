"""A run set against its lab's history: which steps moved at this run.

For every (comparison, step, column) of the run, the series of the same lab's runs in
time order, this run last: the time lane's on the same host class (QPS from another
machine is not the same series), the cost lane's from any host (its simulated cache is
fixed, so counts compare across hosts). A change point found at this run by the series
method (analysis/changepoints.py, one call per lane) means the step moved against the
earlier runs; it needs at least MIN_EARLIER runs before this one to say so. Only the
earlier runs measured by this run's method (dbregress/method/identity.py) take part: where the
method changed, the section says what changed instead of reporting moves across it (the
time lane's method is the whole identity, the cost lane's what counts depend on:
method.COUNT_FIELDS, and the count's scope). A history that cannot be read is said in
the section and on stderr, never taken for an empty one.

It also gives the cost verdicts their measured floors (`measured_floors`): the lab's
A/A calibration (store/calibration.py) and the history of the same counts
(store/history_floor.py).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypedDict

from dbregress.analysis import changepoints
from dbregress.analysis.changepoints import Change
from dbregress.analysis.cost import FLOOR_SD
from dbregress.analysis.cost_floors import Floors
from dbregress.analysis.cost_methods import group_of
from dbregress.lab.file import VerdictPolicy
from dbregress.method import identity as method
from dbregress.model.errors import StoreError
from dbregress.shapes.replay import ReplayRecord
from dbregress.shapes.run import RunJson
from dbregress.store.calibration import calibration_floor
from dbregress.store.history import (
    FloorCell,
    History,
    StepSeries,
    history_path,
    method_segments,
)

Notify = Callable[[str], None]


def warn(line: str) -> None:
    """A line for the user on stderr (a report's history that cannot be read)."""
    print(f"warning: {line}", file=sys.stderr)


MIN_EARLIER = 2


@dataclass(frozen=True)
class Moved:
    lane: str
    comparison: str
    step: str
    column: str
    change: Change
    earlier: int  # runs before this one in the series


@dataclass(frozen=True)
class HistoryMoves:
    moved: list[Moved]
    series: int  # series with enough earlier runs of this run's method to judge
    alpha: float
    # What differs from the method of the lab's run before this one (empty: the same)
    method_changed: tuple[str, ...] = ()
    # What differs in what counts depend on (method.COUNT_FIELDS; empty: the same)
    count_changed: tuple[str, ...] = ()
    error: str = ""  # the history could not be read: why


def series_changes(
    series: list[StepSeries], lane: str, policy: VerdictPolicy, small: bool = False
) -> dict[tuple[str, str, str, str | None], dict[str, Change]]:
    """series key -> run id -> the decided change point whose new level starts there
    (`small`: and the cost lane's small shifts, docs/ledger.md).
    Each series is searched in pieces of one method identity (method_segments), all
    pieces of all series in one call, so the false-alarm rate holds over all of them."""
    pieces = {(s.key, i): piece for s in series for i, piece in enumerate(method_segments(s))}
    samples = {k: piece.samples() for k, piece in pieces.items()}
    if lane == "cost":
        found = changepoints.find_all(
            samples,
            better="lower",
            band=policy.cost_band,
            floor_sd=FLOOR_SD,
            small_floor=policy.cost_small_floor,
        )
    else:
        found = changepoints.find_all(samples, better="higher", band=policy.band)
    out: dict[tuple[str, str, str, str | None], dict[str, Change]] = {s.key: {} for s in series}
    for (key, _), piece in pieces.items():
        for c in found[(key, _)].moved() if small else found[(key, _)].decided():
            out[key][piece.points[c.index].run_id] = c
    return out


def _mine(series: list[StepSeries], run_id: str) -> list[StepSeries]:
    """The series that end at this run, cut to the runs of this run's method."""
    out = []
    for s in series:
        if not s.points or s.points[-1].run_id != run_id:
            continue
        last = method_segments(s)[-1]
        if len(last.points) > MIN_EARLIER:
            out.append(last)
    return out


def against_history(run_dir: Path, record: RunJson, notify: Notify = warn) -> HistoryMoves | None:
    """None when the results folder keeps no history, or the run is not in it (run.json
    typed or as read: store/run.py). A history that cannot be read gives a HistoryMoves
    with its `error`, also told through `notify`. The time lane's series are those of
    the host class that measured this run's samples (on a fleet, its workers')."""
    root = run_dir.parent
    if not history_path(root).is_file():
        return None
    policy = VerdictPolicy.of_record(record)
    run_id = str(record.get("run_id") or run_dir.name)
    lab = str(record.get("lab", ""))
    try:
        with History(root) as h:
            if run_id not in h.run_ids():
                return None
            time = _mine(h.series(lab, lane="time"), run_id)
            cost = _mine(h.series(lab, lane="cost"), run_id)
            runs = [r for r in h.runs(lab) if r.kind == "native"]
    except StoreError as e:
        notify(f"this run was not set against its lab's history: {e}")
        return HistoryMoves([], 0, changepoints.ALPHA, error=str(e))
    moved: list[Moved] = []
    for lane, found, band, floor, better in (
        ("time", time, policy.band, 0.0, "higher"),
        ("cost", cost, policy.cost_band, FLOOR_SD, "lower"),
    ):
        keyed = {(s.comparison, s.step, s.column, s.host): s for s in found}
        result = changepoints.find_all(
            {k: s.samples() for k, s in keyed.items()},
            better=better,  # type: ignore[arg-type]
            band=band,
            floor_sd=floor,
            small_floor=policy.cost_small_floor if lane == "cost" else None,
        )
        for k, s in keyed.items():
            last = len(s.points) - 1
            for c in result[k].moved():
                if c.index == last:
                    moved.append(Moved(lane, s.comparison, s.step, s.column, c, last))
    mine = next((i for i, r in enumerate(runs) if r.run_id == run_id), 0)
    changed: tuple[str, ...] = ()
    counts: tuple[str, ...] = ()
    if mine > 0:
        before, now = runs[mine - 1].method, record.get("method_identity")
        if method.key(before) != method.key(now):
            changed = tuple(method.differences(before, now))
        if method.count_key(before) != method.count_key(now):
            counts = tuple(method.differences(before, now, method.COUNT_FIELDS))
    return HistoryMoves(moved, len(time) + len(cost), changepoints.ALPHA, changed, counts)


def markdown(moves: HistoryMoves | None) -> list[str]:
    if moves is None:
        return []
    if moves.error:
        return [
            "## Against this lab's history",
            "",
            f"Not read: {moves.error}. No step is said to have moved or not; rebuild the "
            "history from the run folders with `dbregress history LAB --reindex`.",
            "",
        ]
    changed = []
    if moves.method_changed:
        same_counts = not moves.count_changed
        changed = [
            "The method differs from the lab's previous run: "
            f"{'; '.join(moves.method_changed)}. Runs measured another way are not set "
            "against this one"
            + (
                " in the time lane (the cost lane's counts do not depend on what changed)"
                if same_counts
                else ""
            )
            + "; "
            + (
                "too few earlier runs of this method to look for moves."
                if moves.series == 0
                else "the moves below are against the earlier runs of this method only."
            ),
            "",
        ]
    if moves.series == 0:
        return ["## Against this lab's history", "", *changed] if changed else []
    out = [
        "## Against this lab's history",
        "",
        f"{moves.series} series of this lab's runs in time order, this run last (time lane: "
        "runs on this host class; cost lane: runs on any host), searched for a change "
        f"point at this run at a false-alarm rate of {moves.alpha:.0%} "
        "(docs/history.md).",
        "",
        *changed,
    ]
    if not moves.moved:
        return [*out, "No step moved against the earlier runs.", ""]
    out += [
        "| step | column | lane | moved | ratio [CI] | against |",
        "|---|---|---|---|---|---|",
    ]
    for m in moves.moved:
        c = m.change
        out.append(
            f"| {m.step} | {m.column} | {m.lane} | {c.mark} {c.word} | "
            f"{c.ratio:.3f} [{c.ci[0]:.3f}, {c.ci[1]:.3f}] | "
            f"runs {c.before[0] + 1}..{c.before[1] + 1} of {m.earlier} earlier |"
        )
    return [*out, ""]


class MeasuredFloors(TypedDict):
    """The measured floors `cost_verdicts` takes (analysis/cost.py), by its argument
    names: `cost_verdicts(record, replays, ..., **measured_floors(...))`."""

    calibration: Floors
    history: Floors


def floor_cells(record: RunJson, replays: list[ReplayRecord]) -> list[FloorCell]:
    """What each counted step of a run depends on, per column build: the history
    floor's keys (store/history_floor.py)."""
    builds = record.get("builds") or {}
    cells = []
    for r in replays:
        if r.get("status") != "ok":
            continue
        build = method.build_key(builds.get(r["column"]))
        for step, figures in r["steps"].items():
            count, scope = group_of(r, step)
            spec = figures.get("spec")
            cells.append(FloorCell(r["comparison"], step, build, count, scope, spec))
    return list(dict.fromkeys(cells))


def taken(replays: list[ReplayRecord]) -> set[tuple[str, str, int]]:
    """The replays a run took from the count store, where they were counted (run,
    column, number): its verdicts pool them, so its history floor leaves them out."""
    out = set()
    for r in replays:
        where = r.get("reused")
        if where is not None and where["run"] and where["column"] and where["replay"]:
            out.add((where["run"], where["column"], where["replay"]))
    return out


def history_floor(
    run_dir: Path,
    record: RunJson,
    replays: list[ReplayRecord],
    results_root: Path | None = None,
    notify: Notify = warn,
) -> Floors:
    """The cost verdicts' history floor of a run: each counted step's spread over the
    earlier counts of its build and step by its counting method and scope, from the
    run history of `results_root` (by default the folder that holds the run: a
    bisection gives the results folder of the runs it should learn from). A history
    that cannot be read is told through `notify` and named in the floor's note."""
    root = results_root or run_dir.parent
    if not history_path(root).is_file():
        return Floors(note=f"none: {root} keeps no run history")
    run_id = str(record.get("run_id") or run_dir.name)
    try:
        with History(root) as h:
            return h.cost_floors(floor_cells(record, replays), but=run_id, taken=taken(replays))
    except StoreError as e:
        notify(f"the cost verdicts' history floor was not read: {e}")
        return Floors(note=f"not read: {e}")


def measured_floors(
    run_dir: Path,
    record: RunJson,
    replays: list[ReplayRecord],
    results_root: Path | None = None,
    notify: Notify = warn,
) -> MeasuredFloors:
    """The cost verdicts' measured floors of a run, by `cost_verdicts`' argument names:
    the lab's A/A calibration (store/calibration.py calibration_floor) and the history
    (`history_floor`), both read under `results_root` (by default the folder that holds
    the run). What cannot be read is told through `notify` and named in the floor's
    note."""
    root = results_root or run_dir.parent
    return {
        "calibration": calibration_floor(root, record, replays, notify),
        "history": history_floor(run_dir, record, replays, root, notify),
    }
