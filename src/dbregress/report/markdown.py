"""The Markdown report: what `dbregress report` prints and writes to report.md."""

from __future__ import annotations

import math
from typing import Any

from dbregress.analysis.groups import group_summaries
from dbregress.analysis.metrics import ENGINE, LATENCY, PER_OP, Metric
from dbregress.analysis.relative import change, relative
from dbregress.analysis.summary import Cell, Matrix

MARKS = {"regression": " (-)", "improvement": " (+)", "": ""}
SLA_MARK = " †"


def fmt(value: float | None, digits: int = 0) -> str:
    if value is None:
        return "-"
    if math.isinf(value):
        return "inf"
    if abs(value) >= 100:
        return f"{value:,.0f}"
    return f"{value:.{max(digits, 2) if abs(value) < 10 else 1}f}"


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return [*out, ""]


def _q(cell: Cell) -> str:
    if cell.status != "ok":
        return cell.status
    failed_sla = cell.sla is not None and not cell.sla["ok"]
    return fmt(cell.qps) + (SLA_MARK if failed_sla else "")


def throughput(m: Matrix) -> list[str]:
    rows = [
        [s, m.cell(m.base, s).q_unit or "-"] + [_q(m.cell(lb, s)) for lb in m.labels]
        for s in m.steps
    ]
    return [
        "### Throughput",
        "",
        "Q per step: rows/s for inserts and indexing, "
        "queries/s for q-steps. † failed its insert-rate SLA.",
        "",
        *_table(["step", "unit", *m.labels], rows),
    ]


def relative_qps(m: Matrix) -> list[str]:
    others = m.labels[1:]
    if not others:
        return []
    rows = []
    for s in m.steps:
        base = m.cell(m.base, s)
        row = [s]
        for lb in others:
            cell = m.cell(lb, s)
            rel = relative(cell.qps, base.qps) if cell.status == base.status == "ok" else None
            sla = SLA_MARK if cell.sla is not None and not cell.sla["ok"] else ""
            row.append(fmt(rel, 2) + MARKS[change(rel)] + sla if rel is not None else "-")
        rows.append(row)
    return [
        f"### Relative QPS (vs {m.base})",
        "",
        "(-) regression: rQPS <= 0.95; (+) improvement: rQPS >= 1.05; unmarked values "
        "are within 5% and might be noise.",
        "",
        *_table(["step", *others], rows),
    ]


def sla(m: Matrix) -> list[str]:
    rows = []
    for s in m.steps:
        for lb in m.labels:
            cell = m.cell(lb, s)
            if cell.sla is None:
                continue
            verdict = "ok" if cell.sla["ok"] else "**failed**"
            rows.append(
                [
                    s,
                    lb,
                    fmt(cell.sla["target_rows_per_s"]),
                    fmt(cell.sla["achieved_rows_per_s"]),
                    verdict,
                    _q(cell),
                ]
            )
    if not rows:
        return []
    return [
        "### Background writers",
        "",
        "The q-steps' inserts (and as many deletes) and the *whilewriting steps' writer are "
        "held to a target rate. Below 95% of it the step failed its SLA and its Q is "
        "marked †.",
        "",
        *_table(["step", "build", "target rows/s", "achieved rows/s", "SLA", "Q"], rows),
    ]


def groups(m: Matrix) -> list[str]:
    """Microbenchmarks: relative QPS summarized per group."""
    summaries = group_summaries(m)
    if not summaries:
        return []
    rows = [
        [
            g.group,
            g.label,
            str(g.count),
            fmt(g.average, 2),
            fmt(g.median, 2),
            fmt(g.minimum, 2),
            fmt(g.maximum, 2),
            fmt(g.stddev, 3),
        ]
        for g in summaries
    ]
    return [
        f"### Relative QPS per group (vs {m.base})",
        "",
        "Over the group's microbenchmarks (the reads run before the writes included).",
        "",
        *_table(["group", "build", "n", "average", "median", "min", "max", "stddev"], rows),
    ]


def engine_stats(m: Matrix) -> list[str]:
    """What the engine says of itself (RocksDB statistics and properties)."""
    rows = []
    for s in m.steps:
        for lb in m.labels:
            cell = m.cell(lb, s)
            if cell.engine:
                rows.append([s, lb, *(fmt(cell.engine.get(mt.key), 2) for mt in ENGINE)])
    if not rows:
        return []
    return [
        "### Engine statistics",
        "",
        "From the engine's own counters over the step: write amplification, the share of "
        "time writes stalled, and the LSM tree's size at the end.",
        "",
        *_table(["step", "build", *(f"{mt.label} ({mt.unit})" for mt in ENGINE)], rows),
    ]


def cpu_per_op(m: Matrix) -> list[str]:
    """Server and loadgen CPU per operation side by side: is the client ever the cost?"""
    rows = []
    for s in m.steps:
        row = [s]
        for lb in m.labels:
            cell = m.cell(lb, s)
            srv, cli = cell.per_op.get("server_cpu_us"), cell.per_op.get("client_cpu_us")
            row.append(f"{fmt(srv)} / {fmt(cli)}" if cell.status == "ok" else cell.status)
        rows.append(row)
    return [
        "### CPU per operation: server / loadgen (µs)",
        "",
        "Per inserted row (l.i0, l.i1, l.i2), indexed row (l.x), query (q-steps) or "
        "key-value operation. An embedded engine (RocksDB) runs inside the loadgen, so "
        "its CPU is the first figure and the second is -.",
        "",
        *_table(["step", *m.labels], rows),
    ]


def _metric_value(cell: Cell, metric: Metric) -> float | None:
    return cell.per_op.get(metric.key) if cell.status == "ok" else None


def per_operation(m: Matrix) -> list[str]:
    out = [
        "### Per-operation metrics",
        "",
        "Per operation of the step's Q. srv = the server's process tree, cli = "
        "dbregress-loadgen. Relative rows divide by the base: inf when the base is 0, "
        "1 when both are. (-) marks a cost at least 5% worse, (+) 5% better.",
        "",
    ]
    header = ["build", *(f"{mt.label} ({mt.unit})" for mt in PER_OP)]
    for s in m.steps:
        base = m.cell(m.base, s)
        rows = [[lb, *(fmt(_metric_value(m.cell(lb, s), mt)) for mt in PER_OP)] for lb in m.labels]
        for lb in m.labels[1:]:
            cell = m.cell(lb, s)
            rels = []
            for mt in PER_OP:
                rel = relative(_metric_value(cell, mt), _metric_value(base, mt))
                rels.append(fmt(rel, 2) + MARKS[change(rel, mt.better)] if rel is not None else "-")
            rows.append([f"{lb}/{m.base}", *rels])
        out += [f"#### {s}", "", *_table(header, rows)]
    return out


def latency(m: Matrix) -> list[str]:
    rows = []
    for s in m.steps:
        for lb in m.labels:
            cell = m.cell(lb, s)
            for op, lat in sorted(cell.latency.items()):
                rows.append([s, lb, op, *(fmt(lat.get(mt.key)) for mt in LATENCY)])
    header = ["step", "build", "operation", *(f"{mt.label} (µs)" for mt in LATENCY)]
    return [
        "### Latency",
        "",
        "Microseconds from each operation's intended start "
        "(paced operations include time spent waiting behind slow ones).",
        "",
        *_table(header, rows),
    ]


def failures(record: dict[str, Any]) -> list[str]:
    if not record.get("failures"):
        return []
    rows = [[f["where"], f["type"], f["message"].splitlines()[0][:200]] for f in record["failures"]]
    return [
        "## Failures",
        "",
        "Each failed step is stored with its full message and the server log's tail.",
        "",
        *_table(["where", "error", "message"], rows),
    ]


def header(record: dict[str, Any]) -> list[str]:
    host = record.get("host", {})
    p = record["placement"]
    lines = [
        f"# dbregress report: {record['lab']} ({record['run_id']})",
        "",
        f"Status: {record['status']}. "
        f"Host: {host.get('cpu_model', '?')}, {host.get('cores', '?')} cores, "
        f"kernel {host.get('kernel', '?')}. Placement: {p['mode']} "
        f"(server CPUs {p['server_cpus']}, loadgen CPUs {p['client_cpus']}).",
        "",
    ]
    rows = [
        [
            c["comparison"],
            c["label"] + (" (base)" if c["base"] else ""),
            c["build"],
            record["builds"].get(c["label"], {}).get("version_string", "?"),
            c["config"],
        ]
        for c in record["columns"]
    ]
    return lines + _table(["comparison", "column", "build", "version", "config"], rows)


BENCHMARK_NAMES = {
    "insert": "the Insert Benchmark",
    "kv": "db_bench-style key-value steps",
    "micro": "sysbench-style microbenchmarks",
}


def _title(m: Matrix) -> list[str]:
    return [f"## {m.comparison}: {BENCHMARK_NAMES.get(m.benchmark, m.benchmark)}", ""]


def _join(parts: list[list[str]]) -> str:
    return "\n".join(line for part in parts for line in part).rstrip() + "\n"


def render(record: dict[str, Any], ms: list[Matrix]) -> str:
    parts = [header(record)]
    for m in ms:
        parts += [
            _title(m),
            throughput(m),
            relative_qps(m),
            groups(m),
            sla(m),
            cpu_per_op(m),
            engine_stats(m),
            per_operation(m),
            latency(m),
        ]
    return _join([*parts, failures(record)])


def summary_tables(record: dict[str, Any], ms: list[Matrix]) -> str:
    """The short version printed at the end of `dbregress run`."""
    parts = []
    for m in ms:
        parts += [_title(m), throughput(m), relative_qps(m), groups(m), sla(m), cpu_per_op(m)]
        parts += [engine_stats(m)]
    return _join([*parts, failures(record)])
