"""What an import knows of a step, and the run folder it becomes.

A parser turns one file into Repeats: one repeat of one column each (a table gives one
per column). The writer numbers a label's repeats in file order (the n-th file holding a
step of a label is that step's repeat n, from 1) and writes the same layout a native run
has: run.json and <label>/r<n>/steps/NN-<step>.json.

An import cannot know what dbregress measures around a step: CPU, context switches and
IO per operation, the host's noise, the placement, latency percentiles the file does not
print. Those are stored as missing (null or absent), never as zero, so verdicts leave
them out and reports show them as missing.
"""

from __future__ import annotations

import math
import os
import re
import shutil
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypedDict

from dbregress.analysis.metrics import PER_OP
from dbregress.lab.file import VerdictPolicy
from dbregress.model.errors import DbregressError, StoreError
from dbregress.model.records import JobId, StepResult
from dbregress.model.run_record import RunRecord
from dbregress.shapes.run import RunJson
from dbregress.store.files import write_json

# The latency keys a stored op carries (µs); summary.py reads p50, p99, p999 and max.
LATENCY_KEYS = ("min", "mean", "p50", "p95", "p99", "p999", "max")
# The per-op costs dbregress measures around a step (all but o/s, which a file states).
PER_OP_KEYS = tuple(m.key for m in PER_OP if m.key != "ops_per_s")
UNKNOWN = "unknown"
_UNSAFE = re.compile(r"[^\w.=+,:@-]+")


class UnparseableFile(DbregressError):
    """An imported file is not in the format its kind reads."""


def bad(source: str, line: int | None, what: str) -> UnparseableFile:
    where = f"{source}, line {line}" if line is not None else source
    return UnparseableFile(f"{where}: {what}")


@dataclass(frozen=True)
class Measured:
    """One step as the file reports it; None where it does not say."""

    step: str
    qps: float
    op: str
    unit: str = "ops"  # ops, rows, or relative (a table of ratios to a base)
    count: int | None = None
    elapsed_s: float | None = None
    latency_us: Mapping[str, float | None] = field(default_factory=dict)
    detail: Mapping[str, float | str] = field(default_factory=dict)  # what else the file says


@dataclass(frozen=True)
class Repeat:
    """One repeat of one column: the steps one file (or one table column) holds."""

    label: str
    steps: tuple[Measured, ...]
    source: str  # the file's name, without its folder
    build: str | None = None  # the build as the file describes it
    version: str | None = None  # the version the tool printed, e.g. RocksDB 7.8.3


class ImportedQ(TypedDict):
    op: str
    unit: str
    count: int | None
    value: float


class ImportedOp(TypedDict):
    """One operation of an imported step: what the file counted, null for the rest."""

    ops: int | None
    rows: int | None
    errors: None
    target_rows_per_s: None
    latency_us: dict[str, float | None]
    rows_per_s: float | None
    ops_per_s: float | None


class ImportedFigures(TypedDict):
    """An imported step's figures (StepResult.ok's): Q, the file's operations and
    elapsed time, what dbregress measures around a step left null, and the file's own
    figures under `imported`."""

    reported: bool
    elapsed_s: float | None
    q: ImportedQ
    ops: dict[str, ImportedOp]
    server: None
    client: None
    engine_stats: None
    per_op: dict[str, float | None]
    sla: None
    checks: None
    phases: None
    window: None
    host: None
    placement: None
    db_size_bytes: None
    error_samples: list[str]
    imported: dict[str, float | str]


def lines(text: str) -> Iterator[tuple[int, str]]:
    """(line number, text) as an editor counts lines; a line that a progress meter
    rewrote with carriage returns gives each of its parts."""
    for no, line in enumerate(text.split("\n"), start=1):
        for part in line.split("\r"):
            yield no, part


def number(text: str, source: str, line: int, what: str) -> float:
    """A finite, non-negative number, or an error naming the file and the line."""
    try:
        value = float(text)
    except ValueError:
        raise bad(source, line, f"{what}: {text!r} is not a number") from None
    if not math.isfinite(value) or value < 0:
        raise bad(source, line, f"{what}: {text!r} is not a finite non-negative number")
    return value


def safe_name(name: str, source: str, line: int | None, what: str) -> str:
    """A label or step name usable as a folder or file name: other characters become _."""
    safe = _UNSAFE.sub("_", name.strip()).strip("._")
    if not safe:
        raise bad(source, line, f"{what} {name!r} has no usable character")
    return safe


def step_result(m: Measured, label: str, repeat: int, kind: str, source: str) -> StepResult:
    """The stored StepResult of an imported step: what the file says, null for the rest."""
    latency = {k: None for k in LATENCY_KEYS} | dict(m.latency_us)
    ops: dict[str, ImportedOp] = {}
    if any(v is not None for v in latency.values()):
        ops[m.op] = {
            "ops": m.count if m.unit == "ops" else None,
            "rows": m.count if m.unit == "rows" else None,
            "errors": None,
            "target_rows_per_s": None,
            "latency_us": latency,
            "rows_per_s": m.qps if m.unit == "rows" else None,
            "ops_per_s": m.qps if m.unit == "ops" else None,
        }
    figures: ImportedFigures = {
        "reported": True,
        "elapsed_s": m.elapsed_s,
        "q": {"op": m.op, "unit": m.unit, "count": m.count, "value": m.qps},
        "ops": ops,
        "server": None,
        "client": None,
        "engine_stats": None,
        "per_op": {k: None for k in PER_OP_KEYS} | {"ops_per_s": m.qps},
        "sla": None,
        "checks": None,
        "phases": None,
        "window": None,
        "host": None,
        "placement": None,
        "db_size_bytes": None,
        "error_samples": [],
        "imported": {"kind": kind, "file": source, **m.detail},
    }
    return StepResult.ok(JobId(label, repeat), m.step, figures)


def number_repeats(repeats: Sequence[Repeat]) -> dict[str, dict[int, list[tuple[Measured, str]]]]:
    """label -> repeat number -> (step, file) in file order: a label's n-th file holding
    a step is that step's repeat n."""
    seen: dict[tuple[str, str], int] = {}
    jobs: dict[str, dict[int, list[tuple[Measured, str]]]] = {}
    for rep in repeats:
        for m in rep.steps:
            n = seen[(rep.label, m.step)] = seen.get((rep.label, m.step), 0) + 1
            jobs.setdefault(rep.label, {}).setdefault(n, []).append((m, rep.source))
    return jobs


def run_record(
    name: str, kind: str, benchmark: str, files: Sequence[str], repeats: Sequence[Repeat]
) -> RunJson:
    """run.json of an imported run: one comparison, the first label its base."""
    labels = list(dict.fromkeys(r.label for r in repeats))
    builds = {r.label: r.build for r in reversed(repeats) if r.build}
    versions = {r.label: r.version for r in reversed(repeats) if r.version}
    jobs = number_repeats(repeats)
    policy = VerdictPolicy()  # today's defaults: an import states none
    return RunRecord(
        run_id=name,
        lab=name,
        imported={
            "kind": kind,
            "files": list(files),
            "imported_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        },
        comparisons=[{"name": kind, "benchmark": benchmark, "labels": labels}],
        status="ok",
        placement={"mode": UNKNOWN, "server_cpus": None, "client_cpus": None},
        columns=[
            {
                "label": label,
                "comparison": kind,
                "build": builds.get(label, UNKNOWN),
                "config": UNKNOWN,
                "settings": {},
                "base": i == 0,
            }
            for i, label in enumerate(labels)
        ],
        builds={lb: {"version_string": v, "source": "import"} for lb, v in versions.items()},
        jobs={
            str(JobId(label, n)): {
                "comparison": kind,
                "build": builds.get(label, UNKNOWN),
                "config": UNKNOWN,
                "settings": {},
                "status": "ok",
                "files": list(dict.fromkeys(source for _, source in steps)),
            }
            for label, numbered in jobs.items()
            for n, steps in numbered.items()
        },
        verdict_policy={"alpha": policy.alpha, "band": policy.band, "cost_band": policy.cost_band},
        cost_lane={"planned": False, "why_not": "an imported run has no counting replays"},
        page_cache=None,
    ).to_json()


def write_run(
    root: Path,
    name: str,
    kind: str,
    benchmark: str,
    files: Sequence[str],
    repeats: Sequence[Repeat],
) -> Path:
    """Writes the run folder root/name whole: into a hidden folder first, renamed into
    place at the end, so an interrupted import leaves no half run."""
    if not repeats or not any(r.steps for r in repeats):
        raise DbregressError(f"nothing to import: no step found in {', '.join(files)}")
    final = root / name
    if final.exists():
        raise StoreError(f"{final} exists already; pick another name with --as")
    try:
        root.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(dir=root, prefix=f".{name}.", suffix=".importing"))
    except OSError as e:
        raise StoreError(f"cannot create a run folder under {root}: {e.strerror or e}") from e
    try:
        for label, numbered in number_repeats(repeats).items():
            for n, steps in numbered.items():
                for index, (m, source) in enumerate(steps, start=1):
                    path = tmp / label / f"r{n}" / "steps" / f"{index:02d}-{m.step}.json"
                    write_json(path, step_result(m, label, n, kind, source).to_json())
        write_json(tmp / "run.json", run_record(name, kind, benchmark, files, repeats))
        tmp.chmod(0o755)
        os.rename(tmp, final)
    except OSError as e:
        shutil.rmtree(tmp, ignore_errors=True)
        raise StoreError(f"cannot write {final}: {e.strerror or e}") from e
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return final
