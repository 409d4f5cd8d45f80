"""dbregress compare RUN_A RUN_B: any two runs (imported or native), step by step.

RUN_A's side is the base. Each comparison of RUN_A is matched to RUN_B's comparison of
the same name; when no name matches and one run has a single comparison (an import has
one), it is matched to every comparison of the other, by step name. A matched pair
becomes one comparison of an in-memory run: the base column of RUN_A's comparison
(labelled A:<label>) against every column of RUN_B's (B:<label>), over the steps both
ran. The verdict code and the report's tables then read it like any run.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, cast

from dbregress.analysis.compare import RunVerdicts, compare_run
from dbregress.analysis.summary import matrices
from dbregress.cli.report import FORMATS, add_fail_on, gate
from dbregress.errors import DbregressError
from dbregress.records import JobId, StepResult
from dbregress.report import io_tables, json_report, markdown
from dbregress.report import verdict_tables as vt
from dbregress.shapes.device import DeviceBaseline
from dbregress.shapes.run import ColumnEntry, ComparisonEntry, RunJson
from dbregress.shapes.step_result import StepResultJson
from dbregress.store.run import RunData, read_run, resolve_run

Steps = dict[str, list[StepResultJson]]  # job name -> step results


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "compare",
        help="compare two runs step by step (RUN_A is the base)",
        description="Compare two runs, imported or native: RUN_A's base column against "
        "RUN_B's columns, matched by comparison name and step, with verdicts. Prints only.",
    )
    p.add_argument("run_a", metavar="RUN_A", help="the base: run folder, run id or 'latest'")
    p.add_argument("run_b", metavar="RUN_B", help="run folder, run id under --results")
    p.add_argument("--results", type=Path, default=Path("results"))
    p.add_argument("--format", choices=FORMATS, default="md", help="md (default) or json")
    add_fail_on(p)
    p.set_defaults(func=run)


def _pairs(a: RunData, b: RunData) -> list[tuple[ComparisonEntry, ComparisonEntry]]:
    ca: list[ComparisonEntry] = a.record["comparisons"]
    cb: list[ComparisonEntry] = b.record["comparisons"]
    pairs = [(x, y) for x in ca for y in cb if x["name"] == y["name"]]
    if not pairs and (len(ca) == 1 or len(cb) == 1):
        pairs = [(x, y) for x in ca for y in cb]
    return pairs


def _steps_ran(data: RunData, label: str) -> list[str]:
    """The steps a column ran, in order."""
    found = (r["step"] for rs in data.steps.values() for r in rs if r.get("column") == label)
    return list(dict.fromkeys(found))


def _copy(data: RunData, side: str, label: str, steps: set[str], out: Steps) -> None:
    for job, results in data.steps.items():
        name = f"{side}:{job}"
        jid = JobId.of(job)
        if jid is None or jid.label != label or name in out:
            continue
        relabelled = [
            StepResult.from_json(r, name).relabelled(f"{side}:{label}").to_json()
            for r in results
            if r.get("step") in steps
        ]
        out[name] = relabelled


def merge(a: RunData, b: RunData) -> tuple[RunJson, Steps]:
    """An in-memory run: per matched comparison, A's base against B's columns over the
    steps in common. It has run.json's fields, except that its status may name both
    runs' ("ok / failed"), and it gives each column its own run's device baseline
    (`device_baseline_by_column`, which analysis/io_efficiency.py reads)."""
    comparisons: list[ComparisonEntry] = []
    columns: list[ColumnEntry] = []
    steps: Steps = {}
    # each column measured against its own run's device baseline (an IO-bound comparison)
    devices: dict[str, DeviceBaseline | None] = {}
    for ca, cb in _pairs(a, b):
        base = ca["labels"][0]
        mine = _steps_ran(a, base)
        common = {s for lb in cb["labels"] for s in _steps_ran(b, lb) if s in mine}
        if not common:
            continue
        name = ca["name"] if ca["name"] == cb["name"] else f"{ca['name']} vs {cb['name']}"
        labels = [f"A:{base}", *(f"B:{lb}" for lb in cb["labels"])]
        comparisons.append({"name": name, "benchmark": ca["benchmark"], "labels": labels})
        columns += [_column(a, base, name, "A", True)]
        columns += [_column(b, lb, name, "B", False) for lb in cb["labels"]]
        _copy(a, "A", base, common, steps)
        for lb in cb["labels"]:
            _copy(b, "B", lb, common, steps)
        found_a = (a.record.get("device_baseline") or {}).get(ca["name"])
        found_b = (b.record.get("device_baseline") or {}).get(cb["name"])
        if found_a is not None or found_b is not None:
            devices[f"A:{base}"] = found_a
            devices |= {f"B:{lb}": found_b for lb in cb["labels"]}
    if not comparisons:
        raise DbregressError(f"no step in common: {_steps_of(a)}; {_steps_of(b)}")
    builds = {f"A:{lb}": v for lb, v in a.record.get("builds", {}).items()}
    builds |= {f"B:{lb}": v for lb, v in b.record.get("builds", {}).items()}
    record = {
        **cast(dict[str, object], a.record),
        "run_id": f"{a.record['run_id']} vs {b.record['run_id']}",
        "lab": "compare",
        "status": " / ".join(dict.fromkeys((a.record["status"], b.record["status"]))),
        "comparisons": comparisons,
        "columns": columns,
        "builds": builds,
        "inject_slowdown": {
            f"{side}:{lb}": f
            for side, data in (("A", a), ("B", b))
            for lb, f in (data.record.get("inject_slowdown") or {}).items()
        },
        "failures": [],
        # A's policy judges the pair (the base run's); compare has no counting replays.
        "verdict_policy": a.record.get("verdict_policy") or {},
        "cost_lane": {"planned": False, "why_not": "compare judges the time lane only"},
        "device_baseline_by_column": devices,
    }
    return cast(RunJson, record), steps


def _column(data: RunData, label: str, comparison: str, side: str, base: bool) -> ColumnEntry:
    records: list[ColumnEntry] = data.record["columns"]
    found = next((c for c in records if c["label"] == label), None)
    return {
        "label": f"{side}:{label}",
        "comparison": comparison,
        "build": found.get("build", "unknown") if found is not None else "unknown",
        "config": found.get("config", "unknown") if found is not None else "unknown",
        "settings": found.get("settings", {}) if found is not None else {},
        "base": base,
    }


def _steps_of(data: RunData) -> str:
    parts = []
    for comp in data.record["comparisons"]:
        steps = _steps_ran(data, comp["labels"][0])
        parts.append(f"{comp['name']} ({', '.join(steps) or 'no step'})")
    return f"{data.record['run_id']} has {'; '.join(parts)}"


def render(
    record: RunJson,
    steps: Steps,
    a: str,
    b: str,
) -> tuple[str, RunVerdicts]:
    verdicts = compare_run(record, steps)
    lines = [
        f"# dbregress compare: {a} vs {b}",
        "",
        f"A = {a} (the base), B = {b}. Each table: A's base column against B's columns "
        "over the steps both ran.",
        "",
    ]
    for m in matrices(record, steps):
        lines += [f"## {m.comparison}", ""]
        lines += markdown.throughput(m) + vt.relative_qps(m, verdicts) + vt.verdicts(m, verdicts)
        lines += io_tables.markdown(verdicts.io_for(m.comparison))
    return "\n".join(lines).rstrip() + "\n", verdicts


def run(args: argparse.Namespace) -> int:
    a = read_run(resolve_run(args.run_a, args.results))
    b = read_run(resolve_run(args.run_b, args.results))
    for d in a.damaged + b.damaged:
        print(f"warning: left out a damaged file: {d}", file=sys.stderr)
    record, steps = merge(a, b)
    try:
        text, verdicts = render(record, steps, a.record["run_id"], b.record["run_id"])
    except (KeyError, TypeError, ValueError) as e:
        raise DbregressError(f"cannot compare ({type(e).__name__}: {e})") from e
    if args.format == "json":
        text = json.dumps(json_report.render(record, verdicts), indent=1)
    print(text)
    return gate(verdicts, args.fail_on, record, allow_undecided=args.allow_undecided)
