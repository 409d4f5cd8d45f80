"""A point of a bisection as a lab: its columns (the bracket's ends and the build
between), the benchmark's sizes, only the step counted; and the verdict of one of its
columns against any other, read back from the point's run (point_of: the point's three)."""

from __future__ import annotations

import copy
import json
import tomllib
from pathlib import Path
from typing import Any

from dbregress import benchmarks
from dbregress.analysis.compare import compare_run
from dbregress.analysis.cost import cost_verdicts
from dbregress.bisect.builds import flavors_toml
from dbregress.bisect.model import BisectError, BisectPoint, BisectRequest, Size, Verdict
from dbregress.lab.file import Lab, parse_lab
from dbregress.model.errors import LabError
from dbregress.report.history_moves import measured_floors
from dbregress.store.replays import load_lane, load_replays
from dbregress.store.run import read_run

# The benchmark's sizes at a bisection's points: the quickstart's (a point takes a minute
# or two); `sizes` overrides any of them.
DEFAULT_SIZES: dict[str, dict[str, Size]] = {
    "insert": {
        "clients": 1,
        "load_rows": 100000,
        "write_rows": 20000,
        "query_seconds": 1,
        "warmup_s": 0.5,
        "cleanup_wait_s": 1,
    },
    "kv": {"keys": 200000, "seconds": 1, "short_seconds": 1, "warmup_s": 0.5},
    "micro": {"tables": 1, "rows": 100000, "seconds": 1, "warmup_s": 0.5},
}


def lab_text(
    request: BisectRequest, columns: list[tuple[str, str]], replays: int, name: str
) -> str:
    """The lab of one point: its columns (label, build), the user's flavors, the
    benchmark's sizes, only the step (and what it needs) measured and counted."""
    sizes = {**DEFAULT_SIZES[request.benchmark], **request.sizes}
    if request.benchmark == "kv":
        sizes.setdefault(
            "steps", ["fillseq"] + ([request.step] if request.step != "fillseq" else [])
        )
    if request.benchmark == "micro":
        sizes.setdefault("only", [request.step])
    head = {
        "name": name,
        "benchmark": request.benchmark,
        "placement": "separate",
        "warmup_job": request.lane == "time",
        "repeats": 1 if request.lane == "cost" else f"3..{3 + 4 * replays}",
        "count": request.lane == "cost",
        "count_replays": replays,
        "count_replays_max": max(replays, 5),
        "count_steps": [request.step],
    }
    if request.recount:
        head["recount"] = True
    lines = [f"{k} = {_toml(v)}" for k, v in head.items()]
    for label, build in columns:
        lines += [
            "",
            "[[column]]",
            f"label = {_toml(label)}",
            f"build = {_toml(build)}",
            *([f"config = {_toml(request.config)}"] if request.config else []),
        ]
    if request.flavors:
        lines.append(flavors_toml(request.flavors))
    lines += ["", f"[{request.benchmark}]"] + [f"{k} = {_toml(v)}" for k, v in sizes.items()]
    return "\n".join(lines) + "\n"


def point_lab(
    request: BisectRequest,
    labels: dict[str, str],
    labs: Path,
    lo: str,
    mid: str,
    hi: str,
    attempt: int,
) -> Lab:
    """The lab of the point (lo, mid, hi) at its `attempt`-th run (3 more replays each
    time), written to the folder `labs` as LABEL-ATTEMPT.toml (LABEL: mid's). The
    bisection's good end (the request's first build) is a column too when lo is not it:
    mid is judged against it (its counts come from the count store)."""
    replays = request.replays + 3 * (attempt - 1)
    name = f"bisect-{attempt}"
    good = () if request.all_changes else (request.builds[0],)
    columns = [(labels[b], b) for b in dict.fromkeys((lo, mid, hi, *good))]
    text = lab_text(request, columns, replays, name)
    path = labs / f"{labels[mid]}-{attempt}.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return parse_lab(tomllib.loads(text), path, text)


def _toml(value: Any) -> str:
    return json.dumps(value) if not isinstance(value, bool) else str(value).lower()


def verdict_of(run: Path, comparison: str, base: str, label: str, step: str, lane: str) -> Verdict:
    """One column's verdict against any other column of the run (not only the lab's
    base): the run's record with the comparison's columns narrowed to the two."""
    data = read_run(run)
    record = copy.deepcopy(data.record)
    for comp in record["comparisons"]:
        if comp["name"] == comparison:
            comp["labels"] = [base, label]
    key = (comparison, label, step)
    if lane == "cost":
        lane_record = load_lane(run) or {}
        replays = load_replays(run)
        found = cost_verdicts(
            record,
            replays,
            settled=lane_record.get("replays_max", 5),
            # the measured floors: the bisection's earlier counts of these builds (its
            # runs/history.sqlite), and an A/A calibration of its lab if one is there
            **measured_floors(run, record, replays),
        )
        c = found.headline().get(key) if found is not None else None
        if c is None:
            return Verdict("undecided", None, None, "no counting replays of this step")
        return Verdict(c.verdict, c.ratio, c.ci, c.reason)
    t = compare_run(record, data.steps).qps.get(key)
    if t is None:
        return Verdict("undecided", None, None, "no measured repeats of this step")
    return Verdict(t.verdict, t.ratio, t.ci, t.reason)


def point_of(
    request: BisectRequest,
    labels: dict[str, str],
    lab: Lab,
    run: Path,
    lo: str,
    mid: str,
    hi: str,
    attempt: int,
    took: float,
) -> BisectPoint:
    """The point (lo, mid, hi) as its run `run` of `lab` judged it: mid against each end,
    and the ends against each other."""
    comp, step, lane = lab.comparisons[0].name, request.step, request.lane
    label = labels.__getitem__
    good = request.builds[0]
    return BisectPoint(
        lo=lo,
        mid=mid,
        hi=hi,
        run=run.name,
        attempt=attempt,
        mid_vs_lo=verdict_of(run, comp, label(lo), label(mid), step, lane),
        mid_vs_hi=(
            Verdict("same", 1.0, None, "the same build")
            if mid == hi
            else verdict_of(run, comp, label(hi), label(mid), step, lane)
        ),
        hi_vs_lo=verdict_of(run, comp, label(lo), label(hi), step, lane),
        took_s=round(took, 1),
        mid_vs_good=(
            None
            if lo == good or request.all_changes
            else Verdict("same", 1.0, None, "the same build")
            if mid == good
            else verdict_of(run, comp, label(good), label(mid), step, lane)
        ),
    )


def check_step(request: BisectRequest, ends: list[tuple[str, str]], path: Path) -> None:
    """The step is one the benchmark reports at the request's sizes (the lab of the
    ends, `path` only named in its errors): BisectError listing the steps it does."""
    text = lab_text(request, ends, request.replays, "bisect-check")
    try:
        lab = parse_lab(tomllib.loads(text), path, text)
    except LabError as e:  # a --size or --step the benchmark does not take
        said = str(e).split(": ", 1)[-1]
        raise BisectError(f"--step/--size: {said}") from None
    reported = [p.name for p in benchmarks.plans(lab.comparisons[0]) if p.reported]
    if request.step not in reported:
        raise BisectError(
            f"--step {request.step}: not a step the {request.benchmark} benchmark reports "
            f"at these sizes; its steps are {', '.join(reported)}"
        )


def failures_only_of(runs: Path, label: str) -> bool:
    """Whether every failure of the latest run under `runs` was a job of the column
    `label` (its build could not be started, or crashed): that build is then skipped,
    not the bisection stopped."""
    found = sorted(runs.glob("*/run.json"))
    if not found:
        return False
    failures = json.loads(found[-1].read_text()).get("failures") or []
    return bool(failures) and all(str(f.get("where", "")).startswith(label) for f in failures)
