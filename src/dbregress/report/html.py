"""The HTML report: one self-contained file (report.html) with inline SVG charts, inline
CSS and no script, so it opens offline and anywhere (docs/reports.md).

Per comparison: relative QPS coloured by verdict with its intervals, a ratio chart per
column, absolute Q, per step the throughput per interval and the latency percentile
curves of every column (one repeat each), and the per-operation metrics absolute and
relative. Then what a reader needs to reproduce the run: host, placement, builds,
configs and the lab file itself. The charts per step are made in step_charts.py, the
reproduce section in reproduce.py, the SVG in svg.py and ratio_svg.py.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TypedDict

from jinja2 import Environment, PackageLoader, StrictUndefined
from markupsafe import Markup

from dbregress.analysis.compare import RunVerdicts
from dbregress.analysis.cost import CostComparison
from dbregress.analysis.groups import group_summaries
from dbregress.analysis.metrics import PER_OP, Metric
from dbregress.analysis.summary import Matrix
from dbregress.analysis.verdict import StepVerdict
from dbregress.report import changes, count_store, disclosure, io_tables, ratio_svg, svg
from dbregress.report import verdict_tables as vt
from dbregress.report.changes import SeriesTable
from dbregress.report.io_tables import IoHtml
from dbregress.report.markdown import BENCHMARK_NAMES, WORSE_BETTER, fmt, shown_metrics
from dbregress.report.reproduce import reproduce
from dbregress.report.step_charts import StepCharts, step_charts
from dbregress.shapes.calibration import Calibration
from dbregress.shapes.replay import CostLaneRecord, ReplayRecord
from dbregress.shapes.run import RunJson
from dbregress.store.run import RunData

# The per-operation costs the HTML shows (the CSV export has every one).
HTML_METRICS = (
    "server_cpu_us",
    "client_cpu_us",
    "cs",
    "rkb",
    "wkb",
    "server_instructions",
    "server_cycles",
)
# With more columns than this, the long per-op tables start folded.
OPEN_UP_TO = 8
# Up to this many non-base columns, a ratio chart each; beyond, one heat map.
SMALL_MULTIPLES_UP_TO = 6


@dataclass
class TableCell:
    """One table cell: text, an optional second line, a CSS class and a hover title."""

    text: str
    sub: str = ""
    css: str = ""
    title: str = ""


@dataclass
class Row:
    head: str
    cells: list[TableCell] = field(default_factory=list)
    note: str = ""


class MetricTable(TypedDict):
    """One per-operation metric's table: each column's value, then each ratio."""

    metric: Metric
    rows: list[Row]


class ComparisonPage(TypedDict):
    """What the page shows of one comparison (templates/report.html.j2)."""

    name: str
    id: str
    benchmark: str
    base: str
    labels: list[str]
    others: list[str]
    counts: str
    relative: list[Row]
    lanes: list[Row]
    lanes_counts: str
    cost_band: float
    counting: list[str]  # what the counting replays changed: a sentence, then its items
    # which replays were taken from the count store: a sentence, then its items
    count_store: list[str]
    ratio_charts: list[Markup]
    series: list[SeriesTable]
    series_legend: str
    series_charts: list[Markup]
    series_colours: dict[str, str]
    throughput: list[Row]
    colours: list[tuple[str, str]]
    steps: list[StepCharts]
    metrics: list[MetricTable]
    groups: list[list[str]]
    io: IoHtml | None
    open: bool
    heatmap: bool


def _env() -> Environment:
    return Environment(
        loader=PackageLoader("dbregress.report", "templates"),
        autoescape=True,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )


def _ci(c: StepVerdict) -> str:
    return f"[{c.ci[0]:.2f}, {c.ci[1]:.2f}]" if c.ci is not None else ""


def _ratio(c: StepVerdict | None, marks: dict[str, str], css: str) -> TableCell:
    if c is None or c.ratio is None:
        return TableCell("-")
    title = f"{c.verdict}: {c.reason}; repeats {c.n_base}/{c.n_other}"
    if c.verdict == "undecided" and c.more_repeats is not None:
        title += f"; about {c.more_repeats} more per side would probably decide it"
    ratio = "inf" if math.isinf(c.ratio) else f"{c.ratio:.2f}"
    return TableCell(f"{ratio} {marks.get(c.verdict, '?')}", _ci(c), css, title)


def qps_ratio_cell(c: StepVerdict | None) -> TableCell:
    return _ratio(c, vt.QPS_MARKS, f"v-{c.verdict}" if c else "")


def metric_ratio_cell(c: StepVerdict | None, mt: Metric) -> TableCell:
    if c is None:
        return TableCell("-")
    worse = (c.verdict == "higher") == (mt.better == "lower")
    effect = "worse" if worse else "better"
    marks = {
        "higher": WORSE_BETTER[effect],
        "lower": WORSE_BETTER[effect],
        "same": "=",
        "undecided": "?",
    }
    css = f"v-{'slower' if worse else 'faster'}" if c.verdict in ("higher", "lower") else ""
    return _ratio(c, marks, css or f"v-{c.verdict}")


def relative_rows(m: Matrix, v: RunVerdicts) -> list[Row]:
    found = v.for_comparison(m.comparison)
    return [Row(s, [qps_ratio_cell(found.get((lb, s))) for lb in m.labels[1:]]) for s in m.steps]


def cost_cell(c: CostComparison | None) -> TableCell:
    if c is None or c.ratio is None:
        return TableCell("-")
    title = f"{c.verdict}: {c.reason}; counting replays {c.replays[0]}/{c.replays[1]}"
    ci = f"[{c.ci[0]:.3f}, {c.ci[1]:.3f}]" if c.ci is not None else ""
    text = f"{c.ratio:.3f} {vt.QPS_MARKS.get(c.verdict, '?')}"
    if c.small and c.ci is not None:
        return TableCell(f"{text} · small", vt.small_text(c.ratio, c.ci), "v-small", title)
    return TableCell(text, ci, f"v-{c.verdict}", title)


def lanes_rows(m: Matrix, v: RunVerdicts) -> list[Row]:
    """Per step and column: the time lane's QPS ratio, the cost lane's estimated cycles
    and instructions per operation, and the reading of the two together."""
    if v.cost is None:
        return []
    return [
        Row(s, [TableCell(lb), qps_ratio_cell(t), cost_cell(c), cost_cell(i)], vt.reading(t, c))
        for s, lb, t, c, i in vt.lane_pairs(m, v)
    ]


def ratio_charts(m: Matrix, v: RunVerdicts) -> list[Markup]:
    """One chart per non-base column (small multiples); with many columns, one heat map
    of every ratio instead."""
    found = v.for_comparison(m.comparison)
    if len(m.labels) - 1 > SMALL_MULTIPLES_UP_TO:
        cells = {
            (s, lb): ratio_svg.RatioPoint(s, c.ratio, c.ci, c.verdict)
            for (lb, s), c in found.items()
        }
        title = f"Relative QPS vs {m.base}, every step and column"
        return [Markup(ratio_svg.ratio_heatmap(m.steps, m.labels[1:], cells, title))]
    out = []
    for lb in m.labels[1:]:
        points = []
        for s in m.steps:
            c = found.get((lb, s))
            if c is None:
                points.append(ratio_svg.RatioPoint(s, None, None, "undecided"))
            else:
                points.append(ratio_svg.RatioPoint(s, c.ratio, c.ci, c.verdict, c.reason))
        chart = ratio_svg.ratio_chart(points, f"{lb} vs {m.base}", v.policy.band)
        out.append(Markup(chart))
    return out


def throughput_rows(m: Matrix) -> list[Row]:
    rows = []
    for s in m.steps:
        cells = []
        for lb in m.labels:
            c = m.cell(lb, s)
            if c.status != "ok":
                cells.append(TableCell(c.status, css="v-missing", title=c.error[:300]))
                continue
            failed = c.sla is not None and not c.sla["ok"]
            title = f"median of {c.repeats} repeat(s)"
            if failed and c.sla is not None:
                title += (
                    f"; failed its SLA: {fmt(c.sla['achieved_rows_per_s'])} of "
                    f"{fmt(c.sla['target_rows_per_s'])} rows/s"
                )
            cells.append(TableCell(fmt(c.qps) + (" †" if failed else ""), title=title))
        rows.append(Row(s, cells, m.cell(m.base, s).q_unit or "-"))
    return rows


def metric_tables(m: Matrix, v: RunVerdicts) -> list[MetricTable]:
    tables: list[MetricTable] = []
    shown = {mt.key for mt in shown_metrics(m)}
    for mt in PER_OP:
        if mt.key not in HTML_METRICS or mt.key not in shown:
            continue
        verdicts = v.metrics.get(mt.key, {})
        rows = []
        for s in m.steps:
            cells = []
            for lb in m.labels:
                c = m.cell(lb, s)
                cells.append(TableCell(num(c.per_op.get(mt.key)) if c.status == "ok" else c.status))
            for lb in m.labels[1:]:
                cells.append(metric_ratio_cell(verdicts.get((m.comparison, lb, s)), mt))
            rows.append(Row(s, cells))
        tables.append({"metric": mt, "rows": rows})
    return tables


def group_rows(m: Matrix) -> list[list[str]]:
    return [
        [
            g.group,
            g.label,
            str(g.count),
            *(fmt(x, 2) for x in (g.average, g.median, g.minimum, g.maximum)),
            fmt(g.stddev, 3),
        ]
        for g in group_summaries(m)
    ]


def counting(record: RunJson, comparison: str, lane: CostLaneRecord | None) -> list[str]:
    """What the comparison's counting replays changed (report/disclosure.py): the
    sentence, then one item a line."""
    lines = [
        ln for ln in disclosure.markdown(disclosure.disclosure(lane, record, comparison)) if ln
    ]
    return [ln.removeprefix("- ").replace("`", "") for ln in lines]


def comparison(
    data: RunData,
    m: Matrix,
    v: RunVerdicts,
    lane: CostLaneRecord | None = None,
    stored: count_store.StoreReport | None = None,
) -> ComparisonPage:
    colours = svg.column_colours(m.labels)
    found = v.for_comparison(m.comparison)
    return {
        "name": m.comparison,
        "id": "cmp-" + "".join(ch if ch.isalnum() else "-" for ch in m.comparison),
        "benchmark": BENCHMARK_NAMES.get(m.benchmark, m.benchmark),
        "base": m.base,
        "labels": m.labels,
        "others": m.labels[1:],
        "counts": vt.counts_line(found),
        "relative": relative_rows(m, v),
        "lanes": lanes_rows(m, v),
        "lanes_counts": vt.lanes_counts(v, m.comparison),
        "cost_band": v.policy.cost_band,
        "counting": counting(_run(data), m.comparison, lane) if v.cost is not None else [],
        "count_store": stored.lines(m.comparison) if stored is not None else [],
        "ratio_charts": ratio_charts(m, v),
        "series": changes.html_tables(m, v),
        "series_legend": changes.legend(m, v),
        "series_charts": changes.charts(m, v),
        "series_colours": changes.LANE_COLOURS,
        "throughput": throughput_rows(m),
        "colours": [(lb, colours[lb]) for lb in m.labels],
        "steps": step_charts(data, m, colours),
        "metrics": metric_tables(m, v),
        "groups": group_rows(m),
        "io": io_tables.html(v.io_for(m.comparison), colours),
        "open": len(m.labels) <= OPEN_UP_TO,
        "heatmap": len(m.labels) - 1 > SMALL_MULTIPLES_UP_TO,
    }


def _run(data: RunData) -> RunJson:
    """The run's run.json, as read and checked against its schema (store/run.py)."""
    return data.record


def num(value: float | None) -> str:
    """A table figure: as in report.md, but a small non-zero value keeps two significant
    digits instead of showing 0.00."""
    if value is not None and value != 0 and abs(value) < 0.01 and math.isfinite(value):
        return f"{value:.2g}"
    return fmt(value)


def render(
    data: RunData,
    ms: list[Matrix],
    v: RunVerdicts,
    calibration: Calibration | None = None,
    lane: CostLaneRecord | None = None,
    replays: Sequence[ReplayRecord] | None = None,
) -> str:
    """The page; `calibration`: the host's, `lane`: the run's cost/lane.json, `replays`:
    its counting replays (which were taken from the count store; None: not told), typed
    or as read (store/calibration.py, store/replays.py)."""
    record = _run(data)
    stored = count_store.summarize(record, v, lane, replays)
    host = record.get("host", {})
    p = record["placement"]
    results = [r for rs in data.steps.values() for r in rs]
    page = {
        "title": f"dbregress report: {record['lab']} ({record['run_id']})",
        "record": record,
        "summary": (
            f"Status: {record['status']}. Host: {host.get('cpu_model', '?')}, "
            f"{host.get('cpu_count', host.get('cores', '?'))} CPUs, "
            f"kernel {host.get('kernel', '?')}. Placement: {p['mode']} (server CPUs "
            f"{p['server_cpus']}, loadgen CPUs {p['client_cpus']}). "
            + vt.lanes_line(record, v).replace("`", "")
        ),
        "policy": vt.policy_line(v),
        "legend": vt.LEGEND.format(ci=1 - v.policy.alpha, tost=1 - 2 * v.policy.alpha).replace(
            "`", ""
        ),
        "band": v.policy.band,
        "comparisons": [comparison(data, m, v, lane, stored) for m in ms],
        "failures": [
            [f["where"], f["type"], f["message"].splitlines()[0][:300] if f["message"] else ""]
            for f in record.get("failures", [])
        ],
        "disturbed": [[d.column, str(d.repeat), d.step, d.why] for d in v.disturbed],
        "noise": vt.noise_line(results),
        "calibration": calibration,
        "calibration_rows": vt.calibration_rows(calibration) if calibration else [],
        "calibration_probes": vt.probe_lines(calibration) if calibration else [],
        "damaged": data.damaged,
        "reproduce": reproduce(data),
        "verdict_colours": svg.VERDICT_COLOURS,
    }
    return _env().get_template("report.html.j2").render(**page)
