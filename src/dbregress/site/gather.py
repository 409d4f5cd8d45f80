"""A lab's history as the site shows it (site/model.py), from the results folder's
history (store/history.py) and its run folders (run.json for builds and commits,
verdicts.json for each column's verdict against its base, explain/explain.json for
named causes).

The series are the history's own (`History.series`): the time lane per host class, the
cost lane across hosts. They are cut where the method that measured them changes
(`method_segments`), and change points are the ones `dbregress history` marks
(report/history_moves.series_changes: all series of a lane in one call, so the
false-alarm rate holds over the lab), never looked for across a method boundary."""

from __future__ import annotations

import itertools
import json
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import cast
from urllib.parse import quote

from dbregress.analysis.changepoints import Change
from dbregress.lab.file import VerdictPolicy
from dbregress.method import identity as method
from dbregress.model.errors import DbregressError
from dbregress.report.history_moves import series_changes
from dbregress.shapes.run import BuildIdentity, ColumnEntry, RunJson
from dbregress.shapes.site import JsonObject, NightlyStateRead, NightRead
from dbregress.shapes.verdicts import CostVerdict, StepVerdictJson, Verdicts
from dbregress.site.model import (
    Break,
    ChangeMark,
    Chart,
    Line,
    NightLine,
    Point,
    RunSummary,
    StepData,
    Verdict,
)
from dbregress.store.history import (
    History,
    RunInfo,
    SeriesPoint,
    StepSeries,
    history_path,
    level,
    method_segments,
)

LANES = ("time", "cost")
CellKey = tuple[str, str, str, str]  # (lane, comparison, column, step)


def read_json(path: Path, problems: list[str]) -> JsonObject | None:
    """A JSON object from a file; a file that is missing gives None, one that cannot be
    read gives None and a line in `problems` (the site says it, never hides it)."""
    try:
        value = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as e:
        problems.append(f"cannot read {path.name} of {path.parent.name}: {e}")
        return None
    if not isinstance(value, dict):
        problems.append(f"{path.name} of {path.parent.name} is not a JSON object")
        return None
    return cast(JsonObject, value)


def _pair(value: object) -> tuple[float, float] | None:
    if isinstance(value, list | tuple) and len(value) == 2 and None not in value:
        return (float(value[0]), float(value[1]))
    return None


def _verdict(entry: StepVerdictJson | CostVerdict) -> Verdict:
    ratio = entry.get("ratio")
    return Verdict(
        str(entry.get("verdict", "undecided")),
        None if ratio is None else float(ratio),
        _pair(entry.get("ci")),
        str(entry.get("reason") or ""),
        bool(entry.get("small")),
    )


def not_judged(verdicts: Verdicts, cells: dict[CellKey, Verdict]) -> dict[str, str]:
    """Each lane the run did not judge, with why: verdicts.json's `lanes.not_judged`
    (report/json_report.py), and any lane in which no step has a decided verdict (a
    file written before `lanes`, or one whose steps have no verdict at all)."""
    lanes = verdicts.get("lanes")
    gaps = lanes.get("not_judged") if isinstance(lanes, dict) else None
    out = {str(k): str(v) for k, v in (gaps if isinstance(gaps, dict) else {}).items()}
    for lane in LANES:
        if lane not in out and not any(
            k[0] == lane and v.word in ("slower", "faster", "same") for k, v in cells.items()
        ):
            out[lane] = "no step has a decided verdict in this lane"
    return out


def verdict_cells(verdicts: Verdicts) -> tuple[dict[CellKey, Verdict], dict[CellKey, str]]:
    """Every (lane, comparison, column, step) verdict of a run's verdicts.json, and the
    cost lane's reading of it where it gives one."""
    cells: dict[CellKey, Verdict] = {}
    readings: dict[CellKey, str] = {}
    for comp in verdicts.get("comparisons") or []:
        for col in comp.get("columns") or []:
            for s in col.get("steps") or []:
                name, label, step = str(comp.get("name")), str(col.get("label")), str(s["step"])
                cells[("time", name, label, step)] = _verdict(s)
                cost = s.get("cost")
                if isinstance(cost, dict):
                    cells[("cost", name, label, step)] = _verdict(cost)
                    if cost.get("reading"):
                        readings[("cost", name, label, step)] = str(cost["reading"])
    return cells, readings


@dataclass
class RunFolder:
    """What the site reads of one run folder."""

    info: RunInfo
    place: int  # on the lab's axis, oldest first
    folder: Path
    report: str | None  # report.html relative to the site's root
    builds: dict[str, BuildIdentity] = field(default_factory=dict)  # column -> its build
    columns: list[ColumnEntry] = field(default_factory=list)  # as run.json has them
    verdicts: dict[CellKey, Verdict] = field(default_factory=dict)
    readings: dict[CellKey, str] = field(default_factory=dict)
    judged: bool = False  # its verdicts.json was read
    not_judged: dict[str, str] = field(default_factory=dict)  # lane -> why it was not

    @property
    def host(self) -> str:
        return self.info.hostname or (self.info.host or "unknown")[:12]


def read_runs(root: Path, out: Path, runs: list[RunInfo], problems: list[str]) -> list[RunFolder]:
    folders = []
    for i, info in enumerate(runs):
        folder = root / info.path
        html = folder / "report.html"
        report = quote(os.path.relpath(html, out)) if html.is_file() else None
        rf = RunFolder(info, i, folder, report)
        raw = read_json(folder / "run.json", problems)
        if raw is None:
            problems.append(f"run {info.run_id}: no run.json in {info.path} (moved or removed?)")
        record = cast(RunJson, raw or {})  # as read: every part checked before use
        rf.builds = {
            str(k): v for k, v in (record.get("builds") or {}).items() if isinstance(v, dict)
        }
        rf.columns = [c for c in record.get("columns") or [] if isinstance(c, dict)]
        verdicts = cast("Verdicts | None", read_json(folder / "verdicts.json", problems))
        if verdicts is not None:
            rf.verdicts, rf.readings = verdict_cells(verdicts)
            rf.not_judged = not_judged(verdicts, rf.verdicts)
            rf.judged = True
        elif record:
            problems.append(
                f"run {info.run_id}: no verdicts.json (`dbregress report` writes it): its "
                "verdicts against the base are not shown"
            )
        folders.append(rf)
    return folders


def summaries(folders: Iterable[RunFolder]) -> list[RunSummary]:
    return [
        RunSummary(f.info.run_id, f.info.started, f.info.status, f.host, f.report) for f in folders
    ]


def _point(rf: RunFolder, s: StepSeries, p: SeriesPoint, value: float) -> Point:
    build = rf.builds.get(s.column, {})
    return Point(
        run=rf.place,
        run_id=p.run_id,
        started=p.started,
        level=value,
        samples=len(p.samples),
        left_out=p.left_out,
        build=p.build,
        config=p.config,
        host=p.hostname or (p.host or "unknown")[:12],
        method=p.method,
        commit=build.get("commit"),
        subject=build.get("subject"),
        verdict=rf.verdicts.get((s.lane, s.comparison, s.column, s.step)),
        report=rf.report,
        base=any(c.get("label") == s.column and c.get("base") for c in rf.columns),
    )


def _line(s: StepSeries, by_id: dict[str, RunFolder], after: dict[int, int]) -> Line:
    """A column's points, in pieces: a new piece where the method changes, and where a
    run of the chart (`after`: each of its runs' next one) has no level for it (its
    repeats all disturbed, its folder gone): the line is never drawn across a run it
    does not have."""
    pieces: list[tuple[Point, ...]] = []
    for piece in method_segments(s):
        points: list[Point] = []
        for p in piece.points:
            value = level(p.samples, s.lane)
            rf = by_id.get(p.run_id)
            if value is None or rf is None:
                continue
            if points and after.get(points[-1].run) != rf.place:
                pieces.append(tuple(points))
                points = []
            points.append(_point(rf, s, p, value))
        if points:
            pieces.append(tuple(points))
    return Line(s.column, tuple(pieces))


def _breaks(lane: str, lines: list[Line], by_place: dict[int, RunFolder]) -> tuple[Break, ...]:
    """Where any line of the chart changes method, once per place; what changed. (A
    line's pieces also end where a run has no level: that is a gap, not a break.)"""
    seen: dict[tuple[int, int], Break] = {}
    fields = method.FIELDS if lane == "time" else method.COUNT_FIELDS
    for line in lines:
        for before, after in zip(line.pieces, line.pieces[1:], strict=False):
            a, b = before[-1].run, after[0].run
            if (a, b) in seen or before[-1].method == after[0].method:
                continue
            what = method.differences(by_place[a].info.method, by_place[b].info.method, fields)
            if not what:  # the cost lane's count scope, or a point of mixed methods
                what = ["counting method or count scope changed"]
            seen[(a, b)] = Break(a, b, tuple(what))
    return tuple(sorted(seen.values(), key=lambda x: x.run))


def _marks(
    s: StepSeries, found: dict[str, Change], by_id: dict[str, RunFolder]
) -> list[ChangeMark]:
    out = []
    for run_id, c in found.items():
        rf = by_id.get(run_id)
        if rf is not None:
            out.append(ChangeMark(s.column, rf.place, run_id, c.verdict, c.ratio, c.ci))
    return out


def charts(
    history: History, lab: str, folders: list[RunFolder], policy: VerdictPolicy
) -> list[Chart]:
    """Every lane's charts of the lab, in the history's step order."""
    by_id = {f.info.run_id: f for f in folders}
    by_place = {f.place: f for f in folders}
    out: list[Chart] = []
    for lane in LANES:
        series = history.series(lab, lane=lane)  # type: ignore[arg-type]
        marks = series_changes(series, lane, policy)
        groups: dict[tuple[str, str, str | None], list[StepSeries]] = {}
        for s in series:
            groups.setdefault((s.comparison, s.step, s.host), []).append(s)
        for (comp, step, host), group in groups.items():
            # the chart's runs: those with a sample row in any of its series, a level or
            # not (a run whose repeats were all disturbed has rows, no level)
            mine = sorted(
                {by_id[p.run_id].place for s in group for p in s.points if p.run_id in by_id}
            )
            after = dict(itertools.pairwise(mine))
            lines = [_line(s, by_id, after) for s in group]
            changes = [m for s in group for m in _marks(s, marks.get(s.key, {}), by_id)]
            hostname = next((p.host for ln in lines for pc in ln.pieces for p in pc), None)
            out.append(
                Chart(
                    lane,
                    comp,
                    step,
                    hostname if host is not None else None,
                    tuple(lines),
                    tuple(sorted(changes, key=lambda m: m.run)),
                    _breaks(lane, lines, by_place),
                )
            )
    return out


def slug(text: str) -> str:
    """A file name for a lab, comparison or step (keeps it readable, never a path)."""
    keep = "".join(c if c.isalnum() or c in "-_." else "_" for c in text)
    return keep.strip(".") or "_"


def steps(lab: str, every: list[Chart]) -> list[StepData]:
    """The charts per (comparison, step), each step's page named."""
    order: dict[tuple[str, str], list[Chart]] = {}
    for c in every:
        order.setdefault((c.comparison, c.step), []).append(c)
    # the time lane's steps first in their order, then any the cost lane alone has
    return [
        StepData(comp, step, f"{slug(lab)}/step-{slug(comp)}-{slug(step)}.html", tuple(cs))
        for (comp, step), cs in order.items()
    ]


def nightly_state(root: Path, problems: list[str]) -> NightlyStateRead:
    """The nightly recipe's state file (RESULTS/nightly/state.json, docs/nightly.md),
    as read; empty without one."""
    return cast(NightlyStateRead, read_json(root / "nightly" / "state.json", problems) or {})


def references(state: NightlyStateRead) -> dict[str, str]:
    """lab -> the run id of its drift reference, as the nightly recipe keeps it."""
    found = state.get("reference")
    if not isinstance(found, dict):
        return {}
    return {
        str(lab): str(ref["run"])
        for lab, ref in found.items()
        if isinstance(ref, dict) and ref.get("run")
    }


def night_lines(
    state: NightlyStateRead, root: Path, out: Path, last: int = 10
) -> dict[str, list[NightLine]]:
    """The nightly recipe's last nights per lab, newest first (none without its state
    file). A night that failed before it made a run (a build that does not build) has
    no run in the history: this is where the site shows it."""
    by_lab: dict[str, list[NightRead]] = {}
    for n in state.get("nights") or []:
        if isinstance(n, dict) and n.get("lab") and n.get("night"):
            by_lab.setdefault(str(n["lab"]), []).append(n)
    lines: dict[str, list[NightLine]] = {}
    for lab, mine in by_lab.items():
        for n in sorted(mine, key=lambda n: str(n.get("night")), reverse=True)[:last]:
            run = n.get("run")
            html = root / str(run) / "report.html" if run else None
            status = n.get("status")
            lines.setdefault(lab, []).append(
                NightLine(
                    str(n.get("night")), n.get("started"), str(n.get("commit") or "")[:12],
                    str(n.get("subject") or ""), str(n.get("outcome") or "?"),
                    status if isinstance(status, int) else None, str(n.get("why") or ""),
                    str(run) if run else None,
                    quote(os.path.relpath(html, out)) if html and html.is_file() else None,
                )
            )  # fmt: skip
    return lines


def open_history(root: Path) -> History:
    if not history_path(root).is_file():
        raise DbregressError(
            f"no run history at {history_path(root)}: run a lab with --results {root} first, "
            f"or index existing run folders with `dbregress history LAB --results {root} "
            "--reindex`"
        )
    return History(root)
