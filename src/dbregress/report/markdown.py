"""The Markdown report: what `dbregress report` prints and writes to report.md."""

from __future__ import annotations

import math
from collections.abc import Sequence

from dbregress.analysis.compare import VERDICT_METRICS, RunVerdicts
from dbregress.analysis.groups import group_summaries
from dbregress.analysis.metrics import COUNTERS, ENGINE, LATENCY, Metric
from dbregress.analysis.summary import Cell, Matrix
from dbregress.report import changes, count_store, disclosure, io_tables
from dbregress.report import verdict_tables as vt
from dbregress.shapes.calibration import Calibration
from dbregress.shapes.explain import ExplainRecord
from dbregress.shapes.replay import CostLaneRecord, ReplayRecord
from dbregress.shapes.run import RunJson
from dbregress.shapes.step_result import StepResultJson

SLA_MARK = " †"
# Per-op costs: a verdict says higher or lower; the mark says whether that is worse.
WORSE_BETTER = {"worse": "(-)", "better": "(+)", "same": "=", "undecided": "?"}


def fmt(value: float | None, digits: int = 0) -> str:
    if value is None:
        return "-"
    if math.isinf(value):
        return "inf"
    if abs(value) >= 100:
        return f"{value:,.0f}"
    return f"{value:.{max(digits, 2) if abs(value) < 10 else 1}f}"


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
        *vt.table(["step", "unit", *m.labels], rows),
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
        *vt.table(["step", "build", "target rows/s", "achieved rows/s", "SLA", "Q"], rows),
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
        *vt.table(["group", "build", "n", "average", "median", "min", "max", "stddev"], rows),
    ]


def engine_stats(m: Matrix) -> list[str]:
    """What the engine says of itself (RocksDB statistics and properties)."""
    rows = []
    for s in m.steps:
        for lb in m.labels:
            cell = m.cell(lb, s)
            # a SQL engine's engine_stats hold only its buffer counters: no row
            if cell.engine and any(v is not None for v in cell.engine.values()):
                rows.append([s, lb, *(fmt(cell.engine.get(mt.key), 2) for mt in ENGINE)])
    if not rows:
        return []
    return [
        "### Engine statistics",
        "",
        "From the engine's own counters over the step: write amplification, the share of "
        "time writes stalled, and the LSM tree's size at the end.",
        "",
        *vt.table(["step", "build", *(f"{mt.label} ({mt.unit})" for mt in ENGINE)], rows),
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
        *vt.table(["step", *m.labels], rows),
    ]


def _metric_value(cell: Cell, metric: Metric) -> float | None:
    return cell.per_op.get(metric.key) if cell.status == "ok" else None


def per_operation(m: Matrix, v: RunVerdicts) -> list[str]:
    out = [
        "### Per-operation metrics",
        "",
        "Per operation of the step's Q, over the measured window only. srv = the server's "
        "process tree, cli = dbregress-loadgen. Relative rows: the ratio to the base over "
        "repeats with its interval; (-) costs more, (+) costs less, = the same within the "
        "band, ? undecided.",
        "",
    ]
    shown = shown_metrics(m)
    header = ["build", *(f"{mt.label} ({mt.unit})" for mt in shown)]
    for s in m.steps:
        rows = [[lb, *(fmt(_metric_value(m.cell(lb, s), mt)) for mt in shown)] for lb in m.labels]
        for lb in m.labels[1:]:
            rels = [_metric_ratio(v, m, lb, s, mt) for mt in shown]
            rows.append([f"{lb}/{m.base}", *rels])
        out += [f"#### {s}", "", *vt.table(header, rows)]
    return out


def shown_metrics(m: Matrix) -> list[Metric]:
    """The per-op metrics with verdicts, less the hardware counters where no result of
    the comparison has them (a host without a PMU)."""
    return [
        mt
        for mt in VERDICT_METRICS
        if mt.key not in COUNTERS
        or any(_metric_value(m.cell(lb, s), mt) is not None for s in m.steps for lb in m.labels)
    ]


def _metric_ratio(v: RunVerdicts, m: Matrix, label: str, step: str, mt: Metric) -> str:
    c = v.metrics.get(mt.key, {}).get((m.comparison, label, step))
    if c is None or c.ratio is None:
        return "-"
    marks = {
        "higher": WORSE_BETTER["worse" if mt.better == "lower" else "better"],
        "lower": WORSE_BETTER["better" if mt.better == "lower" else "worse"],
        "same": "=",
        "undecided": "?",
    }
    return vt.ratio_text(c, marks)


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
        *vt.table(header, rows),
    ]


def failures(record: RunJson) -> list[str]:
    if not record.get("failures"):
        return []
    rows = [[f["where"], f["type"], f["message"].splitlines()[0][:200]] for f in record["failures"]]
    return [
        "## Failures",
        "",
        "Each failed step is stored with its full message and the server log's tail.",
        "",
        *vt.table(["where", "error", "message"], rows),
    ]


def header(record: RunJson) -> list[str]:
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
            c["label"] + (" (base)" if c["base"] else "") + _injected(record, c["label"]),
            c["build"],
            record["builds"].get(c["label"], {}).get("version_string", "?"),
            c["config"],
        ]
        for c in record["columns"]
    ]
    return lines + vt.table(["comparison", "column", "build", "version", "config"], rows)


def _injected(record: RunJson, label: str) -> str:
    """A column slowed on purpose (a self-test) says so wherever it is named."""
    f = (record.get("inject_slowdown") or {}).get(label)
    return f" (injected slowdown {f:g})" if f else ""


BENCHMARK_NAMES = {
    "insert": "the Insert Benchmark",
    "kv": "db_bench-style key-value steps",
    "micro": "sysbench-style microbenchmarks",
}


def _title(m: Matrix) -> list[str]:
    return [f"## {m.comparison}: {BENCHMARK_NAMES.get(m.benchmark, m.benchmark)}", ""]


def _join(parts: list[list[str]]) -> str:
    return "\n".join(line for part in parts for line in part).rstrip() + "\n"


def explanations(explain: ExplainRecord | None, record: RunJson, v: RunVerdicts) -> list[str]:
    """The Explanations section, when the run folder holds explain/explain.json."""
    if explain is None:
        return []
    from dbregress.report.explanations import section

    return section(explain, record, v)


def render(
    record: RunJson,
    ms: list[Matrix],
    v: RunVerdicts,
    results: list[StepResultJson],
    calibration: Calibration | None = None,
    damaged: list[str] | None = None,
    explain: ExplainRecord | None = None,
    lane: CostLaneRecord | None = None,
    replays: Sequence[ReplayRecord] | None = None,
) -> str:
    """report.md: run.json, the step results, the host's calibration, the run's
    explanations, its cost/lane.json (what the counting replays changed) and its
    counting replays (which were taken from the count store; None: not told) come typed
    or as read (store/, explain/store.py)."""
    parts = [header(record), [vt.lanes_line(record, v), ""]]
    stored = count_store.summarize(record, v, lane, replays)
    for m in ms:
        parts += [
            _title(m),
            throughput(m),
            vt.relative_qps(m, v),
            vt.both_lanes(m, v, stored),
            _counting(record, m, v, lane),
            _counted_before(m, stored),
            changes.markdown(m, v),
            vt.verdicts(m, v),
            vt.cost_details(m, v),
            groups(m),
            sla(m),
            cpu_per_op(m),
            engine_stats(m),
            per_operation(m, v),
            latency(m),
            io_tables.markdown(v.io_for(m.comparison)),
        ]
    extra = [explanations(explain, record, v), vt.host_noise(results, v)]
    extra += [vt.calibration(calibration), failures(record)]
    if damaged:
        extra.append(["## Damaged files", "", "Left out of this report:", ""])
        extra.append([f"- {d}" for d in damaged])
    return _join([*parts, *extra])


def _counting(record: RunJson, m: Matrix, v: RunVerdicts, lane: CostLaneRecord | None) -> list[str]:
    """What the counting replays changed (report/disclosure.py), where a cost lane
    judged the comparison."""
    if v.cost is None or len(m.labels) < 2:
        return []
    return disclosure.markdown(disclosure.disclosure(lane, record, m.comparison))


def _counted_before(m: Matrix, stored: count_store.StoreReport | None) -> list[str]:
    """Which of the replays the comparison's cost verdicts used were taken from the
    count store (report/count_store.py); nothing in a run that did not use it."""
    if stored is None or len(m.labels) < 2:
        return []
    head, *items = stored.lines(m.comparison)
    return [head, "", *(f"- {line}" for line in items), *([""] if items else [])]


def summary_tables(
    record: RunJson,
    ms: list[Matrix],
    v: RunVerdicts,
    lane: CostLaneRecord | None = None,
    replays: Sequence[ReplayRecord] | None = None,
) -> str:
    """The short version printed at the end of `dbregress run` (run.json, cost/lane.json
    and the counting replays typed or as read; replays None: not told)."""
    parts: list[list[str]] = [[vt.lanes_line(record, v), ""]]
    stored = count_store.summarize(record, v, lane, replays)
    for m in ms:
        parts += [_title(m), throughput(m), vt.relative_qps(m, v), vt.both_lanes(m, v, stored)]
        parts += [_counting(record, m, v, lane), _counted_before(m, stored)]
        parts += [groups(m), sla(m)]
        parts += [cpu_per_op(m)]
    return _join([*parts, failures(record)])
