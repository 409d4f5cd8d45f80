"""A run set against its lab's history: which steps moved at this run.

For every (comparison, step, column) of the run, the series of the same lab's runs in
time order, this run last: the time lane's on the same host class (QPS from another
machine is not the same series), the cost lane's from any host (its simulated cache is
fixed, so counts compare across hosts). A change point found at this run by the series
method (analysis/changepoints.py, one call per lane) means the step moved against the
earlier runs; it needs at least MIN_EARLIER runs before this one to say so. Only the
earlier runs measured by this run's method (dbregress/method.py) take part: where the
method changed, the section says what changed instead of reporting moves across it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from dbregress import method
from dbregress.analysis import changepoints
from dbregress.analysis.changepoints import Change
from dbregress.analysis.cost import FLOOR_SD
from dbregress.errors import StoreError
from dbregress.lab import VerdictPolicy
from dbregress.shapes.run import RunJson
from dbregress.store.history import (
    History,
    StepSeries,
    history_path,
    host_fingerprint,
    method_segments,
)

MIN_EARLIER = 2
MARKS = {"slower": "▼", "faster": "▲"}


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


def against_history(run_dir: Path, record: RunJson) -> HistoryMoves | None:
    """None when the results folder keeps no history, or the run is not in it (run.json
    typed or as read: store/run.py)."""
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
            host = host_fingerprint(record.get("host"))
            time = _mine(h.series(lab, lane="time", host=host), run_id) if host else []
            cost = _mine(h.series(lab, lane="cost"), run_id)
            runs = [r for r in h.runs(lab) if r.kind == "native"]
    except StoreError:
        return None
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
        )
        for k, s in keyed.items():
            last = len(s.points) - 1
            for c in result[k].decided():
                if c.index == last:
                    moved.append(Moved(lane, s.comparison, s.step, s.column, c, last))
    mine = next((i for i, r in enumerate(runs) if r.run_id == run_id), 0)
    changed: tuple[str, ...] = ()
    if mine > 0 and method.key(runs[mine - 1].method) != method.key(record.get("method_identity")):
        changed = tuple(method.differences(runs[mine - 1].method, record.get("method_identity")))
    return HistoryMoves(moved, len(time) + len(cost), changepoints.ALPHA, changed)


def markdown(moves: HistoryMoves | None) -> list[str]:
    if moves is None:
        return []
    changed = []
    if moves.method_changed:
        changed = [
            "The method differs from the lab's previous run: "
            f"{'; '.join(moves.method_changed)}. Runs measured another way are not set "
            "against this one; "
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
            f"| {m.step} | {m.column} | {m.lane} | {MARKS[c.verdict]} {c.verdict} | "
            f"{c.ratio:.3f} [{c.ci[0]:.3f}, {c.ci[1]:.3f}] | "
            f"runs {c.before[0] + 1}..{c.before[1] + 1} of {m.earlier} earlier |"
        )
    return [*out, ""]


def history_noise(run_dir: Path, record: RunJson) -> dict[str, dict[str, float]]:
    """The cost verdict's history floor of a run: the spread of each counted step in the
    lab's earlier runs measured by this run's method (store.history.History.cost_noise);
    empty when the results folder keeps no history or the run recorded no method (run.json
    typed or as read: store/run.py)."""
    root = run_dir.parent
    if not history_path(root).is_file():
        return {}
    run_id = str(record.get("run_id") or run_dir.name)
    try:
        with History(root) as h:
            return h.cost_noise(
                str(record.get("lab", "")), method.key(record.get("method_identity")), run_id
            )
    except StoreError:
        return {}
