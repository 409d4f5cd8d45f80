"""`dbregress ledger`: the drift ledger of a run (its comparisons' columns in order) or
of a lab's history from a pinned reference, as Markdown, JSON (format 1) or TSV
(docs/ledger.md). The figures are analysis/ledger.py's; this module finds the points,
reads their run folders and writes the tables."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from pathlib import Path
from typing import cast

from dbregress.analysis import ledger as lg
from dbregress.analysis.compare import compare_run
from dbregress.analysis.ledger import Cell, Ledger, Point, Row
from dbregress.lab.file import VerdictPolicy
from dbregress.method import identity as method
from dbregress.model.errors import DbregressError, StoreError
from dbregress.report import history_moves

# the outputs (report/ledger_text.py), where callers find them
from dbregress.report.ledger_text import beyond, drift_line, dumps, gaps, markdown, to_json, tsv
from dbregress.shapes.replay import ReplayRecord
from dbregress.shapes.run import ColumnEntry, ComparisonEntry, RunJson
from dbregress.shapes.step_result import StepResultJson
from dbregress.store.history import History, RunInfo, history_path
from dbregress.store.replays import load_lane, load_replays
from dbregress.store.run import read_run

__all__ = [
    "beyond",
    "drift_line",
    "dumps",
    "gaps",
    "lab_ledger",
    "markdown",
    "run_ledger",
    "to_json",
    "tsv",
]


def _point(record: RunJson, label: str) -> Point:
    build = (record.get("builds") or {}).get(label) or {}
    column = next((c for c in record["columns"] if c["label"] == label), None)
    return Point(
        run=str(record["run_id"]),
        column=label,
        build=column["build"] if column else "?",
        commit=build.get("commit") or None,
        subject=build.get("subject") or None,
    )


def run_ledger(
    path: Path, step: str | None = None, lanes: Sequence[str] = ("cost", "time")
) -> Ledger:
    """The ledger of one run: per comparison of two or more columns, each column's
    change from the base (the first) and over the column before it."""
    data = read_run(path)
    record, replays = data.record, load_replays(path)
    policy = VerdictPolicy.of_record(record)
    floors = history_moves.measured_floors(path, record, replays)
    settled = (load_lane(path) or {}).get("replays_max", 5)
    rows: list[Row] = []
    seen: list[str] = []
    for comp in record["comparisons"]:
        labels = comp["labels"]
        if len(labels) < 2:
            continue
        points = [_point(record, lb) for lb in labels]
        steps = _steps(data.steps, replays, comp["labels"])
        seen += [s for s in steps if s not in seen]
        if step is not None:
            steps = [step] if step in steps else []
        if "cost" in lanes and replays:
            cells = lg.cost_cells(
                record,
                replays,
                comp,
                labels,
                policy,
                (floors["calibration"], floors["history"]),
                settled,
                family=record["comparisons"],
            )
            rows += lg.rows_of(
                comp["name"], "cost", "estimated_cycles", points, cells, labels, steps
            )
        if "time" in lanes:
            rows += _time_rows(record, data.steps, comp, points, steps)
    _step_known(step, seen)
    notes = () if replays else ("the run has no counting replays: no cost lane",)
    return Ledger(str(record["run_id"]), None, tuple(rows), notes)


def _step_known(step: str | None, seen: Sequence[str]) -> None:
    if step is not None and step not in seen:
        raise DbregressError(
            f"--step {step}: no comparison of this ledger has it; its steps: {', '.join(seen)}"
        )


def _steps(
    steps_by_job: dict[str, list[StepResultJson]],
    replays: list[ReplayRecord],
    labels: Sequence[str],
) -> list[str]:
    """The steps a comparison's columns counted or ran, in order."""
    found: list[str] = []
    for r in replays:
        if r.get("column") in labels and r.get("status") == "ok":
            found += [s for s in r["steps"] if s not in found]
    for results in steps_by_job.values():
        found += [r["step"] for r in results if r["column"] in labels and r["step"] not in found]
    return found


def _time_rows(
    record: RunJson,
    steps_by_job: dict[str, list[StepResultJson]],
    comp: ComparisonEntry,
    points: list[Point],
    steps: list[str],
) -> list[Row]:
    """The time lane's ledger within one run (repeats are only comparable within it): the
    cumulative changes are the report's verdicts; each increment is judged as a pair."""
    labels = comp["labels"]

    def verdicts(columns: Sequence[str]) -> dict[tuple[str, str], Cell]:
        one = cast(RunJson, {**record, "comparisons": [{**comp, "labels": list(columns)}]})
        found = compare_run(one, steps_by_job)
        return {(k[1], k[2]): Cell.of_time(v) for k, v in found.qps.items()}

    # each column against the base as the report judged it: across the whole lab (one
    # Benjamini-Hochberg family), not this comparison alone, so the ledger never says
    # `faster` where the report said `undecided`
    whole = compare_run(record, steps_by_job).qps
    cumulative = {(k[1], k[2]): Cell.of_time(v) for k, v in whole.items() if k[0] == comp["name"]}
    increments: dict[tuple[str, str], Cell] = {}
    for before, label in itertools.pairwise(labels):
        increments |= {k: c for k, c in verdicts([before, label]).items() if k[0] == label}
    cells = {
        k: (cumulative.get(k, Cell.of_time(None)), increments.get(k, Cell.of_time(None)))
        for k in dict.fromkeys([*cumulative, *increments])
    }
    return lg.rows_of(comp["name"], "time", "qps", points, cells, labels, steps)


# -- a lab's history from a pinned reference -------------------------------------------


Series = dict[str, tuple[ComparisonEntry, list[tuple[Point, RunJson, list[ReplayRecord]]]]]


def lab_ledger(root: Path, lab: str, reference: str, step: str | None = None) -> Ledger:
    """The cost ledger of a lab's runs from a pinned reference: `reference` is a run id
    (its comparisons' base columns) or a build (the first column, oldest run first,
    whose build is it). The points are every later non-base column of every run of the
    lab, oldest first (a nightly's head each night); each is compared with the reference
    (cumulative) and with the point before it (increment), never with "the last good".
    The time lane is left out: repeats of two runs met different moments of the host."""
    if not history_path(root).is_file():
        raise StoreError(
            f"no run history under {root}: run a lab first, or `dbregress history "
            f"{lab} --reindex --results {root}`"
        )
    with History(root) as h:
        runs = [r for r in h.runs(lab) if r.kind == "native"]
    if not runs:
        raise StoreError(f"no runs of lab {lab!r} in the history under {root}")
    start, ref_label = _reference(runs, reference, root)
    notes: list[str] = []
    comps = _series(root, runs[start:], ref_label, notes)
    rows: list[Row] = []
    seen: list[str] = []
    for name, (comp, points) in comps.items():
        if not points:
            continue
        if len(points) < 2:
            notes.append(f"{name}: no run after the reference")
            continue
        cells, keys = _lab_cells(root, comp, points, notes)
        steps = list(dict.fromkeys(s for (_, s) in cells))
        seen += [s for s in steps if s not in seen]
        if step is not None:
            steps = [step] if step in steps else []
        rows += lg.rows_of(
            name, "cost", "estimated_cycles", [p for p, _, _ in points], cells, keys, steps
        )
        notes += _method_notes(points)
    _step_known(step, seen)
    ref_point = next((pts[0][0] for _, pts in comps.values() if pts), None)
    return Ledger(lab, ref_point, tuple(rows), tuple(notes))


def _series(
    root: Path, runs: Sequence[RunInfo], ref_label: dict[str, str], notes: list[str]
) -> Series:
    """Per comparison, its points from the reference's run on: the reference first,
    then the reference run's columns after it, then every later run's non-base columns."""
    comps: Series = {}
    for info in runs:
        first_run = info.run_id == runs[0].run_id
        folder = root / info.path
        if not (folder / "run.json").is_file():
            folder = root / info.run_id
        try:
            data = read_run(folder)
        except (StoreError, OSError) as e:
            if first_run:
                raise StoreError(f"the reference's run {info.run_id} cannot be read: {e}") from e
            notes.append(f"{info.run_id}: not read ({e})")
            continue
        record, replays = data.record, load_replays(folder)
        for comp in record["comparisons"]:
            base, *others = comp["labels"]
            entry = comps.get(comp["name"])
            if entry is None:
                if not first_run:
                    notes.append(
                        f"{comp['name']}: first seen in run {info.run_id}, after the reference; "
                        "not in this ledger"
                    )
                    comps[comp["name"]] = (comp, [])
                    continue
                if ref_label and comp["name"] not in ref_label:
                    notes.append(
                        f"{comp['name']}: the reference build is not one of its columns; "
                        f"from its base {base} instead"
                    )
                first = ref_label.get(comp["name"], base)
                entry = (comp, [(_point(record, first), record, replays)])
                comps[comp["name"]] = entry
                # of the reference's run, only the columns after the reference
                after = comp["labels"][comp["labels"].index(first) + 1 :]
                others = [lb for lb in after if lb != base]
            elif not entry[1]:
                continue
            entry[1].extend((_point(record, lb), record, replays) for lb in others)
    return comps


def _lab_cells(
    root: Path,
    comp: ComparisonEntry,
    points: list[tuple[Point, RunJson, list[ReplayRecord]]],
    notes: list[str],
) -> tuple[dict[tuple[str, str], tuple[Cell, Cell]], list[str]]:
    """The cells of one comparison's points, judged as columns of one run with the
    newest run's policy, lane rule and measured floors."""
    record, replays, keys, unlike = _joined(comp, points)
    notes += unlike
    policy = VerdictPolicy.of_record(points[-1][1])
    last = root / points[-1][0].run
    settled = (load_lane(last) or {}).get("replays_max", 5)
    measured = history_moves.measured_floors(last, record, replays, root, notify=notes.append)
    floors = (measured["calibration"], measured["history"])
    return lg.cost_cells(record, replays, comp, keys, policy, floors, settled), keys


def _reference(runs: Sequence[RunInfo], reference: str, root: Path) -> tuple[int, dict[str, str]]:
    """(index of the reference's run, comparison -> the reference's column label)."""
    for i, info in enumerate(runs):
        if info.run_id == reference:
            return i, {}
    for i, info in enumerate(runs):
        folder = root / info.path
        try:
            record = read_run(
                folder if (folder / "run.json").is_file() else root / info.run_id
            ).record
        except (StoreError, OSError):
            continue
        found = {
            c["comparison"]: c["label"]
            for c in record["columns"]
            if c["build"] == reference
            or method.build_key((record.get("builds") or {}).get(c["label"])) == reference
        }
        if found:
            return i, found
    ids = ", ".join(r.run_id for r in runs[-5:])
    raise DbregressError(
        f"--reference {reference}: neither a run of this lab nor a build any of its runs "
        f"measured (its last runs: {ids})"
    )


def _joined(
    comp: ComparisonEntry, points: list[tuple[Point, RunJson, list[ReplayRecord]]]
) -> tuple[RunJson, list[ReplayRecord], list[str], list[str]]:
    """One record whose comparison holds every point as a column p0..pN (the reference
    first), and their replays relabelled so: the cost verdicts compare them as columns of
    one run, each replay keeping its own counting method (never pooled across two)."""
    keys = [f"p{i}" for i in range(len(points))]
    last = points[-1][1]
    columns: list[ColumnEntry] = []
    builds: dict[str, dict[str, str]] = {}
    replays: list[ReplayRecord] = []
    specs: dict[str, str] = {}  # step -> the reference's step as counted (method.step_key)
    unlike: list[str] = []
    for key, (p, record, found) in zip(keys, points, strict=True):
        col = next(c for c in record["columns"] if c["label"] == p.column)
        columns.append(cast(ColumnEntry, {**col, "label": key, "comparison": comp["name"]}))
        builds[key] = (record.get("builds") or {}).get(p.column) or {}
        for r in found:
            if r.get("column") != p.column or r.get("comparison", comp["name"]) != comp["name"]:
                continue
            steps = {}
            for step, figures in r.get("steps", {}).items():
                spec = figures.get("spec")
                if key == "p0" and spec:
                    specs.setdefault(step, spec)
                if spec and specs.get(step, spec) != spec:
                    note = (
                        f"{comp['name']}/{step}: {p.run} {p.column} counted another workload or "
                        "configuration than the reference (its step as counted differs): no figure"
                    )
                    if note not in unlike:
                        unlike.append(note)
                    continue
                steps[step] = figures
            replays.append(cast(ReplayRecord, {**r, "column": key, "steps": steps}))
    joined = dict(last)
    joined["columns"] = columns
    joined["builds"] = builds
    joined["comparisons"] = [cast(ComparisonEntry, {**comp, "labels": keys})]
    return cast(RunJson, joined), replays, keys, unlike


def _method_notes(points: list[tuple[Point, RunJson, list[ReplayRecord]]]) -> list[str]:
    first = method.count_key(points[0][1].get("method_identity"))
    other = [
        p.run for p, rec, _ in points[1:] if method.count_key(rec.get("method_identity")) != first
    ]
    if not other:
        return []
    return [
        f"runs counted by another method than the reference's ({', '.join(dict.fromkeys(other))}): "
        "their replays are not pooled with the reference's, so a step may have no figure"
    ]
