"""dbregress history LAB: the lab's runs over time, step by step, from the run history
(<results>/history.sqlite, docs/history.md), with the change points between runs.

Per step (and, in the time lane, per host class: QPS measured on different machines is
not one series), a table: a row per run, oldest first; a column per column of the lab;
a cell the run's median QPS over its repeats (time lane) or mean estimated cycles per
operation over its replays (cost lane), and in brackets that over the first run shown.
Each (step, column) over the runs is one series for the change-point method, every run
one point holding its samples; one call per lane, so that its false-alarm rate holds over
every series of the output. A change point is marked in the row of the first run of the
new level: ▼ slower, ▲ faster, with the ratio of the new level over the old.

Where the method that measured the runs changes (another loadgen binary, valgrind, libc,
dbregress version, cost model or counting-replay profile: dbregress/method/identity.py) a table
shows a boundary row naming what changed, and change points are looked for only
between runs of one method: a series is searched piece by piece, never across one.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from dbregress.analysis import changepoints
from dbregress.analysis.changepoints import Change
from dbregress.lab.file import VerdictPolicy, load_lab
from dbregress.method import identity as method
from dbregress.model.errors import DbregressError
from dbregress.report.history_moves import series_changes
from dbregress.report.verdict_tables import table
from dbregress.shapes.method import MethodIdentity
from dbregress.store.history import (
    History,
    SeriesPoint,
    StepSeries,
    history_path,
    level,
    reindex,
)

LANES = ("time", "cost")
WHAT = {
    "time": "median QPS over the run's repeats (higher is better)",
    "cost": "mean estimated cycles per operation over the run's counting replays (lower is better)",
}


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "history",
        help="a lab's runs over time, step by step, with change points between runs",
        description="Show every indexed run of a lab, oldest first: per step a table of "
        "the runs' median QPS (time lane) or mean estimated cycles per operation (cost "
        "lane) per column, relative to the first run shown, with the change points "
        "between runs marked. The time lane keeps each host class apart; the cost lane "
        "compares across hosts. Prints only.",
    )
    p.add_argument("lab", metavar="LAB", help="lab name, or the lab file")
    p.add_argument("--step", default=None, help="only this step")
    p.add_argument("--lane", choices=LANES, default="time", help="time (default) or cost")
    p.add_argument("--results", type=Path, default=Path("results"))
    p.add_argument(
        "--reindex",
        action="store_true",
        help="index every run folder under --results first (rebuilds the history)",
    )
    p.add_argument("--host", default=None, help="only runs on this host (name or fingerprint)")
    p.add_argument(
        "--last", type=int, default=None, metavar="N", help="only the last N runs of each table"
    )
    p.add_argument(
        "--disturbed",
        action="store_true",
        help="keep the time lane's repeats that the host disturbed (left out by default, "
        "as the verdicts leave them out)",
    )
    p.set_defaults(func=run)


def lab_name(arg: str) -> str:
    """A lab name as given, or the name inside a lab file."""
    path = Path(arg)
    if path.suffix == ".toml" and path.is_file():
        return load_lab(path).name
    return arg


def _number(v: float) -> str:
    return f"{v:,.0f}" if abs(v) >= 100 else f"{v:.3g}"


def _date(started: str | None) -> str:
    return started.replace("T", " ")[:16] if started else "-"


def _host(p: SeriesPoint) -> str:
    return p.hostname or (p.host or "unknown")


def _mark(c: Change) -> str:
    return f" {c.mark} {c.ratio:.2f} {c.word}"


def _trim(series: list[StepSeries], last: int | None) -> list[StepSeries]:
    """Each table's series cut to the table's last N runs."""
    if last is None:
        return series
    keep: dict[tuple[str, str, str | None], set[str]] = {}
    for key, group in _tables(series).items():
        order = _rows(group)
        keep[key] = {run_id for run_id, _ in order[-last:]}
    out = []
    for s in series:
        wanted = keep[(s.comparison, s.step, s.host)]
        points = tuple(p for p in s.points if p.run_id in wanted)
        if points:
            out.append(StepSeries(s.lane, s.comparison, s.step, s.column, s.host, points))
    return out


def _tables(series: list[StepSeries]) -> dict[tuple[str, str, str | None], list[StepSeries]]:
    out: dict[tuple[str, str, str | None], list[StepSeries]] = {}
    for s in series:
        out.setdefault((s.comparison, s.step, s.host), []).append(s)
    return out


def _rows(group: Sequence[StepSeries]) -> list[tuple[str, SeriesPoint]]:
    """(run id, a point of that run) for every run of a table, oldest first."""
    runs: dict[str, SeriesPoint] = {}
    for s in group:
        for p in s.points:
            runs.setdefault(p.run_id, p)
    return sorted(runs.items(), key=lambda kv: (kv[1].started is None, kv[1].started or "", kv[0]))


def _legend(group: Sequence[StepSeries]) -> str:
    """Each column's build and config, and the run where that changed."""
    parts = []
    for s in group:
        seen: list[tuple[str, str, str]] = []
        for p in s.points:
            if not seen or seen[-1][:2] != (p.build, p.config):
                seen.append((p.build, p.config, p.run_id))
        text = f"{s.column} = {seen[0][0]} [{seen[0][1]}]"
        text += "".join(f", {b} [{c}] from {run}" for b, c, run in seen[1:])
        parts.append(text)
    return "Columns: " + "; ".join(parts) + "."


def render_table(
    group: Sequence[StepSeries],
    marks: dict[tuple[str, str, str, str | None], dict[str, Change]],
    methods: dict[str, MethodIdentity | None] | None = None,
) -> list[str]:
    """A row per run; before a run measured by another method than the run above it, a
    boundary row that names what changed (`methods`: run id -> its method identity)."""
    rows = _rows(group)
    first: dict[str, float] = {}
    body = []
    methods = methods or {}
    for i, (run_id, point) in enumerate(rows):
        if i and rows[i - 1][1].method != point.method:
            what = method.differences(methods.get(rows[i - 1][0]), methods.get(run_id))
            body.append(
                ["-", f"**method changed**: {'; '.join(what) or 'method key changed'}", "-"]
                + ["-"] * len(group)
            )
        cells = [_date(point.started), run_id, _host(point)]
        for s in group:
            p = next((x for x in s.points if x.run_id == run_id), None)
            value = level(p.samples, s.lane) if p is not None else None
            if value is None:
                text = "-"
            else:
                base = first.setdefault(s.column, value)
                text = f"{_number(value)} ({value / base:.2f})"
            if p is not None and p.left_out:
                text += f" ({p.left_out} disturbed)"
            change = marks.get(s.key, {}).get(run_id)
            if change is not None:
                text += _mark(change)
            cells.append(text)
        body.append(cells)
    return table(["date (UTC)", "run", "host", *(s.column for s in group)], body)


def render(
    lab: str,
    lane: str,
    series: list[StepSeries],
    policy: VerdictPolicy,
    hosts: dict[str, str],
    methods: dict[str, MethodIdentity | None] | None = None,
) -> str:
    marks = series_changes(series, lane, policy, small=True)
    lines = [
        f"# Run history of {lab}: {lane} lane",
        "",
        f"Rows: the lab's runs, oldest first. Cells: the {WHAT[lane]}, in brackets relative "
        "to the column's first run shown. A mark is a change point: the level shifts at "
        "that run and stays until the next mark (▼ slower, ▲ faster; ▽ △ a small shift of "
        "the cost lane, inside the band yet beyond the small-change floor; the ratio is the "
        "new level over the old), found over the runs by the method of docs/changepoints.md at "
        f"a false-alarm rate of {changepoints.ALPHA:.0%} over every series shown. A "
        "**method changed** row is a boundary: the runs below it were measured another "
        "way (what changed is named), and no change point is looked for across it.",
        "",
    ]
    if lane == "time":
        lines += [
            "QPS is compared only within one host class (same CPU model, cores, memory): "
            "each table is one class.",
            "",
        ]
    for (comparison, step, host), group in _tables(series).items():
        title = f"## {comparison} / {step}"
        if lane == "time":
            title += f", host class {host or 'unknown'}"
            if host is not None and host in hosts:
                title += f" ({hosts[host]})"
        lines += [title, "", _legend(group), ""]
        lines += render_table(group, marks, methods)
    return "\n".join(lines).rstrip() + "\n"


def run(args: argparse.Namespace) -> int:
    root: Path = args.results
    if args.last is not None and args.last < 2:
        raise DbregressError("--last needs at least 2 runs to show a history")
    if args.reindex or not history_path(root).is_file():
        if not args.reindex:
            print(f"note: no run history at {history_path(root)}; building it", file=sys.stderr)
        for warning in reindex(root):
            print(f"warning: {warning}", file=sys.stderr)
    lab = lab_name(args.lab)
    with History(root) as history:
        labs = history.labs()
        if lab not in labs:
            known = ", ".join(labs) if labs else "none"
            raise DbregressError(
                f"no run of lab {lab!r} in the run history {history.path}; labs there: "
                f"{known}. Runs made before the history existed are added with --reindex."
            )
        runs = history.runs(lab, args.host)
        if not runs:
            raise DbregressError(f"no run of lab {lab!r} on host {args.host!r}")
        every = history.series(lab, None, args.lane, args.host, args.disturbed)
    steps = list(dict.fromkeys(s.step for s in every))
    if args.step is not None and args.step not in steps:
        raise DbregressError(
            f"lab {lab!r} has no {args.lane} lane samples of step {args.step!r}; its steps: "
            f"{', '.join(steps) or 'none'}"
        )
    series = [s for s in every if args.step is None or s.step == args.step]
    if not series:
        print(f"No {args.lane} lane samples in the {len(runs)} run(s) of {lab}.")
        return 0
    policy = VerdictPolicy.of_record({"verdict_policy": runs[-1].policy})
    hosts = {r.host: r.hostname for r in runs if r.host is not None and r.hostname}
    methods = {r.run_id: r.method for r in runs}
    print(render(lab, args.lane, _trim(series, args.last), policy, hosts, methods), end="")
    return 0
