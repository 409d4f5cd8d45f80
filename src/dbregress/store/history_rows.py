"""What the run history stores of a run: the rows of its step results and counting
replays (store/history_db.py holds the tables, store/history.py writes and reads them).

A time sample is keyed by the host and the method that measured it: on a fleet, the
worker that ran the job (run.json `jobs` names it, `hosts` describes it, and the job's
entry carries the worker's method identity), else the run's own host and method. A cost
sample keeps what its count depends on: the replay's counting method (method.count_key:
on a fleet, its worker's), its scope, the column's build identity (method.build_key)
and the step as counted (method.step_key, as the replay recorded it).
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

from dbregress.analysis.compare import disturbance, measured
from dbregress.analysis.cost_methods import COST_METRICS, value_of
from dbregress.method import identity as method
from dbregress.model.records import JobId
from dbregress.shapes.run import HostFacts
from dbregress.shapes.step_result import StepResultJson
from dbregress.store.history_db import COST_COLUMNS, TIME_METRICS
from dbregress.store.series import step_index

_COST_METRIC = {m.key: m for m in COST_METRICS}

# The host facts that name a class of machine: the same processor model, core count,
# memory and architecture make the time lane's figures comparable. Left out: the host's
# name (two identical machines share a class), the kernel, governor, Python and ASLR (a
# change of those is a change the history should show, not a new machine) and anything
# that differs from run to run (the CPUs a run was pinned to).
FINGERPRINT_FACTS = ("machine", "cpu_model", "cpu_count", "mem_gib")


def fingerprint_of(facts: Mapping[str, Any]) -> str | None:
    """A short hash of FINGERPRINT_FACTS (memory in GiB); None when none is known."""
    if all(facts.get(k) is None for k in FINGERPRINT_FACTS):
        return None
    chosen = {k: facts.get(k) for k in FINGERPRINT_FACTS}
    text = json.dumps(chosen, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:10]


def host_fingerprint(host: HostFacts | None) -> str | None:
    """A short hash of the host facts that name the machine's class (FINGERPRINT_FACTS);
    None when the run records none of them (an import). Memory is rounded to GiB: the
    kernel's reserve moves MemTotal by a few MiB between boots and kernels."""
    host = host or {}
    mem = host.get("mem_total_bytes")
    return fingerprint_of(
        {
            "machine": host.get("machine"),
            "cpu_model": host.get("cpu_model"),
            "cpu_count": host.get("cpu_count", host.get("cores")),
            "mem_gib": round(mem / 2**30) if isinstance(mem, int | float) else None,
        }
    )


def utc(stamp: Any) -> str | None:
    """A run.json time (local with offset, as the writer stamps it) in UTC, so that
    runs from hosts in other time zones sort right."""
    if not isinstance(stamp, str) or not stamp:
        return None
    for fmt in ("%Y-%m-%dT%H:%M:%S%z", "%Y-%m-%dT%H:%M:%SZ"):
        try:
            moment = datetime.strptime(stamp, fmt)
        except ValueError:
            continue
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=UTC)
        return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return stamp


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def _positive(value: Any) -> float | None:
    v = _number(value)
    return v if v is not None and v > 0 else None


def run_id_of(run_dir: Path, record: Mapping[str, Any]) -> str:
    return str(record.get("run_id") or run_dir.name)


def step_numbers(run_dir: Path, column: str, repeat: int) -> dict[str, int]:
    """step -> its number (the NN of steps/NN-<step>.json) in one job's folder."""
    out = {}
    for step, files in step_index(run_dir / column / f"r{repeat}").items():
        head = files.json.name.partition("-")[0]
        if head.isdigit():
            out[step] = int(head)
    return out


@dataclass(frozen=True)
class _Column:
    comparison: str
    build: str
    config: str


def _column_of(record: Mapping[str, Any], label: str) -> _Column:
    for c in record.get("columns", []):
        if c["label"] == label:
            return _Column(
                str(c.get("comparison", "")),
                str(c.get("build", "unknown")),
                str(c.get("config", "")),
            )
    for comp in record.get("comparisons", []):  # a column missing from `columns`
        if label in comp.get("labels", []):
            return _Column(str(comp["name"]), "unknown", "")
    return _Column("", "unknown", "")


def measured_by(record: Mapping[str, Any], label: str, repeat: int) -> tuple[Any, ...]:
    """(host fingerprint, host name, method key) of the host that measured a job: a
    fleet's worker as run.json's job entry names it (its facts from run.json `hosts`,
    its method from the entry), else the run's host and method. A worker that `hosts`
    does not describe has no fingerprint: its rows join no host class."""
    entry = (record.get("jobs") or {}).get(str(JobId(label, repeat))) or {}
    worker = entry.get("host")
    how = method.key(entry.get("method_identity") or record.get("method_identity"))
    if not worker:
        host = record.get("host") or {}
        return host_fingerprint(cast(HostFacts, host)), host.get("hostname"), how
    facts = (record.get("hosts") or {}).get(worker)
    if not facts:
        return None, worker, how
    return fingerprint_of(facts), facts.get("hostname") or worker, how


def time_row(
    run_id: str, record: Mapping[str, Any], result: Mapping[str, Any], step_no: int | None
) -> tuple[Any, ...] | None:
    """The time_samples row of a step result; None when it measured nothing (the
    warm-up job, a failed or unreported step, no QPS)."""
    stored = cast(StepResultJson, result)  # a stored step result, whoever hands it over
    if not measured(stored):
        return None
    qps = _positive((result.get("q") or {}).get("value"))
    if qps is None:
        return None
    label = str(result["column"])
    col = _column_of(record, label)
    per_op = result.get("per_op") or {}
    fp, hostname, how = measured_by(record, label, int(result["repeat"]))
    return (
        run_id,
        col.comparison,
        label,
        col.build,
        col.config,
        str(result["step"]),
        step_no,
        int(result["repeat"]),
        qps,
        (result.get("q") or {}).get("unit"),
        *(_number(per_op.get(key)) for _, key in TIME_METRICS),
        disturbance(stored),
        how,
        fp,
        hostname,
    )


def cost_rows(
    run_id: str, record: Mapping[str, Any], replay: Mapping[str, Any]
) -> list[tuple[Any, ...]]:
    """The cost_samples rows of a counting replay: one per step; none for a failed one."""
    if replay.get("status") != "ok":
        return []
    label = str(replay["column"])
    col = _column_of(record, label)
    identity = replay.get("method_identity") or record.get("method_identity")
    build = method.build_key((record.get("builds") or {}).get(label))
    rows = []
    for step, figures in (replay.get("steps") or {}).items():
        per_op = figures.get("per_op") or {}
        values = []
        for _, key in COST_COLUMNS:
            v = value_of(per_op, _COST_METRIC[key])
            values.append(v if v is not None and math.isfinite(v) else None)
        if all(v is None for v in values):
            continue
        index = figures.get("index")
        rows.append(
            (
                run_id,
                str(replay.get("comparison") or col.comparison),
                label,
                col.build,
                col.config,
                str(step),
                index if isinstance(index, int) else None,
                int(replay["replay"]),
                *values,
                method.key(identity),
                method.count_key(identity),
                figures.get("scope") or None,
                build,
                figures.get("spec") or None,
                (replay.get("reused") or {}).get("run"),
            )
        )
    return rows


TIME_INSERT = (
    "INSERT OR REPLACE INTO time_samples(run_id, comparison, column, build, config, step, "
    f"step_no, repeat, qps, q_unit, {', '.join(c for c, _ in TIME_METRICS)}, disturbed, "
    f"method_key, host_fingerprint, hostname) "
    f"VALUES ({', '.join('?' * (14 + len(TIME_METRICS)))})"
)
COST_INSERT = (
    "INSERT OR REPLACE INTO cost_samples(run_id, comparison, column, build, config, step, "
    f"step_no, replay, {', '.join(c for c, _ in COST_COLUMNS)}, method_key, count_key, "
    f"scope, build_key, spec_key, counted_in) "
    f"VALUES ({', '.join('?' * (14 + len(COST_COLUMNS)))})"
)
