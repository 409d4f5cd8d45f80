"""dbregress report RUN: print and write a run's report, with its verdicts."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path
from typing import Any

from dbregress.analysis.compare import RunVerdicts, compare_run, lane_gaps
from dbregress.analysis.cost import cost_verdicts
from dbregress.analysis.series import run_changes
from dbregress.analysis.summary import matrices
from dbregress.errors import DbregressError
from dbregress.explain.store import load as load_explain
from dbregress.report import exports, history_moves, html, json_report, markdown
from dbregress.shapes.run import RunJson
from dbregress.shapes.step_result import StepResultJson
from dbregress.store.calibration import load_calibration
from dbregress.store.files import write_atomic, write_json
from dbregress.store.replays import load_lane, load_replays
from dbregress.store.run import RunData, read_record, read_run, resolve_run

FORMATS = ("md", "html", "json", "tsv", "csv")
# slower: a step confirmed slower in either lane; slower:time and slower:cost pick one.
FAIL_ON = ("slower", "slower:time", "slower:cost")
LANES = {"slower": ("time", "cost"), "slower:time": ("time",), "slower:cost": ("cost",)}
EXIT_SLOWER = 1  # --fail-on slower found a confirmed regression; errors exit 2
EXIT_UNJUDGED = 2  # --fail-on named a lane that gave no verdict: the gate cannot pass


def add_fail_on(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--fail-on",
        choices=FAIL_ON,
        help="exit 1 when a step is confirmed `slower` (for CI): slower in either lane, "
        "slower:time in the time lane (QPS), slower:cost in the cost lane (estimated "
        "cycles per operation); exit 2 when a lane it names decided no step (the cost "
        "lane off or not finished, every step undecided), and on errors",
    )


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "report",
        help="print and write a run's report",
        description="Print a run's report (Markdown, the verdicts as JSON, or its tables as "
        "TSV or CSV) and write report.md, report.html and verdicts.json into the run folder. "
        "--format html prints the path of report.html (docs/reports.md).",
    )
    p.add_argument("run", help="run folder, run id under --results, or 'latest'")
    p.add_argument("--results", type=Path, default=Path("results"))
    p.add_argument(
        "--format",
        choices=FORMATS,
        default="md",
        help="md (default), html (writes report.html, prints its path), json (the verdicts), "
        "tsv (tables laid out as the seed reports publish them) or csv (one row per "
        "comparison, column and step)",
    )
    p.add_argument(
        "--columns",
        help="comma-separated non-base columns to report (default: all); verdicts are then "
        "judged as in a lab of only these columns and their bases (printed only, not written)",
    )
    add_fail_on(p)
    p.set_defaults(func=run)


def _results(data: RunData) -> list[StepResultJson]:
    return [r for rs in data.steps.values() for r in rs]


def only_columns(data: RunData, columns: str) -> RunData:
    """The run as if the lab had held only these non-base columns (and their bases)."""
    wanted = {c.strip() for c in columns.split(",") if c.strip()}
    known = {lb for comp in data.record["comparisons"] for lb in comp["labels"][1:]}
    if not wanted or wanted - known:
        raise DbregressError(
            f"--columns: unknown column(s) {', '.join(sorted(wanted - known)) or '(none)'}; "
            f"this run's non-base columns: {', '.join(sorted(known))}"
        )
    return data.only_columns(wanted)


def write_report(
    path: Path, summary: bool = False, fmt: str = "md", columns: str | None = None
) -> tuple[str, RunVerdicts]:
    """Writes report.md, verdicts.json and report.html into the run folder (unless columns
    are picked); returns the text to print and the verdicts. With columns picked, --format
    html returns the page itself, to be printed."""
    data = read_run(path)
    if columns:
        data = only_columns(data, columns)
    verdicts = compare_run(data.record, data.steps)
    lane = load_lane(path) or {}
    replays = load_replays(path)
    cost = cost_verdicts(
        data.record,
        replays,
        planned=lane.get("replays_per_column", 0),
        settled=lane.get("replays_max", 5),
        # the step's spread over the lab's earlier runs of this method: a floor of its noise
        history=history_moves.history_noise(path, data.record),
    )
    changes = run_changes(data.record, data.steps, replays)
    verdicts = dataclasses.replace(verdicts, cost=cost, changes=changes)
    m = matrices(data.record, data.steps)
    host = data.record.get("host", {}).get("hostname", "")
    cal = load_calibration(path.parent, host) if host else None
    explain = load_explain(path)
    full = markdown.render(data.record, m, verdicts, _results(data), cal, data.damaged, explain)
    moved = (
        [] if columns else history_moves.markdown(history_moves.against_history(path, data.record))
    )
    if moved:
        full = full.rstrip("\n") + "\n\n" + "\n".join(moved)
    for d in data.damaged:
        print(f"warning: left out a damaged file: {d}", file=sys.stderr)
    as_json = json_report.render(data.record, verdicts)
    page = html.render(data, m, verdicts, cal) if not columns or fmt == "html" else ""
    if not columns:
        write_atomic(path / "report.md", full)
        write_json(path / "verdicts.json", as_json)
        write_atomic(path / "report.html", page)
    if fmt == "json":
        return json.dumps(as_json, indent=1), verdicts
    if fmt == "html":
        return (page if columns else str(path / "report.html")), verdicts
    if fmt == "tsv":
        return exports.tsv(data.record, m, verdicts), verdicts
    if fmt == "csv":
        return exports.csv_text(data.record, m, verdicts).rstrip("\n"), verdicts
    shown = markdown.summary_tables(data.record, m, verdicts) if summary else full
    if summary and moved:
        shown = shown.rstrip("\n") + "\n\n" + "\n".join(moved)
    where = (
        f"Report: {path / 'report.md'} (HTML: {path / 'report.html'})"
        if not columns
        else "(columns picked: not written)"
    )
    return f"{shown}\n{where}", verdicts


def _decided(verdicts: RunVerdicts, lane: str) -> str:
    decided, judged = verdicts.decided(lane)
    return f"{lane} lane {decided} of {judged} decided"


def gate(
    verdicts: RunVerdicts,
    fail_on: str | None,
    record: RunJson,
) -> int:
    """The exit status --fail-on asks for, with a one-line summary on stderr: the lane of
    each slower step (exit 1); else, when a lane it names gave no verdict, why (exit 2:
    a gate never passes on what was not measured); else the lanes it judged (exit 0)."""
    if fail_on is None:
        return 0
    lanes = LANES[fail_on]
    slower = [(lane, key) for lane in lanes for key in verdicts.slower(lane)]
    if slower:
        shown = ", ".join(
            f"{comp}/{step} ({col}, {lane})" for lane, (comp, col, step) in slower[:8]
        )
        more = f" and {len(slower) - 8} more" if len(slower) > 8 else ""
        print(
            f"fail-on {fail_on}: FAILED, {len(slower)} step(s) slower: {shown}{more}",
            file=sys.stderr,
        )
        return EXIT_SLOWER
    gaps = lane_gaps(verdicts, record)
    unjudged = [f"{lane} lane: {gaps[lane]}" for lane in lanes if lane in gaps]
    if unjudged:
        print(f"fail-on {fail_on}: NOT JUDGED, {'; '.join(unjudged)}", file=sys.stderr)
        return EXIT_UNJUDGED
    judged = ", ".join(_decided(verdicts, lane) for lane in lanes)
    print(
        f"fail-on {fail_on}: passed, no step is confirmed slower ({judged})",
        file=sys.stderr,
    )
    return 0


def run(args: argparse.Namespace) -> int:
    path = resolve_run(args.run, args.results)
    try:
        text, verdicts = write_report(path, fmt=args.format, columns=args.columns)
    except (KeyError, TypeError, ValueError) as e:
        raise DbregressError(f"{path}: cannot build the report ({type(e).__name__}: {e})") from e
    print(text)
    return gate(verdicts, args.fail_on, read_record(path))
