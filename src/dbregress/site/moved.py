"""The site's "what moved" lists, its bisections and its version-series tables.

What moved, newest first:
- every change point of the lab's history (site/gather.py's charts: a step's level
  shifted between runs, against the lab's earlier runs);
- every confirmed `slower` or `faster` verdict of a column against its run's base, from
  each run's verdicts.json. A verdict that holds run after run against the same base
  build (a nightly's new commit each night measured against a fixed release) is one
  line with its first and last run and how many runs said it, not a line per run.
With explain's named cause where the run holds explanations, else the cost lane's own
reading of the verdict."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path
from typing import cast

from dbregress.lab.micro_names import group_of
from dbregress.model.errors import DbregressError
from dbregress.shapes.run import ColumnEntry
from dbregress.shapes.site import BisectRead
from dbregress.site.gather import CellKey, RunFolder, read_json, slug
from dbregress.site.model import (
    Bisection,
    Chart,
    Moved,
    Point,
    SeriesRow,
    StepData,
    Verdict,
    VersionSeries,
)

DECIDED = ("slower", "faster")


def causes(rf: RunFolder, problems: list[str]) -> dict[tuple[str, str, str], str]:
    """(comparison, column, step) -> explain's first named cause, for a run that holds
    explanations (explain/explain.json); empty otherwise."""
    from dbregress.analysis.compare import compare_run
    from dbregress.explain.store import load
    from dbregress.report.explanations import causes_for
    from dbregress.store.run import read_run

    try:
        explain = load(rf.folder)
        if explain is None:
            return {}
        data = read_run(rf.folder)
        found = causes_for(explain, data.record, compare_run(data.record, data.steps))
    except (DbregressError, KeyError, ValueError) as e:
        problems.append(f"the explanations of {rf.info.run_id} could not be read: {e}")
        return {}
    return {key: "; ".join(c.text for c in cs[:2]) for key, cs in found.items() if cs}


def _point_at(chart: Chart, column: str, run: int) -> Point | None:
    for line in chart.lines:
        if line.column == column:
            for piece in line.pieces:
                for p in piece:
                    if p.run == run:
                        return p
    return None


Causes = dict[str, dict[tuple[str, str, str], str]]  # run id -> causes() of its folder


def change_lines(data: list[StepData], folders: list[RunFolder], named: Causes) -> list[Moved]:
    out = []
    for step in data:
        for chart in step.charts:
            for m in chart.changes:
                p = _point_at(chart, m.column, m.run)
                rf = folders[m.run]
                cause = named.get(rf.info.run_id, {}).get((chart.comparison, m.column, chart.step))
                out.append(
                    Moved(
                        "change point",
                        chart.lane,
                        chart.comparison,
                        chart.step,
                        m.column,
                        m.run_id,
                        rf.info.started,
                        m.word,
                        m.ratio,
                        m.ci,
                        p.build if p else "",
                        rf.host,
                        p.commit if p else None,
                        p.subject if p else None,
                        cause,
                        rf.report,
                        step.page,
                    )
                )
    return out


def _base_of(rf: RunFolder, comparison: str) -> str:
    for c in rf.columns:
        if c.get("comparison") == comparison and c.get("base"):
            return str(c.get("build", ""))
    return ""


def _build(rf: RunFolder, column: str) -> str:
    for c in rf.columns:
        if c.get("label") == column:
            return str(c.get("build", ""))
    return ""


def verdict_lines(
    folders: list[RunFolder], pages: dict[tuple[str, str], str], named: Causes
) -> list[Moved]:
    """Confirmed verdicts against each run's base; a run of the same verdict against
    the same base build in consecutive runs collapsed into one line (its last run)."""
    held: dict[tuple[str, ...], tuple[Moved, int, int]] = {}  # key -> (line, first, count)
    key: tuple[str, ...]
    out: list[tuple[Moved, int, int]] = []
    for rf in folders:
        now: set[tuple[str, ...]] = set()
        for (lane, comp, column, step), v in rf.verdicts.items():
            if v.word not in DECIDED:
                continue
            key = (lane, comp, column, step, v.word, _base_of(rf, comp))
            now.add(key)
            build = rf.builds.get(column, {})
            cause = named.get(rf.info.run_id, {}).get((comp, column, step))
            line = Moved(
                "verdict", lane, comp, step, column, rf.info.run_id, rf.info.started, v.word,
                v.ratio, v.ci, _build(rf, column), rf.host, build.get("commit"),
                build.get("subject"),
                cause or rf.readings.get((lane, comp, column, step)), rf.report,
                pages.get((comp, step)),
            )  # fmt: skip
            first, count = (held[key][1], held[key][2] + 1) if key in held else (rf.place, 1)
            held[key] = (line, first, count)
        for key in [k for k in held if k not in now]:
            out.append(held.pop(key))
    out += held.values()
    return [_span(line, first, count, folders) for line, first, count in out]


def _span(line: Moved, first: int, count: int, folders: list[RunFolder]) -> Moved:
    if count == 1:
        return line
    since = folders[first]
    build = since.builds.get(line.column, {})
    began = str(build.get("commit") or "")[:12] or _build(since, line.column)
    note = f"in {count} consecutive runs, {since.info.run_id} ({began}) to {line.run_id}"
    return replace(line, cause=f"{note}; {line.cause}" if line.cause else note)


def newest_first(lines: Iterable[Moved]) -> list[Moved]:
    return sorted(
        lines, key=lambda m: (m.started or "", m.run_id, m.kind, m.step, m.column), reverse=True
    )


def open_verdicts(folders: list[RunFolder]) -> dict[CellKey, tuple[str, int]]:
    """Each (lane, comparison, column, step) confirmed slower and not closed since: ->
    (the run that last confirmed it, how many runs after it did not judge it). Only a
    judged run closes it: its verdict for the cell decided `same` or `faster`. A run
    whose verdicts.json is missing, whose lane was not judged, or whose verdict is
    undecided or absent for the cell leaves it open."""
    open_: dict[CellKey, tuple[str, int]] = {}
    for rf in folders:
        slower = (k for k, v in rf.verdicts.items() if v.word == "slower")
        for key in dict.fromkeys([*open_, *slower]):  # in order: the same site, the same bytes
            v = rf.verdicts.get(key)
            if v is not None and v.word == "slower":
                open_[key] = (rf.info.run_id, 0)
            elif v is not None and v.word in ("same", "faster") and key[0] not in rf.not_judged:
                del open_[key]
            else:
                run, after = open_[key]
                open_[key] = (run, after + 1)
    return open_


def open_regressions(
    moved: list[Moved], folders: list[RunFolder], data: list[StepData]
) -> list[Moved]:
    """Every confirmed slower verdict no later judged run has closed (open_verdicts),
    and each series' latest change point where it was a slowdown that still stands:
    measured by the same method as the series' last point, on a chart the lab's last
    run is on (its host class in the time lane). A last run without a level for the
    step has not shown a recovery: the slowdown stays open. A change point before a
    method boundary, or on a host the lab has left, says nothing of today."""
    if not folders:
        return []
    last = folders[-1]
    out = []
    for (lane, comp, column, name), (run, after) in open_verdicts(folders).items():
        for m in moved:
            if (m.kind, m.lane, m.comparison, m.column, m.step, m.run_id) == (
                "verdict", lane, comp, column, name, run
            ):  # fmt: skip
                still = f"not judged in the {after} run(s) since" if after else None
                out.append(replace(m, still=still))
    for step in data:
        for chart in step.charts:
            if chart.host is not None and chart.host != last.host:
                continue
            for line in chart.lines:
                marks = [m for m in chart.changes if m.column == line.column]
                if not marks or marks[-1].word != "slower" or not line.pieces:
                    continue
                end = line.pieces[-1][-1]
                at = _point_at(chart, line.column, marks[-1].run)
                if at is None or at.method != end.method:
                    continue
                out += [
                    x for x in moved
                    if x.kind == "change point" and x.run_id == marks[-1].run_id
                    and x.column == line.column and x.step == chart.step
                    and x.lane == chart.lane and x.comparison == chart.comparison
                ]  # fmt: skip
    return out


def undecided(folder: RunFolder) -> int:
    """How many of a run's verdicts against its base are undecided (or withheld)."""
    return sum(v.word == "undecided" for v in folder.verdicts.values())


def _short(spec: str) -> str:
    """A source build's spec as its commit (12) and flavor; any other as given."""
    if "@src:" in spec and "#" in spec:
        ref = spec.split("#", 1)[1]
        commit, _, flavor = ref.partition("+")
        return commit[:12] + (f"+{flavor}" if flavor else "")
    return spec


def bisection(root: Path, path: Path, problems: list[str]) -> Bisection | None:
    raw = read_json(path, problems)
    if raw is None:
        return None
    state = cast(BisectRead, raw)  # as read: each part checked before use
    request = state.get("request") or {}
    builds = [str(b) for b in state.get("builds") or request.get("builds") or []]
    first_bad = state.get("first_bad")
    candidates = tuple(_short(str(c)) for c in state.get("candidates") or [])
    changes = state.get("changes") if request.get("all_changes") else None
    if changes is not None and not state.get("stopped") and state.get("counted"):
        named = ", ".join(
            f"{_short(str(c.get('build') or c.get('commit')))} ({c.get('direction', '?')})"
            for c in changes
        )
        answer = f"{len(changes)} change(s): {named}" if changes else "no change above --min"
    elif first_bad:
        answer = f"first bad build: {_short(str(first_bad))}"
    elif candidates:
        answer = f"the first bad build could be any of these {len(candidates)}"
    elif state.get("stopped"):
        answer = f"stopped: {state['stopped']}"
    elif state.get("ends_same"):
        answer = "nothing to bisect: the ends measure the same"
    else:
        answer = "not finished"
    path_lines = tuple(
        f"{_short(str(p.get('mid')))}: {(p.get('mid_vs_lo') or {}).get('word', '?')} against "
        f"{_short(str(p.get('lo')))}"
        for p in state.get("points") or []
        if isinstance(p, dict)
    )
    took = state.get("took_s")
    return Bisection(
        str(path.parent.relative_to(root)), builds[0].split("@", 1)[0] if builds else "",
        str(request.get("step", "")),
        str(request.get("lane", "")), _short(builds[0]) if builds else "",
        _short(builds[-1]) if builds else "", answer,
        _short(str(first_bad)) if first_bad else None, candidates, path_lines,
        float(took) if isinstance(took, int | float) else None,
    )  # fmt: skip


def bisection_files(root: Path) -> list[Path]:
    """Every bisect.json one or two folders under the results root, newest first."""
    return sorted({*root.glob("*/bisect.json"), *root.glob("*/*/bisect.json")}, reverse=True)


def bisections(root: Path, problems: list[str]) -> list[Bisection]:
    return [b for p in bisection_files(root) if (b := bisection(root, p, problems)) is not None]


def _cell(v: Verdict | None) -> tuple[float | None, str]:
    if v is None:
        return None, "-"
    return v.ratio, v.shown


def version_series(lab: str, folders: list[RunFolder]) -> list[VersionSeries]:
    """Per run and comparison of three or more columns: every column relative to the
    base (the first column), per step, from the run's verdicts."""
    out = []
    for rf in folders:
        comps: dict[str, list[ColumnEntry]] = {}
        for c in rf.columns:
            comps.setdefault(str(c.get("comparison")), []).append(c)
        for comp, cols in comps.items():
            if len(cols) < 3 or not rf.verdicts:
                continue
            labels = [str(c.get("label")) for c in cols]
            steps = list(dict.fromkeys(k[3] for k in rf.verdicts if k[1] == comp))
            rows = []
            for step in steps:
                time = [_cell(rf.verdicts.get(("time", comp, lb, step))) for lb in labels[1:]]
                cost = [_cell(rf.verdicts.get(("cost", comp, lb, step))) for lb in labels[1:]]
                rows.append(
                    SeriesRow(
                        step, group_of(step) or comp,
                        (1.0, *(r for r, _ in time)), (1.0, *(r for r, _ in cost)),
                        ("base", *(w for _, w in time)), ("base", *(w for _, w in cost)),
                    )
                )  # fmt: skip
            page = f"{slug(lab)}/series-{slug(rf.info.run_id)}-{slug(comp)}.html"
            builds = tuple(str(c.get("build", "")) for c in cols)
            out.append(
                VersionSeries(
                    rf.info.run_id, rf.info.started, comp, tuple(labels), builds,
                    tuple(rows), page, rf.report,
                )
            )  # fmt: skip
    return out
