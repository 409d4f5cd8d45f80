"""The site's charts: inline SVG drawn with the reports' own plotting code
(report/svg.py), no script. A step's chart has a line per column over the lab's runs:
- a line is never drawn across a method boundary; the boundary is a dashed purple
  vertical line (BREAK_COLOUR), titled with what changed;
- a change point is a solid vertical line before the first run of the new level and a
  triangle on that run's point, red for slower and green for faster (CHANGE_COLOURS);
- every point links to its run's report.html, and its title (shown on hover) holds the
  run, build, commit and subject of a source build, host, level, and the column's
  verdict against the run's base with its ratio and interval.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from html import escape

from dbregress.report import svg
from dbregress.report.verdict_tables import small_text
from dbregress.site.model import Break, ChangeMark, Chart, Point

BREAK_COLOUR = "#6a3d9a"
CHANGE_COLOURS = {"slower": svg.VERDICT_COLOURS["slower"], "faster": svg.VERDICT_COLOURS["faster"]}
WHAT = {
    "time": ("QPS", "median QPS over the run's repeats (higher is better)"),
    "cost": ("est. cycles/op", "mean estimated cycles per operation over the run's counting "
             "replays (lower is better)"),
}  # fmt: skip


def _number(v: float) -> str:
    return f"{v:,.0f}" if abs(v) >= 100 else f"{v:.4g}"


def hover(p: Point, lane: str) -> str:
    """What a point's title says."""
    lines = [f"run {p.run_id} ({(p.started or '-').replace('T', ' ')[:16]})"]
    lines.append(f"build {p.build} [{p.config}]")
    if p.commit:
        lines.append(f"commit {p.commit[:12]} {p.subject or ''}".rstrip())
    lines.append(f"host {p.host}")
    lines.append(f"{WHAT[lane][0]} {_number(p.level)} over {p.samples} sample(s)")
    if p.left_out:
        lines.append(f"{p.left_out} repeat(s) left out: the host disturbed them")
    v = p.verdict
    if p.base:
        lines.append("the run's base column")
    elif v is None:
        lines.append("no verdict against the run's base (its verdicts.json lacks it)")
    elif v.ratio is not None:
        ci = f" [{v.ci[0]:.3f}, {v.ci[1]:.3f}]" if v.ci else ""
        if v.small and v.ci:
            ci = f" ({small_text(v.ratio, v.ci)})"
        lines.append(f"against the run's base: {v.shown} {v.ratio:.3f}{ci}")
    else:
        lines.append(f"against the run's base: {v.word}, {v.reason or 'no ratio'}")
    return "\n".join(lines)


def _dot(plot: svg.Plot, p: Point, colour: str, lane: str, prefix: str) -> str:
    x, y = plot.px(p.run), plot.clip_y(p.level)
    title = f"<title>{escape(hover(p, lane))}</title>"
    dot = f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3" fill="{colour}">{title}</circle>'
    if p.report is None:
        return dot
    return f'<a href="{escape(prefix + p.report)}">{dot}</a>'


def _triangle(plot: svg.Plot, p: Point, m: ChangeMark) -> str:
    x, y = plot.px(p.run), plot.clip_y(p.level)
    tip = 7 if m.word == "slower" else -7  # pointing down for slower, up for faster
    name = (
        f"change point, {m.column}: {m.word}; the new level over the old {m.ratio:.3f} "
        f"[{m.ci[0]:.3f}, {m.ci[1]:.3f}], from run {m.run_id}"
    )
    return (
        f'<path class="change" d="M{x - 7:.1f} {y - tip - 4:.1f}h14l-7 {tip * 2:.1f}z" '
        f'fill="{CHANGE_COLOURS[m.word]}"><title>{escape(name)}</title></path>'
    )


def _x_ticks(runs: Sequence[tuple[int, str]], lo: int, hi: int) -> list[tuple[float, str]]:
    shown = [(i, label) for i, label in runs if lo <= i <= hi]
    if not shown:
        return []
    every = max(1, math.ceil(len(shown) / 8))
    return [(float(i), label) for i, label in shown[::every]]


def _break_line(plot: svg.Plot, b: Break) -> None:
    x = round(plot.px((b.after + b.run) / 2))
    name = "method changed: " + "; ".join(b.what)
    plot.parts.append(
        f'<path class="method-break" d="M{x} {plot.top}V{plot.height - plot.bottom}" '
        f'stroke="{BREAK_COLOUR}" stroke-width="3" stroke-dasharray="8 5">'
        f"<title>{escape(name)}</title></path>"
        f'<text x="{x + 4}" y="{plot.top + 10}" fill="{BREAK_COLOUR}">method changed</text>'
    )


def _change_line(plot: svg.Plot, m: ChangeMark) -> None:
    x = round(plot.px(m.run - 0.5))
    plot.parts.append(
        f'<path d="M{x} {plot.top}V{plot.height - plot.bottom}" '
        f'stroke="{CHANGE_COLOURS[m.word]}" stroke-width="2"/>'
    )


def step_chart(
    chart: Chart,
    colours: dict[str, str],
    runs: Sequence[tuple[int, str]],
    prefix: str = "../",
    width: int = 940,
    height: int = 280,
) -> str:
    """One lane of one step over the lab's runs (x: the run's place, labelled by date)."""
    points = [p for line in chart.lines for piece in line.pieces for p in piece]
    title = f"{chart.lane} lane: {WHAT[chart.lane][0]}"
    if chart.host:
        title += f", host {chart.host}"
    if not points:
        return f"<p class=note>{escape(title)}: no samples.</p>"
    lo, hi = min(p.run for p in points), max(p.run for p in points)
    levels = [p.level for p in points]
    x_axis = svg.Axis(lo - 0.7, hi + 0.7)
    y_axis = svg.padded(min(levels), max(levels), share=0.12)
    plot = svg.Plot(width, height, x_axis, y_axis, margin=(24, 18, 40, 64), label=title)
    plot.title(title)
    yt = [(v, svg.si(v)) for v in svg.nice_ticks(y_axis.lo, y_axis.hi, 4)]
    plot.frame(_x_ticks(runs, lo, hi), yt, "runs, oldest first (UTC date)", WHAT[chart.lane][0])
    for b in chart.breaks:
        _break_line(plot, b)
    for m in chart.changes:
        _change_line(plot, m)
    dots: list[str] = []
    for line in chart.lines:
        colour = colours.get(line.column, svg.BASE_COLOUR)
        for piece in line.pieces:
            plot.line([(p.run, p.level) for p in piece], colour, 1.6, line.column)
            dots += [_dot(plot, p, colour, chart.lane, prefix) for p in piece]
    by = {(line.column, p.run): p for line in chart.lines for pc in line.pieces for p in pc}
    for m in chart.changes:
        if (m.column, m.run) in by:
            dots.append(_triangle(plot, by[(m.column, m.run)], m))
    plot.parts += dots
    return plot.svg()


def sparkline(
    values: Sequence[float | None], colour: str, name: str, width: int = 150, height: int = 30
) -> str:
    """A small line of a step's levels over the runs, no axes; a gap where a run has
    no value or the method changed (None)."""
    real = [v for v in values if v is not None]
    if len(real) < 1:
        return '<span class="note">-</span>'
    lo, hi = min(real), max(real)
    span = (hi - lo) or abs(hi) or 1.0
    n = max(len(values) - 1, 1)
    runs: list[list[str]] = [[]]
    for i, v in enumerate(values):
        if v is None:
            runs.append([])
            continue
        x = 2 + (width - 4) * i / n
        y = height - 3 - (height - 6) * (v - lo) / span
        runs[-1].append(f"{x:.1f},{y:.1f}")
    lines = "".join(
        f'<polyline points="{" ".join(r)}" fill="none" stroke="{colour}" stroke-width="1.3"/>'
        for r in runs
        if r
    )
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" class="spark" width="{width}" '
        f'height="{height}" viewBox="0 0 {width} {height}" role="img" aria-label="{escape(name)}">'
        f"<title>{escape(name)}</title>{lines}</svg>"
    )


def series_chart(
    title: str,
    columns: Sequence[str],
    rows: Sequence[tuple[str, Sequence[float | None]]],
    y_label: str,
) -> str:
    """A version series: x the columns in order, y relative to the first, a line per step,
    broken where a column has no value for it (never drawn across)."""
    colours = svg.column_colours(["", *[name for name, _ in rows]])
    lines = []
    for name, values in rows:
        piece: list[tuple[float, float]] = []
        for i, v in enumerate([*values, None]):
            if v is not None:
                piece.append((float(i), v))
            elif piece:
                lines.append(svg.Line(name, colours[name], piece))
                piece = []
    ticks = [(float(i), c) for i, c in enumerate(columns)]
    return svg.line_chart(
        lines, title, "", y_label, width=470, height=240, x_ticks=ticks,
        x_range=(-0.3, len(columns) - 0.7), y_from_zero=False,
    )  # fmt: skip
