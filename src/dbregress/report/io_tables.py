"""The IO-efficiency section of an IO-bound comparison (analysis/io_efficiency.py), in
every report format: Markdown (report.md, `compare`), TSV, JSON (verdicts.json,
schema/verdicts.schema.json `io_efficiency`) and the HTML page's rows and chart."""

from __future__ import annotations

import shlex
from typing import TypedDict

from dbregress.analysis.io_efficiency import Baseline, FioFigures, IoRow, IoSection
from dbregress.report import svg
from dbregress.report import verdict_tables as vt
from dbregress.shapes import verdicts as shapes

TITLE = "### IO efficiency"
HEADER = [
    "step",
    "column",
    "reads/op",
    "KiB/read",
    "read IOPS",
    "fio IOPS",
    "IO efficiency",
    "model's efficiency",
    "user µs/read",
    "system µs/read",
    "predicted µs/op",
    "measured µs/op",
    "timed µs/op",
    "predicted - measured",
]


def _f(value: float | None, digits: int = 1) -> str:
    if value is None:
        return "-"
    return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.{digits}f}"


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:+.1f}%"


def row_cells(r: IoRow) -> list[str]:
    return [
        r.step,
        r.label,
        f"{r.reads_per_op:.3f}",
        f"{r.read_kib:.1f}",
        _f(r.read_iops, 0),
        _f(r.fio_iops, 0),
        f"{r.efficiency:.3f}",
        f"{r.predicted_efficiency:.3f}",
        _f(r.user_us_per_read),
        _f(r.system_us_per_read),
        _f(r.predicted_us),
        _f(r.measured_us),
        _f(r.timed_us),
        f"{r.diff_us:+.1f} µs ({r.diff_pct:+.1f}%)",
    ]


def _fio(f: FioFigures) -> str:
    return (
        f"{f.iops:,.0f} reads/s, {f.latency_us:.1f} µs mean latency of which fio's own CPU "
        f"{f.cpu_us:.1f} µs ({f.user_us:.1f} user + {f.system_us:.1f} system): device "
        f"{f.device_us:.1f} µs"
    )


def baseline_lines(b: Baseline) -> list[str]:
    """The device baseline in words: pattern, fio's figures before and after, drift."""
    pattern = f"{b.block_size} B random reads{', O_DIRECT' if b.direct else ', buffered'}"
    out = [
        f"Device baseline: {b.fio_version or 'fio'} on {b.device}, {pattern}, psync, "
        f"{b.numjobs} job(s) at queue depth 1.",
        "",
    ]
    if b.before is not None:
        out.append(f"- before the comparison: {_fio(b.before)}")
    if b.after is not None:
        out.append(f"- after the comparison: {_fio(b.after)}")
    if b.drift is not None:
        out.append(f"- drift of fio's reads/s over the run: {_pct(b.drift)}")
    out += [f"- {e}" for e in b.errors]
    if b.command:
        out.append(f"- fio's command: `{shlex.join(b.command)}`")
    if b.files:
        out.append(f"- fio's JSON output: {', '.join(b.files)}")
    return [*out, ""]


LEGEND = (
    "Per step and column, medians over repeats. reads/op and KiB/read: the data "
    "directory's block device over the measured window (/proc/diskstats); read IOPS: "
    "those reads per second; IO efficiency: read IOPS / fio's at the same block size and "
    "concurrency (the mean of fio before and after); user and system µs/read: the engine's "
    "CPU per device read. The model: predicted µs/op = user + system CPU per op + "
    "reads/op * the device's latency from fio; measured µs/op: clients / QPS, a client's "
    "whole time per operation; timed µs/op: the loadgen's mean latency of the call "
    "(docs/metrics.md, IO efficiency)."
)


def markdown(section: IoSection | None) -> list[str]:
    if section is None:
        return []
    out = [TITLE, ""]
    if section.baseline is not None and section.baseline.absent is None:
        out += baseline_lines(section.baseline)
    if section.why_not is not None:
        out += [f"No IO-efficiency table: {section.why_not}.", ""]
    if section.rows:
        out += [LEGEND, "", *vt.table(HEADER, [row_cells(r) for r in section.rows])]
    for a in section.absent:
        who = f" ({a.label})" if a.label else ""
        out.append(f"- {a.step}{who}: no IO efficiency: {a.why}")
    if section.absent:
        out.append("")
    return out


def tsv(section: IoSection | None) -> list[str]:
    """The section's table with a legend of its columns, ready to paste."""
    if section is None:
        return []
    title = f"{section.comparison}: IO efficiency"
    if not section.rows:
        return [title, f"absent: {section.why_not}", ""]
    legend = [f"col-{i} : {h}" for i, h in enumerate(HEADER[1:], 1)]
    rows = [[*row_cells(r)[1:], r.step] for r in section.rows]
    header = "\t".join(f"col-{i}" for i in range(1, len(HEADER)))
    return [title, *legend, "", header, *("\t".join(r) for r in rows), ""]


def _fio_json(f: FioFigures | None) -> shapes.BaselineFigures | None:
    if f is None:
        return None
    return {
        "iops": f.iops,
        "latency_us": f.latency_us,
        "user_us_per_read": f.user_us,
        "system_us_per_read": f.system_us,
        "device_us": f.device_us,
    }


def to_json(section: IoSection) -> shapes.IoEfficiencyItem:
    b = section.baseline
    baseline: shapes.BaselineJson | None = None
    if b is not None:
        baseline = {
            "fio_version": b.fio_version,
            "device": b.device,
            "block_size": b.block_size,
            "direct": b.direct,
            "numjobs": b.numjobs,
            "command": b.command,
            "files": b.files,
            "before": _fio_json(b.before),
            "after": _fio_json(b.after),
            "drift": b.drift,
            "absent": b.absent,
        }
    rows: list[shapes.IoRowJson] = [
        {
            "step": r.step,
            "column": r.label,
            "repeats": r.repeats,
            "clients": r.clients,
            "reads_per_op": r.reads_per_op,
            "kib_per_read": r.read_kib,
            "read_iops": r.read_iops,
            "fio_iops": r.fio_iops,
            "io_efficiency": r.efficiency,
            "predicted_io_efficiency": r.predicted_efficiency,
            "user_us_per_read": r.user_us_per_read,
            "system_us_per_read": r.system_us_per_read,
            "user_us_per_op": r.user_us_per_op,
            "system_us_per_op": r.system_us_per_op,
            "device_us": r.device_us,
            "predicted_us_per_op": r.predicted_us,
            "measured_us_per_op": r.measured_us,
            "timed_us_per_op": r.timed_us,
            "difference_us": r.diff_us,
            "difference_pct": r.diff_pct,
            "own_read_share": r.own_share,
        }
        for r in section.rows
    ]
    return {
        "comparison": section.comparison,
        "baseline": baseline,
        "rows": rows,
        "absent": [{"step": a.step, "column": a.label, "why": a.why} for a in section.absent],
        "why_not": section.why_not,
    }


class IoHtml(TypedDict):
    """The HTML page's IO-efficiency section of a comparison."""

    baseline: list[str]  # the baseline's lines
    why_not: str | None
    legend: str
    header: list[str]
    rows: list[list[str]]
    chart: str  # SVG
    absent: list[str]


def html(section: IoSection | None, colours: dict[str, str]) -> IoHtml | None:
    """The HTML page's section: the baseline's lines, the table, the chart (IO efficiency
    per column, measured against the model's; predicted against measured time per
    operation), the absent steps."""
    if section is None:
        return None
    chart = ""
    if section.rows:
        many = len({r.step for r in section.rows}) > 1
        points = [(f"{r.label} {r.step}" if many else r.label, r) for r in section.rows]
        efficiency = [
            svg.DotPair(name, r.efficiency, r.predicted_efficiency, colours.get(r.label, "#333"))
            for name, r in points
        ]
        latency = [
            svg.DotPair(name, r.measured_us, r.predicted_us, colours.get(r.label, "#333"))
            for name, r in points
        ]
        chart = svg.dot_pairs(efficiency, "IO efficiency (dot) and the model's (ring)", "vs fio")
        chart += svg.dot_pairs(latency, "µs per operation: measured (dot), predicted (ring)", "µs")
    b = section.baseline
    return {
        "baseline": [ln[2:] if ln.startswith("- ") else ln for ln in baseline_lines(b) if ln]
        if b is not None and b.absent is None
        else [],
        "why_not": section.why_not,
        "legend": LEGEND,
        "header": HEADER,
        "rows": [row_cells(r) for r in section.rows],
        "chart": chart,
        "absent": [
            f"{a.step}{f' ({a.label})' if a.label else ''}: {a.why}" for a in section.absent
        ],
    }
