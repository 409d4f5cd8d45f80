"""The HTML report's charts per step: Q per interval (per slice, in turns, when
interleaved) with the warm-up shaded, and the latency percentile curves of the step's main
op, one line per column from its first measured repeat.

They are apart from html.py because they alone read the run's files beyond its results
(each repeat's interval series and latency histograms, store/series.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TypeAlias

from markupsafe import Markup

from dbregress.analysis.summary import Matrix
from dbregress.model.records import JobId
from dbregress.report import svg
from dbregress.shapes.step_result import StepResultJson
from dbregress.store.run import RunData
from dbregress.store.series import (
    StepFiles,
    interval_rates,
    percentile_curve,
    read_histograms,
    step_index,
)


@dataclass
class StepCharts:
    step: str
    op: str
    throughput: Markup
    latency: Markup
    empty: bool  # no column had a series or a histogram for this step


# A column's first measured repeat of a step: its job, its result and its files.
FirstRepeat: TypeAlias = tuple[str, StepResultJson, StepFiles]


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
