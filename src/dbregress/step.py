"""One step, measured: server and loadgen counters around one loadgen run.

The server's counters are read while the loadgen still holds its connections (it
waits after its summary), so backends that exit at disconnect are counted whole.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dbregress.benchmarks.plan import StepPlan
from dbregress.collect.proc import Usage, snapshot_tree
from dbregress.engines.base import Engine
from dbregress.errors import LoadgenError, StepTimeout
from dbregress.lab import Placement
from dbregress.loadgen import Loadgen
from dbregress.store.files import sibling

SLA_FRACTION = 0.95  # METHOD.md: a q-step below 95% of its insert target failed its SLA
MAX_ERROR_MESSAGES = 20


@dataclass
class StepOutcome:
    result: dict[str, Any]
    series: list[dict[str, Any]] = field(default_factory=list)
    hlog: str = ""


@dataclass
class _Stream:
    """What the event stream said, gathered as it arrives."""

    series: list[dict[str, Any]] = field(default_factory=list)
    errors: list[dict[str, Any]] = field(default_factory=list)
    summary: dict[str, Any] | None = None
    fatal: dict[str, Any] | None = None
    rows_done: int = 0


def collect_step(
    engine: Engine,
    spec: dict[str, Any],
    stem: Path,
    plan: StepPlan,
    timeout_s: float,
    placement: Placement,
    report: Callable[[float, float | None], None],
) -> StepOutcome:
    started_at = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    # An embedded engine runs inside the loadgen: its process is the one measured.
    server_before = None if engine.embedded else snapshot_tree(engine.server_pid())
    loadgen = Loadgen(
        spec, sibling(stem, ".spec.json"), sibling(stem, ".stderr"), placement.client_cpus
    )
    client_before = snapshot_tree(loadgen.pid)
    stream = _Stream()
    t0 = time.monotonic()
    try:
        server_after, client_after = _follow(engine, loadgen, plan, stream, t0, timeout_s, report)
        loadgen.release()
    except BaseException:
        loadgen.kill()
        raise
    finally:
        loadgen.close()
    assert stream.summary is not None
    loadgen_usage = _loadgen_usage(client_before.delta(client_after), stream.summary["process"])
    if server_before is None or server_after is None:
        server, client = loadgen_usage, None
    else:
        server, client = server_before.delta(server_after), loadgen_usage
    result = step_result(plan, stream.summary, server, client)
    result.update(
        {
            "started_at": started_at,
            "wall_s": round(time.monotonic() - t0, 3),
            "db_size_bytes": engine.data_size_bytes(),
            "placement": placement.to_json(),
            "error_samples": stream.errors,
        }
    )
    return StepOutcome(result, stream.series, _hlog(stream.summary))


def _follow(
    engine: Engine,
    loadgen: Loadgen,
    plan: StepPlan,
    stream: _Stream,
    t0: float,
    timeout_s: float,
    report: Callable[[float, float | None], None],
) -> tuple[Any, Any]:
    """Reads events until the summary; returns the server and client counters read then."""
    checked = t0
    for event in loadgen.events():
        now = time.monotonic()
        elapsed = now - t0
        if now - checked >= 1.0:  # a killed postmaster can leave backends serving on
            engine.check_alive()
            checked = now
        if elapsed > timeout_s:
            raise StepTimeout(
                f"step {plan.name} still running after {timeout_s:.0f} s (a hang?); "
                f"server log tail:\n{engine.log_tail(20)}"
            )
        if event is None:
            continue
        kind = event["type"]
        if kind == "interval":
            _on_interval(event, stream)
            report(elapsed, _remaining(plan, elapsed, stream.rows_done))
        elif kind == "error":
            if len(stream.errors) < MAX_ERROR_MESSAGES:
                stream.errors.append(event)
        elif kind == "summary":
            stream.summary = event
            server = None if engine.embedded else snapshot_tree(engine.server_pid())
            return server, snapshot_tree(loadgen.pid)
        elif kind == "fatal":
            loadgen.release(timeout_s=10)
            _blame_engine_first(engine)
            raise LoadgenError(f"step {plan.name}: {event['message']}")
    loadgen.release(timeout_s=10)
    _blame_engine_first(engine)
    tail = loadgen.stderr_tail()
    raise LoadgenError(
        f"step {plan.name}: dbregress-loadgen {loadgen.exit_description()} "
        f"before the step finished" + (f"; its last words:\n{tail}" if tail else "")
    )


def _blame_engine_first(engine: Engine, grace_s: float = 2.0) -> None:
    """Raises EngineCrashed if the server died: a dead server is the cause of a failed
    loadgen. Waits a moment, because clients see a killed server's sockets close before
    the kernel has finished tearing the process down."""
    deadline = time.monotonic() + grace_s
    while True:
        engine.check_alive()
        if time.monotonic() >= deadline:
            return
        time.sleep(0.1)


def _loadgen_usage(from_proc: Usage, process: dict[str, Any]) -> Usage:
    """The loadgen's CPU and switches from its own getrusage (µs resolution; /proc has
    10 ms ticks, which round a short step to zero); its IO from /proc."""
    return dataclasses.replace(
        from_proc,
        user_s=process["user_s"],
        system_s=process["system_s"],
        ctx_switches=process["voluntary_cs"] + process["involuntary_cs"],
    )


def _on_interval(event: dict[str, Any], stream: _Stream) -> None:
    for op, c in event["ops"].items():
        stream.series.append({"t_s": event["t_s"], "op": op, **c})
        if op in ("insert", "delete", "create_index"):
            stream.rows_done += c["rows"]


def _remaining(plan: StepPlan, elapsed: float, rows_done: int) -> float | None:
    if plan.duration_s:
        return max(0.0, plan.duration_s - elapsed)
    if plan.work and rows_done:
        return max(0.0, (plan.work - rows_done) * elapsed / rows_done)
    return None


def step_result(
    plan: StepPlan, summary: dict[str, Any], server: Usage, client: Usage | None
) -> dict[str, Any]:
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
    count = summary["ops"][q_op][q_unit] if q_op in summary["ops"] else 0
    ops = {
        name: {k: v for k, v in o.items() if k != "histogram"}
        | {
            "rows_per_s": o["rows"] / elapsed if elapsed else 0.0,
            "ops_per_s": o["ops"] / elapsed if elapsed else 0.0,
        }
        for name, o in summary["ops"].items()
    }
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


def per_op_metrics(
    count: int, elapsed: float, server: Usage, client: Usage | None
) -> dict[str, float | None]:
    """METHOD.md section 5: cost per operation of the step's Q (None when Q is 0)."""
    if not count:
        return {
            k: None
            for k in (
                "server_cpu_us",
                "server_user_us",
                "server_system_us",
                "client_cpu_us",
                "cs",
                "rkb",
                "wkb",
                "ops_per_s",
            )
        }
    return {
        "server_cpu_us": (server.user_s + server.system_s) * 1e6 / count,
        "server_user_us": server.user_s * 1e6 / count,
        "server_system_us": server.system_s * 1e6 / count,
        "client_cpu_us": (client.user_s + client.system_s) * 1e6 / count if client else None,
        "cs": server.ctx_switches / count,
        "rkb": server.read_bytes / 1024 / count,
        "wkb": server.write_bytes / 1024 / count,
        "ops_per_s": count / elapsed if elapsed else 0.0,
    }


def _sla(summary: dict[str, Any], elapsed: float) -> dict[str, Any] | None:
    """The background writer held to a target rate (the q-steps' inserts, the
    *whilewriting steps' puts): did it keep up?"""
    paced = [(name, op) for name, op in summary["ops"].items() if op.get("target_rows_per_s")]
    if not paced or not elapsed:
        return None
    name, op = next(((n, o) for n, o in paced if n == "insert"), paced[0])
    target = float(op["target_rows_per_s"])
    achieved = op["rows"] / elapsed
    return {
        "op": name,
        "target_rows_per_s": target,
        "achieved_rows_per_s": achieved,
        "ok": achieved >= SLA_FRACTION * target,
    }


def _hlog(summary: dict[str, Any]) -> str:
    lines = ["#op,histogram (HdrHistogram V2 compressed, base64, microseconds)"]
    lines += [f"{op},{o['histogram']}" for op, o in summary["ops"].items()]
    return "\n".join(lines) + "\n"
