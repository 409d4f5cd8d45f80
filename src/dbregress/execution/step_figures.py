"""The figures of a finished step, from the loadgen's summary: the StepResult's checks,
Q, per-operation rates and costs, the SLA of a paced writer, perf's counts per
operation. Pure (no I/O): apart from step.py, which reads the counters at the step's
boundaries, so they can be computed and tested from a summary alone.
"""

from __future__ import annotations

from typing import cast

from dbregress.analysis.metrics import PER_OP
from dbregress.benchmarks.plan import StepPlan
from dbregress.collect import pmu
from dbregress.collect.proc import Usage
from dbregress.model.errors import LoadgenError
from dbregress.shapes import step_result as shapes
from dbregress.shapes.events import OpSummary, Summary

SLA_FRACTION = 0.95  # a q-step below 95% of its insert target failed its SLA


def counter_metrics(counted: shapes.Counters, count: int) -> dict[str, float | None]:
    """Cycles and instructions of the server (an embedded engine: the loadgen) per
    operation of Q, where perf counted them."""
    server = counted.get("server") or {}
    out: dict[str, float | None] = {}
    for event in pmu.EVENTS:
        value = server.get(event)
        out[f"server_{event}"] = value / count if value is not None and count else None
    return out


def q_count(summary: Summary) -> int:
    """Q over the measured window: its operation's rows or operations, as the loadgen
    counts it."""
    q_op = summary["q_op"]
    if q_op not in summary["ops"]:
        return 0
    q = summary["ops"][q_op]
    return q["ops"] if summary.get("q_unit", "rows") == "ops" else q["rows"]


def step_result(
    plan: StepPlan, summary: Summary, server: Usage, client: Usage | None
) -> shapes.StepResultJson:
    """The stored StepResult of a finished step (pure: no I/O)."""
    checks = summary["checks"]
    if checks["rows_expected"] is not None and checks["rows_expected"] != checks["rows_found"]:
        raise LoadgenError(
            f"step {plan.name}: tables hold {checks['rows_found']} rows, "
            f"expected {checks['rows_expected']} (inserts minus deletes)"
        )
    if checks["point_rows_expected"] != checks["point_rows_found"]:
        raise LoadgenError(
            f"step {plan.name}: point queries returned "
            f"{checks['point_rows_found']} rows, expected "
            f"{checks['point_rows_expected']}"
        )
    elapsed = summary["elapsed_s"]
    q_op = summary["q_op"]
    q_unit = summary.get("q_unit", "rows")
    count = q_count(summary)
    ops = {name: _op_figures(o, elapsed) for name, o in summary["ops"].items()}
    return {
        "kind": "step",
        "step": plan.name,
        "status": "ok",
        "reported": plan.reported,
        "elapsed_s": elapsed,
        "q": {
            "op": q_op,
            "unit": q_unit,
            "count": count,
            "value": count / elapsed if elapsed else 0.0,
        },
        "ops": ops,
        "server": server.to_json(),
        "client": client.to_json() if client is not None else None,
        "engine_stats": summary.get("engine_stats"),
        "per_op": per_op_metrics(count, elapsed, server, client),
        "sla": _sla(summary, elapsed),
        "checks": checks,
    }


def _op_figures(o: OpSummary, elapsed: float) -> shapes.OpFigures:
    """An operation's summary as stored: all the loadgen said but the histogram (kept in
    the .hlog), in its order, and its rates."""
    kept = {k: v for k, v in o.items() if k != "histogram"}
    rates = {
        "rows_per_s": o["rows"] / elapsed if elapsed else 0.0,
        "ops_per_s": o["ops"] / elapsed if elapsed else 0.0,
    }
    return cast(shapes.OpFigures, kept | rates)


def per_op_metrics(
    count: int, elapsed: float, server: Usage, client: Usage | None
) -> dict[str, float | None]:
    """Cost per operation of the step's Q over the measured window (None when Q is 0)."""
    if not count:
        return {m.key: None for m in PER_OP}
    return {
        "server_cpu_us": (server.user_s + server.system_s) * 1e6 / count,
        "server_user_us": server.user_s * 1e6 / count,
        "server_system_us": server.system_s * 1e6 / count,
        "client_cpu_us": (client.user_s + client.system_s) * 1e6 / count if client else None,
        "cs": server.ctx_switches / count,
        "rkb": server.read_bytes / 1024 / count,
        "wkb": server.write_bytes / 1024 / count,
        "server_instructions": None,  # perf stat's, where the host counts (counter_metrics)
        "server_cycles": None,
        "ops_per_s": count / elapsed if elapsed else 0.0,
    }


def _sla(summary: Summary, elapsed: float) -> shapes.Sla | None:
    """The background writer held to a target rate (the q-steps' inserts, the
    *whilewriting steps' puts): did it keep up?"""
    paced = [
        (name, op["rows"], target)
        for name, op in summary["ops"].items()
        if (target := op.get("target_rows_per_s"))
    ]
    if not paced or not elapsed:
        return None
    name, rows, target = next((p for p in paced if p[0] == "insert"), paced[0])
    target = float(target)
    achieved = rows / elapsed
    return {
        "op": name,
        "target_rows_per_s": target,
        "achieved_rows_per_s": achieved,
        "ok": achieved >= SLA_FRACTION * target,
    }
