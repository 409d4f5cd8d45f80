"""The IO-efficiency section of an IO-bound comparison (analysis/io_efficiency.py), in
every report format: Markdown (report.md, `compare`), TSV, JSON (verdicts.json,
schema/verdicts.schema.json `io_efficiency`) and the HTML page's rows and chart.

A buffered section (the engines read through the page cache) has three more columns:
the engine's reads of its files per operation, its page-cache hit rate and fio's; a row
whose two hit rates are not the same state has no efficiency, and says why under the
table. A device time at or below zero is shown as flagged, with the reason, and the
model's columns are then empty."""

from __future__ import annotations

import shlex
from typing import TypedDict

from dbregress.analysis.fio_baseline import Baseline, FioFigures
from dbregress.analysis.io_efficiency import IoRow, IoSection
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
# A buffered section's columns after reads/op: what the page cache served.
BUFFERED = ["file reads/op", "page-cache hits", "fio's page-cache hits"]


def header(section: IoSection) -> list[str]:
    if not _buffered(section):
        return HEADER
    return [*HEADER[:3], *BUFFERED, *HEADER[3:]]


def _buffered(section: IoSection) -> bool:
    """The table has the buffered columns: fio read buffered, or a column did."""
    baseline = section.baseline is not None and not section.baseline.direct
    return baseline or any(r.buffered for r in section.rows)


def _f(value: float | None, digits: int = 1) -> str:
    if value is None:
        return "-"
    return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.{digits}f}"


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:+.1f}%"


def _rate(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"


def _ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def _diff(r: IoRow) -> str:
    if r.diff_us is None or r.diff_pct is None:
        return "-"
    return f"{r.diff_us:+.1f} µs ({r.diff_pct:+.1f}%)"


def row_cells(r: IoRow, wide: bool | None = None) -> list[str]:
    """The row's cells; the buffered ones where the table has them (`wide`: _buffered,
    None: where the row's column reads buffered)."""
    buffered = (
        [_f(r.file_reads_per_op, 3), _rate(r.page_cache_hit_rate), _rate(r.fio_page_cache_hit_rate)]
        if (r.buffered if wide is None else wide)
        else []
    )
    return [
        r.step,
        r.label,
        f"{r.reads_per_op:.3f}",
        *buffered,
        f"{r.read_kib:.1f}",
        _f(r.read_iops, 0),
        _f(r.fio_iops, 0),
        _ratio(r.efficiency),
        _ratio(r.predicted_efficiency),
        _f(r.user_us_per_read),
        _f(r.system_us_per_read),
        _f(r.predicted_us),
        _f(r.measured_us),
        _f(r.timed_us),
        _diff(r),
    ]


def _device(f: FioFigures) -> str:
    if f.device_flag is not None:
        return f"device time FLAGGED: {f.device_flag}"
    return f"device {f.device_us:.1f} µs per device read"


def _fio(f: FioFigures) -> str:
    reads = f"{f.iops:,.0f} reads/s"
    share = f.device_share
    if not f.direct and share is not None and f.device_iops is not None:
        reads += (
            f", of which {f.device_iops:,.0f}/s reached the device (page-cache hits "
            f"{_rate(f.page_cache_hit_rate)})"
        )
    elif not f.direct:
        reads += ", device reads not counted"
    return (
        f"{reads}, {f.latency_us:.1f} µs mean latency of which fio's own CPU "
        f"{f.cpu_us:.1f} µs ({f.user_us:.1f} user + {f.system_us:.1f} system): {_device(f)}"
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
    "those reads per second; fio IOPS: fio's device reads per second at the same block "
    "size and concurrency (the mean of fio before and after); IO efficiency: read IOPS / "
    "fio IOPS; user and system µs/read: the engine's CPU per device read. The model: "
    "predicted µs/op = user + system CPU per op + reads/op * the device's time per read "
    "from fio; measured µs/op: clients / QPS, a client's whole time per operation; timed "
    "µs/op: the loadgen's mean latency of the call (docs/metrics.md, IO efficiency)."
)
BUFFERED_LEGEND = (
    "Buffered reads: file reads/op are the engine's reads of its files by its own count "
    "(page-cache hits and misses alike); page-cache hits: 1 - device reads / file reads, "
    "fio's likewise from the device's counters over its run. IO efficiency is given only "
    "where the two hit rates are the same state (by the model, a reader like fio would "
    "read the device at most 5% more or less often per second at the engine's rate)."
)


def _notes(section: IoSection) -> list[str]:
    """Why rows have no efficiency, and the model's flag, under the table."""
    out = [
        f"- {r.step} ({r.label}): no IO efficiency: {r.no_efficiency}"
        for r in section.rows
        if r.no_efficiency is not None
    ]
    flags = {r.device_flag for r in section.rows if r.device_flag is not None}
    out += [f"- the model's figures are left out: {flag}" for flag in sorted(flags)]
    if section.cache_not_dropped and any(r.buffered for r in section.rows):
        out.append(
            f"- the page cache was not dropped before each job and step "
            f"({section.cache_not_dropped}): a buffered step may have started warm; "
            "each buffered row is judged by its own page-cache hit rate against fio's"
        )
    return out


def markdown(section: IoSection | None) -> list[str]:
    if section is None:
        return []
    out = [TITLE, ""]
    if section.baseline is not None and section.baseline.absent is None:
        out += baseline_lines(section.baseline)
    if section.why_not is not None:
        out += [f"No IO-efficiency table: {section.why_not}.", ""]
    if section.rows:
        out += [LEGEND, ""]
        if _buffered(section):
            out += [BUFFERED_LEGEND, ""]
        wide = _buffered(section)
        out += vt.table(header(section), [row_cells(r, wide) for r in section.rows])
    out += _notes(section)
    for a in section.absent:
        who = f" ({a.label})" if a.label else ""
        out.append(f"- {a.step}{who}: no IO efficiency: {a.why}")
    if section.absent or _notes(section):
        out.append("")
    return out


def tsv(section: IoSection | None) -> list[str]:
    """The section's table with a legend of its columns, ready to paste; the rows
    without an efficiency and the model's flag after it."""
    if section is None:
        return []
    title = f"{section.comparison}: IO efficiency"
    if not section.rows:
        return [title, f"absent: {section.why_not}", ""]
    names = header(section)
    legend = [f"col-{i} : {h}" for i, h in enumerate(names[1:], 1)]
    rows = [[*row_cells(r, _buffered(section))[1:], r.step] for r in section.rows]
    head = "\t".join(f"col-{i}" for i in range(1, len(names)))
    notes = [n[2:] for n in _notes(section)]
    return [title, *legend, "", head, *("\t".join(r) for r in rows), *notes, ""]


def _fio_json(f: FioFigures | None) -> shapes.BaselineFigures | None:
    if f is None:
        return None
    return {
        "iops": f.iops,
        "latency_us": f.latency_us,
        "user_us_per_read": f.user_us,
        "system_us_per_read": f.system_us,
        "device_us": f.device_us,
        "device_flag": f.device_flag,
        "device_iops": f.device_iops,
        "page_cache_hit_rate": f.page_cache_hit_rate,
    }


def _row_json(r: IoRow) -> shapes.IoRowJson:
    return {
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
        "buffered": r.buffered,
        "file_reads_per_op": r.file_reads_per_op,
        "page_cache_hit_rate": r.page_cache_hit_rate,
        "fio_page_cache_hit_rate": r.fio_page_cache_hit_rate,
        "no_efficiency": r.no_efficiency,
        "device_flag": r.device_flag,
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
            "device_flag": b.device_flag if b.absent is None else None,
        }
    return {
        "comparison": section.comparison,
        "baseline": baseline,
        "rows": [_row_json(r) for r in section.rows],
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


def _chart(section: IoSection, colours: dict[str, str]) -> str:
    """IO efficiency per column, measured against the model's; predicted against
    measured time per operation: of the rows that have them."""
    many = len({r.step for r in section.rows}) > 1
    points = [(f"{r.label} {r.step}" if many else r.label, r) for r in section.rows]
    efficiency = [
        svg.DotPair(name, r.efficiency, r.predicted_efficiency, colours.get(r.label, "#333"))
        for name, r in points
        if r.efficiency is not None and r.predicted_efficiency is not None
    ]
    latency = [
        svg.DotPair(name, r.measured_us, r.predicted_us, colours.get(r.label, "#333"))
        for name, r in points
        if r.predicted_us is not None
    ]
    chart = ""
    if efficiency:
        chart += svg.dot_pairs(efficiency, "IO efficiency (dot) and the model's (ring)", "vs fio")
    if latency:
        chart += svg.dot_pairs(latency, "µs per operation: measured (dot), predicted (ring)", "µs")
    return chart


def html(section: IoSection | None, colours: dict[str, str]) -> IoHtml | None:
    """The HTML page's section: the baseline's lines, the table, the chart, the rows
    without an efficiency and the absent steps."""
    if section is None:
        return None
    b = section.baseline
    legend = LEGEND + (" " + BUFFERED_LEGEND if _buffered(section) else "")
    return {
        "baseline": [ln[2:] if ln.startswith("- ") else ln for ln in baseline_lines(b) if ln]
        if b is not None and b.absent is None
        else [],
        "why_not": section.why_not,
        "legend": legend,
        "header": header(section),
        "rows": [row_cells(r, _buffered(section)) for r in section.rows],
        "chart": _chart(section, colours) if section.rows else "",
        "absent": [n[2:] for n in _notes(section)]
        + [f"{a.step}{f' ({a.label})' if a.label else ''}: {a.why}" for a in section.absent],
    }
