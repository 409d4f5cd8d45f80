"""dbregress report RUN: print and write a run's report, with its verdicts."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import tomllib
from pathlib import Path
from typing import Any

from dbregress import benchmarks
from dbregress.analysis.compare import RunVerdicts, compare_run
from dbregress.analysis.cost import cost_verdicts
from dbregress.analysis.gate import (
    Gap,
    GateResult,
    Planned,
    Slower,
    bugs,
    drifted,
    held_steps,
    judge,
)
from dbregress.analysis.series import run_changes
from dbregress.analysis.summary import matrices
from dbregress.cli.exits import EXIT_CRASH, EXIT_OK, EXIT_SLOWER, EXIT_UNJUDGED
from dbregress.explain.store import load as load_explain
from dbregress.lab.file import parse_lab
from dbregress.model.errors import DbregressError, LabError, StoreError
from dbregress.report import exports, history_moves, html, json_report, markdown
from dbregress.shapes.replay import CostLaneRecord
from dbregress.shapes.run import RunJson
from dbregress.shapes.step_result import StepResultJson
from dbregress.store.calibration import load_calibration
from dbregress.store.files import write_atomic, write_json
from dbregress.store.replays import load_lane, load_replays
from dbregress.store.run import RunData, read_run, resolve_run

FORMATS = ("md", "html", "json", "tsv", "csv")
# slower: a step confirmed slower in either lane; slower:time and slower:cost pick one.
FAIL_ON = ("slower", "slower:time", "slower:cost", "drift:P%")
LANES = {"slower": ("time", "cost"), "slower:time": ("time",), "slower:cost": ("cost",)}


def fail_on_value(text: str) -> str:
    """--fail-on's value: one of FAIL_ON, or drift:P% (normalised: `drift:0.5%`)."""
    if text in LANES:
        return text
    if text.startswith("drift:"):
        try:
            limit = drift_limit(text)
        except ValueError as e:
            raise argparse.ArgumentTypeError(str(e)) from None
        return f"drift:{100 * limit:g}%"
    raise argparse.ArgumentTypeError(
        f"invalid choice: {text!r} (choose from slower, slower:time, slower:cost, drift:P%)"
    )


def drift_limit(text: str) -> float:
    """`drift:P%` (or `drift:P`) -> P / 100, between 0 and 1 exclusive."""
    value = text.partition(":")[2].rstrip("%")
    try:
        limit = float(value) / 100
    except ValueError:
        raise ValueError(f"drift:P%: {value!r} is not a percentage (e.g. drift:0.5%)") from None
    if not 0 < limit < 1:
        raise ValueError(f"drift:P%: P must be above 0 and below 100, got {value}")
    return limit


def lanes_of(fail_on: str) -> tuple[str, ...]:
    """The lanes a --fail-on value judges: drift:P% judges the cost lane."""
    return ("cost",) if fail_on.startswith("drift:") else LANES[fail_on]


def add_fail_on(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--fail-on",
        type=fail_on_value,
        metavar="{" + ",".join(FAIL_ON) + "}",
        help="for CI: exit 1 when a judged step is confirmed `slower` (slower: in either "
        "lane; slower:time: the time lane, QPS; slower:cost: the cost lane, estimated "
        "cycles per operation; drift:P%%: the cost lane, and also a step whose cost change "
        "against its base is beyond P%% with its whole interval, even inside the band, "
        "docs/ledger.md); exit 2 when any step a named lane judges is not decided "
        "(undecided, withheld for its engine state, missing, skipped) or the lane or the "
        "run did not finish: the gate passes only what it judged",
    )
    p.add_argument(
        "--allow-undecided",
        action="store_true",
        help="with --fail-on: let steps that are not decided pass (listed in the summary); "
        "a lane that decided no step at all still exits 2",
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


def run_verdicts(path: Path, data: RunData, lane: CostLaneRecord | None) -> RunVerdicts:
    """Both lanes' verdicts of a run as read, with its change points."""
    verdicts = compare_run(data.record, data.steps)
    replays = load_replays(path)
    cost = cost_verdicts(
        data.record,
        replays,
        planned=(lane or {}).get("replays_per_column", 0),
        settled=(lane or {}).get("replays_max", 5),
        # floors of each step's noise, measured: its spread in the lab's A/A calibration
        # and over the history's earlier counts of its build by this counting method
        **history_moves.measured_floors(path, data.record, replays),
    )
    changes = run_changes(data.record, data.steps, replays)
    return dataclasses.replace(verdicts, cost=cost, changes=changes)


def write_report(
    path: Path,
    summary: bool = False,
    fmt: str = "md",
    columns: str | None = None,
    best_effort: bool = False,
) -> tuple[str, RunVerdicts]:
    """Writes report.md, verdicts.json and report.html into the run folder (unless columns
    are picked); returns the text to print and the verdicts. With columns picked, --format
    html returns the page itself, to be printed. `best_effort` (a gate follows): a folder
    that cannot be written (read-only, full) is a warning, not an error, so the gate still
    answers on what was read."""
    data = read_run(path)
    if columns:
        data = only_columns(data, columns)
    stored_lane = load_lane(path)  # None: the cost lane did not finish (or never ran)
    verdicts = run_verdicts(path, data, stored_lane)
    replays = load_replays(path)  # which of them were taken from the count store
    m = matrices(data.record, data.steps)
    host = data.record.get("host", {}).get("hostname", "")
    cal = load_calibration(path.parent, host) if host else None
    explain = load_explain(path)
    results, damaged = _results(data), data.damaged
    full = markdown.render(
        data.record, m, verdicts, results, cal, damaged, explain, lane=stored_lane, replays=replays
    )
    moved = (
        [] if columns else history_moves.markdown(history_moves.against_history(path, data.record))
    )
    if moved:
        full = full.rstrip("\n") + "\n\n" + "\n".join(moved)
    for d in data.damaged:
        print(f"warning: left out a damaged file: {d}", file=sys.stderr)
    as_json = json_report.render(data.record, verdicts, stored_lane, replays)
    shown_page = not columns or fmt == "html"
    page = html.render(data, m, verdicts, cal, stored_lane, replays) if shown_page else ""
    if not columns:
        _write(path, full, as_json, page, best_effort)
    if fmt == "json":
        return json.dumps(as_json, indent=1), verdicts
    if fmt == "html":
        return (page if columns else str(path / "report.html")), verdicts
    if fmt == "tsv":
        return exports.tsv(data.record, m, verdicts, stored_lane), verdicts
    if fmt == "csv":
        return exports.csv_text(data.record, m, verdicts, stored_lane, replays).rstrip(
            "\n"
        ), verdicts
    shown = (
        markdown.summary_tables(data.record, m, verdicts, stored_lane, replays) if summary else full
    )
    if summary and moved:
        shown = shown.rstrip("\n") + "\n\n" + "\n".join(moved)
    where = (
        f"Report: {path / 'report.md'} (HTML: {path / 'report.html'})"
        if not columns
        else "(columns picked: not written)"
    )
    return f"{shown}\n{where}", verdicts


def _write(path: Path, text: str, as_json: object, page: str, best_effort: bool) -> None:
    """report.md, verdicts.json and report.html into the run folder; with `best_effort`,
    a folder that cannot be written is a warning (the report is printed)."""
    try:
        write_atomic(path / "report.md", text)
        write_json(path / "verdicts.json", as_json)
        write_atomic(path / "report.html", page)
    except StoreError as e:
        if not best_effort:
            raise
        print(f"warning: {e}: the report is printed, not written", file=sys.stderr)


SHOWN = 40  # at most this many steps listed one per line; verdicts.json has every one


def planned_steps(
    path: Path | None, record: RunJson, verdicts: RunVerdicts, results: list[StepResultJson]
) -> Planned:
    """The steps each lane judges: the lab's reported steps (its lab.toml in the run
    folder), the cost lane's those of count_steps; a run without its lab file (an import,
    a comparison of two runs) is judged on the steps it holds."""
    lab_file = path / "lab.toml" if path is not None else None
    if lab_file is None or not lab_file.is_file():
        return held_steps(record, verdicts, results)
    text = lab_file.read_text()
    try:
        lab = parse_lab(tomllib.loads(text), lab_file, text)
    except (LabError, tomllib.TOMLDecodeError) as e:
        raise DbregressError(f"{lab_file}: cannot tell which steps the gate judges ({e})") from e
    wanted = {comp["name"] for comp in record["comparisons"]}
    time: dict[str, list[str]] = {}
    cost: dict[str, list[str]] = {}
    for comp in lab.comparisons:
        if comp.name not in wanted:
            continue
        reported = [p.name for p in benchmarks.plans(comp) if p.reported]
        time[comp.name] = reported
        counted = set(lab.count_steps)
        cost[comp.name] = [s for s in reported if not counted or s in counted]
    # a comparison of the run that its lab file no longer names: the steps it holds
    held = held_steps(record, verdicts, results)
    for name in wanted - set(time):
        time[name], cost[name] = held.time.get(name, []), held.cost.get(name, [])
    return Planned(time, cost)


def _step(g: Gap | Slower) -> str:
    assert g.key is not None
    comp, col, step = g.key
    return f"{comp}/{step} ({col}, {g.lane})"


def _ratio(s: Slower) -> str:
    ratio = f" {s.ratio:.3f}" if s.ratio is not None else ""
    return ratio + (f" [{s.ci[0]:.3f}, {s.ci[1]:.3f}]" if s.ci is not None else "")


def _lines(gaps: list[Gap], verb: str, lanes: bool) -> list[str]:
    """One line per step (at most SHOWN), after one per lane-level gap when `lanes`
    (the headline names those when the gate does not pass)."""
    steps = [g for g in gaps if g.key is not None]
    out = [f"  {g.lane} lane: {g.why}" for g in gaps if g.key is None and lanes]
    out += [f"  {_step(g)}: {g.why}" for g in steps[:SHOWN]]
    if len(steps) > SHOWN:
        out.append(f"  and {len(steps) - SHOWN} more {verb} (verdicts.json has every step)")
    return out


def gate(
    verdicts: RunVerdicts,
    fail_on: str | None,
    record: RunJson,
    *,
    path: Path | None = None,
    data: RunData | None = None,
    allow_undecided: bool = False,
) -> int:
    """The exit status --fail-on asks for (cli/exits.py), with a summary on stderr:
    exit 1 when a judged step is confirmed slower (each named with lane, ratio and
    interval); else exit 3 when the run recorded a bug in dbregress (a job, a step or a
    replay, each named with where its traceback is); else exit 2 when a judged step of a
    named lane is not decided, or a lane or the run did not finish (each step named with
    why); else 0, naming what it judged. `path`/`data`: the run folder and the run as
    read, for the lab's steps, the cost lane's record and the failed steps; without them
    the verdicts' own steps."""
    if fail_on is None:
        return EXIT_OK
    lanes = lanes_of(fail_on)
    lane = load_lane(path) if path is not None else None
    replays = load_replays(path) if path is not None else []
    results = _results(data) if data is not None else []
    planned = planned_steps(path, record, verdicts, results)
    if allow_undecided and fail_on.startswith("drift:"):
        print(
            f"note: --allow-undecided does not apply to {fail_on}: a cost step it cannot "
            "judge keeps the drift gate from passing",
            file=sys.stderr,
        )
        allow_undecided = False
    result = judge(
        verdicts, record, lanes, planned, results, lane, replays, allow_undecided=allow_undecided
    )
    if fail_on.startswith("drift:"):
        limit = drift_limit(fail_on)
        beyond, unjudged = drifted(verdicts, record, planned, limit, result.slower)
        result.slower.extend(beyond)
        result.gaps.extend(unjudged)
    code, lines = summary_lines(result, fail_on, bugs(record, results, replays))
    print("\n".join(lines), file=sys.stderr)
    return code


def summary_lines(
    result: GateResult, fail_on: str, bug_lines: list[str] | None = None
) -> tuple[int, list[str]]:
    """The gate's exit status and its summary: a headline, then a line per step (and per
    lane-level gap the headline does not name). `bug_lines`: the bugs in dbregress the
    run recorded (gate.bugs), exit 3 unless a step is confirmed slower."""
    judged = ", ".join(f"{ln} lane {d} of {n} decided" for ln, (d, n) in result.judged.items())
    lines: list[str] = []
    found = bug_lines or []
    if result.slower:
        shown = ", ".join(f"{_step(s)}{_ratio(s)}" for s in result.slower[:8])
        more = f" and {len(result.slower) - 8} more" if len(result.slower) > 8 else ""
        what = "beyond the drift limit or slower" if fail_on.startswith("drift:") else "slower"
        lines.append(
            f"fail-on {fail_on}: FAILED, {len(result.slower)} step(s) {what}: {shown}{more}"
        )
        code = EXIT_SLOWER
    elif found:
        lines.append(
            f"fail-on {fail_on}: A BUG IN DBREGRESS, {len(found)} recorded in the run "
            f"(a failed job, step or replay), its figures are not judged ({judged})"
        )
        code = EXIT_CRASH
    elif result.gaps:
        whole = [f"{g.lane} lane: {g.why}" for g in result.gaps if g.key is None]
        steps = [g for g in result.gaps if g.key is not None]
        said = whole + ([f"{len(steps)} judged step(s) not decided"] if steps else [])
        lines.append(f"fail-on {fail_on}: NOT JUDGED, {'; '.join(said)} ({judged})")
        code = EXIT_UNJUDGED
    else:
        lines.append(
            f"fail-on {fail_on}: passed, every judged step is decided and none is confirmed "
            f"slower ({judged})"
            if not result.allowed
            else f"fail-on {fail_on}: passed with --allow-undecided, no step is confirmed "
            f"slower ({judged}); let through, not decided: {len(result.allowed)}"
        )
        code = EXIT_OK
    if code == EXIT_SLOWER and found:
        lines.append(f"  also a bug in dbregress: {len(found)} (listed below)")
    if code == EXIT_SLOWER and result.gaps:
        lines.append(f"  also not decided: {len(result.gaps)} (the gate could not pass either)")
    lines += [f"  a bug in dbregress: {b}" for b in found]
    if code == EXIT_OK:
        lines += _lines(result.allowed, "let through", lanes=True)
    else:
        lines += _lines(result.gaps, "not decided", lanes=code != EXIT_UNJUDGED)
    return code, lines


def run(args: argparse.Namespace) -> int:
    path = resolve_run(args.run, args.results)
    # an exception here is a bug or a run folder in a shape read_run does not check: it
    # exits 3 with its traceback in a log (cli/main.py), never as "not judged". A folder
    # that cannot be written (read-only) leaves a gate's answer as it is.
    gated = args.fail_on is not None
    text, verdicts = write_report(path, fmt=args.format, columns=args.columns, best_effort=gated)
    print(text)
    data = read_run(path)
    if args.columns:
        data = only_columns(data, args.columns)
    return gate(
        verdicts,
        args.fail_on,
        data.record,
        path=path,
        data=data,
        allow_undecided=args.allow_undecided,
    )
