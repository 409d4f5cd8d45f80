"""Stored step results -> one cell per (column, step): the median over repeats."""

from __future__ import annotations

import statistics
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Literal, TypedDict

from dbregress.lab.file import INSERT_STEPS, KV_STEPS
from dbregress.shapes.run import ComparisonEntry, RunJson
from dbregress.shapes.step_result import StepResultJson

Percentile = Literal["p50", "p99", "p999", "max"]
EngineFigure = Literal["write_amp", "stall_pct", "lsm_bytes"]
PERCENTILES: tuple[Percentile, ...] = ("p50", "p99", "p999", "max")
ENGINE_FIGURES: tuple[EngineFigure, ...] = ("write_amp", "stall_pct", "lsm_bytes")


class CellSla(TypedDict):
    """A cell's insert-rate SLA over its repeats."""

    target_rows_per_s: float
    achieved_rows_per_s: float | None  # median over the repeats
    ok: bool  # every repeat met it


@dataclass(frozen=True)
class Cell:
    status: str  # ok, failed (every repeat failed), missing (never ran)
    qps: float | None = None
    q_unit: str = ""
    q_op: str = ""
    per_op: dict[str, float | None] = field(default_factory=dict)
    # op -> p50/p99/p999/max; None where no repeat says (an import's file may not)
    latency: dict[str, dict[str, float | None]] = field(default_factory=dict)
    sla: CellSla | None = None
    engine: dict[str, float | None] = field(default_factory=dict)  # write_amp, stall_pct, ...
    repeats: int = 0
    error: str = ""


@dataclass(frozen=True)
class Matrix:
    comparison: str
    benchmark: str
    labels: list[str]  # report columns, base first
    steps: list[str]  # reported steps, in benchmark order
    cells: dict[tuple[str, str], Cell]

    @property
    def base(self) -> str:
        return self.labels[0]

    def cell(self, label: str, step: str) -> Cell:
        return self.cells.get((label, step), Cell("missing"))


def _median(values: Iterable[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else None


def _engine_figure(result: StepResultJson, key: EngineFigure) -> float | None:
    stats = result.get("engine_stats")
    return stats.get(key) if stats else None


def aggregate(results: list[StepResultJson]) -> Cell:
    ok = [r for r in results if r.get("status") == "ok"]
    if not ok:
        error = results[-1].get("error", {}).get("message", "") if results else ""
        return Cell("failed" if results else "missing", error=error)
    first = ok[0]
    per_op = {k: _median(r["per_op"].get(k) for r in ok) for k in first["per_op"]}
    latency: dict[str, dict[str, float | None]] = {
        op: {
            p: _median(r["ops"][op]["latency_us"].get(p) for r in ok if op in r["ops"])
            for p in PERCENTILES
        }
        for op in first["ops"]
    }
    slas = [s for r in ok if (s := r.get("sla"))]
    sla: CellSla | None = None
    if slas:
        sla = {
            "target_rows_per_s": slas[0]["target_rows_per_s"],
            "achieved_rows_per_s": _median(s["achieved_rows_per_s"] for s in slas),
            "ok": all(s["ok"] for s in slas),
        }
    engine: dict[str, float | None] = {
        k: _median(_engine_figure(r, k) for r in ok)
        for k in ENGINE_FIGURES
        if any(r.get("engine_stats") for r in ok)
    }
    return Cell(
        "ok",
        engine=engine,
        qps=_median(r["q"]["value"] for r in ok),
        q_unit=first["q"]["unit"],
        q_op=first["q"]["op"],
        per_op=per_op,
        latency=latency,
        sla=sla,
        repeats=len(ok),
    )


def matrices(
    record: RunJson,
    steps_by_job: dict[str, list[StepResultJson]],
) -> list[Matrix]:
    """One Matrix per comparison of the lab, in the lab's order (run.json and its step
    results by job, typed or as read: store/run.py)."""
    return [matrix(record, steps_by_job, comp) for comp in record["comparisons"]]


def matrix(
    record: RunJson,
    steps_by_job: dict[str, list[StepResultJson]],
    comparison: ComparisonEntry,
) -> Matrix:
    labels = list(comparison["labels"])
    grouped: dict[tuple[str, str], list[StepResultJson]] = {}
    order: list[str] = []
    for results in steps_by_job.values():
        for r in results:
            if r["column"] not in labels or r.get("reported", True) is False:
                continue
            if r["step"] == "start" or r.get("repeat") == 0:  # repeat 0: the warm-up job
                continue
            if r["step"] not in order:
                order.append(r["step"])
            grouped.setdefault((r["column"], r["step"]), []).append(r)
    cells = {key: aggregate(rs) for key, rs in grouped.items()}
    known = list(INSERT_STEPS) + list(KV_STEPS)
    order.sort(key=lambda s: known.index(s) if s in known else len(known))
    return Matrix(comparison["name"], comparison["benchmark"], labels, order, cells)
