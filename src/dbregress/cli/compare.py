"""dbregress compare RUN_A RUN_B: any two runs (imported or native), step by step.

RUN_A's side is the base. Each comparison of RUN_A is matched to RUN_B's comparison of
the same name; when no name matches and one run has a single comparison (an import has
one), it is matched to every comparison of the other, by step name. A matched pair
becomes one comparison of an in-memory run: the base column of RUN_A's comparison
(labelled A:<label>) against every column of RUN_B's (B:<label>), over the steps both
ran. The verdict code and the report's tables then read it like any run.

Two runs never share a window: an interleaved run's paired ratios are against its own
base, so the merged run is judged unpaired, on the repeats' QPS (each relabelled with its
side, its `paired` base too), and says so. What makes the two runs unlike is said before
the tables, in the JSON and on stderr: their method identities, their hosts and their
placements. Hosts of another class (machine, CPU model, CPU count, memory) make the time
lane compare the machines as much as the builds: a gate (--fail-on) then does not pass
unless --across-hosts says that is what is wanted. A run whose host is not recorded (an
import) is not known to share the other's class: an unknown host is not the same host,
and the gate does not pass on it either without --across-hosts.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from dbregress.analysis.compare import RunVerdicts, compare_run
from dbregress.analysis.summary import matrices
from dbregress.cli.exits import EXIT_UNJUDGED
from dbregress.cli.report import FORMATS, add_fail_on, gate
from dbregress.method import identity as method
from dbregress.model.errors import DbregressError
from dbregress.model.records import JobId, StepResult
from dbregress.report import exports, io_tables, json_report, markdown
from dbregress.report import verdict_tables as vt
from dbregress.shapes.compare import ComparedHost, LikenessJson
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
    p.add_argument(
        "--format",
        choices=[f for f in FORMATS if f != "html"],
        default="md",
        help="md (default), json (the verdicts, with `compare`: what makes the runs unlike), "
        "tsv or csv (as `dbregress report` lays them out)",
    )
    add_fail_on(p)
    p.add_argument(
        "--across-hosts",
        action="store_true",
        help="with --fail-on: judge two runs measured on hosts of another class (machine, "
        "CPU model, CPU count or memory), or where a run's host is not recorded (an "
        "import), whose QPS then compares the hosts as much as the builds; without it "
        "such a gate exits 2",
    )
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
            _relabel(StepResult.from_json(r, name).relabelled(f"{side}:{label}").to_json(), side)
            for r in results
            if r.get("step") in steps
        ]
        out[name] = relabelled


def _relabel(result: StepResultJson, side: str) -> StepResultJson:
    """An interleaved repeat's `paired` names its own run's base job: with the side."""
    pair = result.get("paired")
    if pair is not None:
        base = JobId.parse(pair["base"])
        result["paired"] = {**pair, "base": str(JobId(f"{side}:{base.label}", base.repeat))}
    return result


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
        # No repeat of A shares a window with one of B: an interleaved run's paired ratios
        # are against its own base, so the pair is judged on its repeats, unpaired.
        "schedule": "unpaired across runs",
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


# The facts that name a host's class: another class is another machine (the history's
# time lane keeps them apart too); the other facts are said, not judged.
HOST_CLASS = ("machine", "cpu_model", "cpu_count", "mem_gib")
HOST_OTHER = ("hostname", "kernel", "cpu_governor", "aslr")
PLACEMENT = ("mode", "server_cpus", "client_cpus")


def _host(record: RunJson) -> ComparedHost:
    """The host facts compare sets side by side; None where the run does not say."""
    facts = record.get("host") or {}
    mem = facts.get("mem_total_bytes")
    count = facts.get("cpu_count", facts.get("cores"))
    return {
        "machine": facts.get("machine"),
        "cpu_model": facts.get("cpu_model"),
        "cpu_count": count,
        "mem_gib": round(mem / 2**30) if isinstance(mem, int | float) else None,
        "hostname": facts.get("hostname"),
        "kernel": facts.get("kernel"),
        "cpu_governor": facts.get("cpu_governor"),
        "aslr": facts.get("aslr"),
    }


def _differ(a: Mapping[str, object], b: Mapping[str, object], keys: tuple[str, ...]) -> list[str]:
    return [f"{k} {a.get(k)} -> {b.get(k)}" for k in keys if a.get(k) != b.get(k)]


@dataclass(frozen=True)
class Likeness:
    """What makes the two runs unlike, in words (each list empty when alike)."""

    unpaired: str | None = None  # why the pair is judged unpaired (an interleaved run)
    method: list[str] = field(default_factory=list)  # method identities
    host_class: list[str] = field(default_factory=list)  # another machine
    host: list[str] = field(default_factory=list)  # the same class, another host or kernel
    placement: list[str] = field(default_factory=list)
    unknown: list[str] = field(default_factory=list)  # what a run does not record
    # the sides whose host class is not recorded (an import): an unknown host is not the
    # same host, so a gate of the time lane does not pass on it without --across-hosts
    host_unknown: list[str] = field(default_factory=list)

    def lines(self) -> list[str]:
        out = [self.unpaired] if self.unpaired else []
        if self.method:
            out.append(f"The two runs' methods differ (A -> B): {'; '.join(self.method)}.")
        if self.host_class:
            out.append(
                f"The two runs were measured on hosts of another class (A -> B): "
                f"{'; '.join(self.host_class)}: their QPS compares the hosts as much as the "
                f"builds."
            )
        if self.host:
            out.append(f"The two runs' hosts differ (A -> B): {'; '.join(self.host)}.")
        if self.placement:
            out.append(f"The two runs' placements differ (A -> B): {'; '.join(self.placement)}.")
        return out + self.unknown

    def to_json(self) -> LikenessJson:
        return {
            "unpaired": self.unpaired,
            "method_differs": self.method,
            "host_class_differs": self.host_class,
            "host_differs": self.host,
            "host_unknown": self.host_unknown,
            "placement_differs": self.placement,
            "not_recorded": self.unknown,
            "notes": self.lines(),
        }


def likeness(a: RunData, b: RunData) -> Likeness:
    """How alike the two runs were measured: schedule, method identity, host, placement."""
    schedules = {side: d.record.get("schedule") or "jobs" for side, d in (("A", a), ("B", b))}
    unpaired = None
    if "interleaved" in schedules.values():
        unpaired = (
            f"A ran the {schedules['A']} schedule, B the {schedules['B']}: an interleaved "
            f"repeat's paired ratio is against its own run's base, never across two runs, "
            f"so each step is judged on the repeats' QPS unpaired (as the jobs schedule is)."
        )
    unknown = []
    ma, mb = a.record.get("method_identity"), b.record.get("method_identity")
    methods: list[str] = []
    if ma and mb:
        methods = method.differences(ma, mb)
    for side, found in (("A", ma), ("B", mb)):
        if not found:
            unknown.append(f"{side}'s method identity is not recorded (an import, or older).")
    ha, hb = _host(a.record), _host(b.record)
    host_class: list[str] = []
    host: list[str] = []
    missing = [side for side, h in (("A", ha), ("B", hb)) if not _recorded(h)]
    if not missing:
        host_class = _differ(ha, hb, HOST_CLASS)
        host = _differ(ha, hb, HOST_OTHER)
    else:
        unknown.append(
            f"{' and '.join(missing)}'s host is not recorded (an import): the hosts cannot "
            f"be compared."
        )
    pa, pb = a.record.get("placement"), b.record.get("placement")
    placement = _differ(pa, pb, PLACEMENT) if pa and pb else []
    return Likeness(unpaired, methods, host_class, host, placement, unknown, missing)


def _recorded(host: Mapping[str, object]) -> bool:
    """Whether a run says anything of its host's class."""
    return any(host.get(k) is not None for k in HOST_CLASS)


def render(
    record: RunJson,
    steps: Steps,
    a: str,
    b: str,
    alike: Likeness | None = None,
) -> tuple[str, RunVerdicts]:
    verdicts = compare_run(record, steps)
    lines = [
        f"# dbregress compare: {a} vs {b}",
        "",
        f"A = {a} (the base), B = {b}. Each table: A's base column against B's columns "
        "over the steps both ran.",
        "",
    ]
    notes = alike.lines() if alike is not None else []
    lines += [*(f"- {n}" for n in notes), ""] if notes else []
    for m in matrices(record, steps):
        lines += [f"## {m.comparison}", ""]
        lines += markdown.throughput(m) + vt.relative_qps(m, verdicts) + vt.verdicts(m, verdicts)
        lines += io_tables.markdown(verdicts.io_for(m.comparison))
    return "\n".join(lines).rstrip() + "\n", verdicts


def _hosts_apart(alike: Likeness) -> str | None:
    """Why the two runs' QPS may compare the hosts as much as the builds: hosts of
    another class, or a host not recorded (an unknown host is not the same host)."""
    if alike.host_class:
        return f"the runs were measured on hosts of another class ({'; '.join(alike.host_class)})"
    if alike.host_unknown:
        which = " and ".join(alike.host_unknown)
        return f"{which}'s host is not recorded (an import): not known to be the same host class"
    return None


def run(args: argparse.Namespace) -> int:
    a = read_run(resolve_run(args.run_a, args.results))
    b = read_run(resolve_run(args.run_b, args.results))
    for d in a.damaged + b.damaged:
        print(f"warning: left out a damaged file: {d}", file=sys.stderr)
    record, steps = merge(a, b)
    alike = likeness(a, b)
    # an exception here is a bug (exit 3 with a log, cli/main.py), never "not judged"
    text, verdicts = render(record, steps, a.record["run_id"], b.record["run_id"], alike)
    if args.format == "json":
        found = dict(json_report.render(record, verdicts))
        found["compare"] = {"a": a.record["run_id"], "b": b.record["run_id"], **alike.to_json()}
        text = json.dumps(found, indent=1)
    elif args.format == "tsv":
        text = exports.tsv(record, matrices(record, steps), verdicts)
    elif args.format == "csv":
        text = exports.csv_text(record, matrices(record, steps), verdicts).rstrip("\n")
    print(text)
    for note in alike.lines():
        print(f"note: {note}", file=sys.stderr)
    if args.fail_on and args.fail_on.startswith("drift:"):
        print(
            f"fail-on {args.fail_on}: NOT JUDGED, compare has no cost lane of its own (it "
            "sets two runs' time-lane figures side by side); gate drift on a run with "
            "`dbregress report RUN --fail-on drift:P%`, or across runs with `dbregress ledger "
            "--lab LAB --reference RUN --fail-on drift:P%`",
            file=sys.stderr,
        )
        return EXIT_UNJUDGED
    apart = _hosts_apart(alike)
    if args.fail_on and apart and not args.across_hosts:
        print(
            f"fail-on {args.fail_on}: NOT JUDGED, {apart}; --across-hosts judges them anyway",
            file=sys.stderr,
        )
        return EXIT_UNJUDGED
    # the merged run's results too: a step in common that the base never measured (it
    # failed in every repeat) has no verdict, and is judged missing, not left out
    merged = RunData(a.path, record, steps)
    return gate(verdicts, args.fail_on, record, data=merged, allow_undecided=args.allow_undecided)
