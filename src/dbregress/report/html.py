"""The HTML report: one self-contained file (report.html) with inline SVG charts, inline
CSS and no script, so it opens offline and anywhere (docs/reports.md).

Per comparison: relative QPS coloured by verdict with its intervals, a ratio chart per
column, absolute Q, per step the throughput per interval and the latency percentile
curves of every column (one repeat each), and the per-operation metrics absolute and
relative. Then what a reader needs to reproduce the run: host, placement, builds,
configs and the lab file itself.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TypeAlias, TypedDict, cast

from jinja2 import Environment, PackageLoader, StrictUndefined
from markupsafe import Markup

from dbregress.analysis.compare import RunVerdicts
from dbregress.analysis.cost import CostComparison
from dbregress.analysis.groups import group_summaries
from dbregress.analysis.metrics import PER_OP, Metric
from dbregress.analysis.summary import Matrix
from dbregress.analysis.verdict import StepVerdict
from dbregress.records import JobId
from dbregress.report import changes, count_store, disclosure, io_tables, svg
from dbregress.report import verdict_tables as vt
from dbregress.report.changes import SeriesTable
from dbregress.report.io_tables import IoHtml
from dbregress.report.markdown import BENCHMARK_NAMES, WORSE_BETTER, fmt, shown_metrics
from dbregress.shapes.calibration import Calibration
from dbregress.shapes.replay import CostLaneRecord, ReplayRecord
from dbregress.shapes.run import RunJson
from dbregress.shapes.step_result import StepResultJson
from dbregress.store.run import RunData
from dbregress.store.series import (
    StepFiles,
    interval_rates,
    percentile_curve,
    read_histograms,
    step_index,
)

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


@dataclass
class StepCharts:
    step: str
    op: str
    throughput: Markup
    latency: Markup
    empty: bool  # no column had a series or a histogram for this step


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


class Reproduce(TypedDict):
    """What a reader needs to run this again, as the page lists it."""

    host: list[tuple[str, str]]
    placement: list[tuple[str, str]]
    run: list[tuple[str, str]]
    builds: list[list[str]]
    configs: list[list[str]]
    lab: str
    commands: list[str]


# A column's first measured repeat of a step: its job, its result and its files.
FirstRepeat: TypeAlias = tuple[str, StepResultJson, StepFiles]


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
    return TableCell(
        f"{c.ratio:.3f} {vt.QPS_MARKS.get(c.verdict, '?')}", ci, f"v-{c.verdict}", title
    )


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
            (s, lb): svg.RatioPoint(s, c.ratio, c.ci, c.verdict) for (lb, s), c in found.items()
        }
        title = f"Relative QPS vs {m.base}, every step and column"
        return [Markup(svg.ratio_heatmap(m.steps, m.labels[1:], cells, title))]
    out = []
    for lb in m.labels[1:]:
        points = []
        for s in m.steps:
            c = found.get((lb, s))
            if c is None:
                points.append(svg.RatioPoint(s, None, None, "undecided"))
            else:
                points.append(svg.RatioPoint(s, c.ratio, c.ci, c.verdict, c.reason))
        chart = svg.ratio_chart(points, f"{lb} vs {m.base}", v.policy.band)
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


class FirstRepeats:
    """For each (column, step): the job and result of the lowest-numbered measured
    repeat where the step is ok, and where its files are."""

    def __init__(self, data: RunData) -> None:
        self.path = data.path
        self.found: dict[tuple[str, str], tuple[int, str, StepResultJson]] = {}
        for job, results in data.steps.items():
            jid = JobId.of(job)
            if jid is None or jid.warmup:
                continue
            for r in results:
                key = (jid.label, str(r.get("step")))
                if r.get("status") == "ok" and jid.repeat < self.found.get(key, (1 << 62,))[0]:
                    self.found[key] = (jid.repeat, job, r)
        self.files: dict[str, dict[str, StepFiles]] = {}

    def get(self, label: str, step: str) -> FirstRepeat | None:
        hit = self.found.get((label, step))
        if hit is None:
            return None
        _, job, result = hit
        if job not in self.files:
            self.files[job] = step_index(self.path / job)
        files = self.files[job].get(step)
        return (job, result, files) if files is not None else None


@dataclass
class _StepLines:
    """One step's lines, one per column: Q over time and the latency percentiles, and
    what the charts' titles and shading take from the columns' results."""

    rates: list[svg.Line] = field(default_factory=list)
    curves: list[svg.Line] = field(default_factory=list)
    sliced: bool = False
    warmup: float = 0.0
    op: str = ""
    unit: str = ""

    def add(self, label: str, base: bool, colour: str, found: FirstRepeat) -> None:
        """A column's lines from its first measured repeat of the step."""
        job, result, files = found
        self.op, self.unit = result["q"]["op"], result["q"]["unit"]
        window = result.get("window")
        self.warmup = max(self.warmup, float((window.get("warmup_s") if window else 0) or 0))
        width = 2.2 if base else 1.3
        name = f"{label} ({job.rpartition('/')[2]})"
        if result.get("slices"):  # interleaved: per slice, in the side's own time
            self.sliced = True
            steps = [
                (t - secs, t, q_all / secs)
                for t, secs, _q, q_all in result["slices"]
                if secs > 0  # a last slice can be empty
            ]
        else:
            unit = "rows" if self.unit == "rows" else "ops"
            steps = interval_rates(files.csv, self.op, unit)
        points = [pt for a, b, rate in steps for pt in ((a, rate), (b, rate))]
        self.rates.append(svg.Line(name, colour, points, width))
        encoded = read_histograms(files.hlog).get(self.op)
        curve = percentile_curve(encoded) if encoded else None
        if curve:
            pts = [(svg.nines(p), v) for p, v in curve]
            self.curves.append(svg.Line(name, colour, pts, width))

    def charts(self, step: str) -> StepCharts:
        """The step's two charts: Q per interval (per slice, in turns, when interleaved)
        with the warm-up shaded, and the latency percentile curves."""
        shade = (0.0, self.warmup, "warm-up") if self.warmup > 0 else None
        per = "rows/s" if self.unit == "rows" else "ops/s"
        end = max((x for series in self.rates for x, _ in series.points), default=1.0)
        throughput = svg.line_chart(
            self.rates,
            f"{step}: {per} per slice, in turns" if self.sliced else f"{step}: {per} per interval",
            "seconds",
            per,
            width=360,
            height=210,
            x_range=(0.0, end),
            shade_x=shade,
        )
        latency = svg.line_chart(
            self.curves,
            f"{step}: latency percentiles",
            "percentile (%)",
            "µs",
            width=360,
            height=210,
            log_y=True,
            x_ticks=svg.NINES_TICKS,
            x_range=(0.0, 5.0),
            y_from_zero=False,
        )
        empty = not any(x.points for x in self.rates) and not self.curves
        return StepCharts(step, self.op, Markup(throughput), Markup(latency), empty)


def step_charts(data: RunData, m: Matrix, colours: dict[str, str]) -> list[StepCharts]:
    """Per step: Q per interval and the latency percentiles of the step's main op, one
    line per column from its first measured repeat. An interleaved run draws Q per slice
    instead, each side in its own time: the sides' slices of one turn line up, so a
    drift of the host shows on every line at once."""
    first = FirstRepeats(data)
    out = []
    for s in m.steps:
        lines = _StepLines()
        for lb in m.labels:
            found = first.get(lb, s)
            if found is not None:
                lines.add(lb, lb == m.base, colours[lb], found)
        out.append(lines.charts(s))
    # a run without series or histograms at all (imported results): no empty charts
    return [] if all(c.empty for c in out) else out


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


def _text(value: object) -> str:
    if value is None:
        return "-"
    if isinstance(value, (dict, list)):
        return json.dumps(value, sort_keys=True)
    return str(value)


def _repeats(value: object) -> str | None:
    if isinstance(value, dict) and "min" in value:
        low, high = value["min"], value.get("max", value["min"])
        return f"{low}..{high} (more rounds while a step is undecided)" if high != low else str(low)
    return None if value is None else _text(value)


def num(value: float | None) -> str:
    """A table figure: as in report.md, but a small non-zero value keeps two significant
    digits instead of showing 0.00."""
    if value is not None and value != 0 and abs(value) < 0.01 and math.isfinite(value):
        return f"{value:.2g}"
    return fmt(value)


def _settings(settings: Mapping[str, object]) -> str:
    """An engine's or a job's settings, whatever they hold, as name=value."""
    return ", ".join(f"{k}={v}" for k, v in settings.items()) or "-"


def reproduce(data: RunData) -> Reproduce:
    """What a reader needs to run this again: host, placement, builds, configs, lab."""
    record = _run(data)
    lab = data.path / "lab.toml"
    try:
        lab_text = lab.read_text()
    except OSError:
        lab_text = "(lab.toml is missing from the run folder)"
    builds = []
    for c in record["columns"]:
        b = record.get("builds", {}).get(c["label"], {})
        rest = {k: val for k, val in b.items() if k not in ("spec", "version_string")}
        builds.append([c["label"], c["build"], b.get("version_string", "?"), _settings(rest)])
    configs = []
    for c in record["columns"]:
        jobs = [
            j
            for name, j in sorted(record.get("jobs", {}).items())
            if (jid := JobId.of(name)) is not None and jid.label == c["label"]
        ]
        # a job's entry holds its settings and sizes, keys shapes/run.py does not name yet
        first = cast(Mapping[str, Mapping[str, object]], jobs[0] if jobs else {})
        configs.append(
            [
                c["label"] + (" (base)" if c["base"] else ""),
                c["comparison"],
                c["config"],
                _settings(c.get("settings") or {}),
                _settings(first.get("settings") or {}),
                _settings(first.get("sizes") or {}),
            ]
        )
    run_facts = [
        ("run id", record["run_id"]),
        ("status", record["status"]),
        ("started", record.get("started_at")),
        ("finished", record.get("finished_at")),
        ("resumed", record.get("resumed_at")),
        ("repeats", _repeats(record.get("repeats"))),
        ("order of columns in a round", record.get("order")),
        ("seed", record.get("seed")),
        ("warm-up job", record.get("warmup_job")),
        ("verdict policy", record.get("verdict_policy")),
        ("method", record.get("method_identity")),
        ("page cache drops", record.get("page_cache")),
        ("injected slowdowns", record.get("inject_slowdown") or None),
    ]
    specs = sorted({c["build"] for c in record["columns"]})
    return {
        "host": [(k, _text(val)) for k, val in record.get("host", {}).items()],
        "placement": [(k, _text(val)) for k, val in record["placement"].items()],
        "run": [(k, _text(val)) for k, val in run_facts if val is not None],
        "builds": builds,
        "configs": configs,
        "lab": lab_text,
        "commands": [f"dbregress fetch {' '.join(specs)}", "dbregress run lab.toml"],
    }


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
