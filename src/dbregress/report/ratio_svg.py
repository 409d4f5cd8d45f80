"""The relative-QPS charts of the HTML report, as inline SVG: a dot per step with its
interval, coloured by verdict, over the equivalence band (a chart per column), and the
heat map of every (step, column) ratio at once for labs with many columns.

They are apart from svg.py, which holds the drawing they share (axes, ticks, the Plot)
and the line and dot charts, because they draw verdicts rather than series.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

from dbregress.report.svg import (
    AXIS,
    FONT,
    INK,
    VERDICT_COLOURS,
    Axis,
    Plot,
    _n,
    log_ticks,
    nice_ticks,
    padded,
)

BAND_FILL = "#e8f0fb"


@dataclass(frozen=True)
class RatioPoint:
    step: str
    ratio: float | None
    ci: tuple[float, float] | None
    verdict: str
    note: str = ""


def ratio_chart(
    points: Sequence[RatioPoint], title: str, band: float, width: int | None = None
) -> str:
    """Relative QPS per step with its interval: a dot per step coloured by verdict, the
    equivalence band 1 ± band shaded, a line at 1.0. A log axis when the ratios span more
    than a factor of three; values beyond the axis show as a triangle at its edge."""
    n = max(len(points), 1)
    pitch = min(64.0, max(15.0, 560 / n))
    longest = max((len(p.step) for p in points), default=4)
    rotate = longest * 6.0 > pitch - 4  # labels that would run into each other
    bottom = int(min(longest, 28) * 5.2 + 16) if rotate else 32
    width = width or int(60 + 14 + pitch * n)
    values = [1.0 - band, 1.0 + band]
    for p in points:
        for v in (p.ratio, *(p.ci or ())):
            if v is not None and math.isfinite(v) and v > 0:
                values.append(v)
    lo, hi = min(values), max(values)
    log = hi / lo > 3
    if log:  # keep extreme outliers from flattening the rest
        lo, hi = max(lo, 1 / 16), min(hi, 16.0)
    y_axis = padded(lo, hi, log=log, share=0.06)
    plot = Plot(width, 190 + bottom - 34, Axis(-0.5, n - 0.5), y_axis, (22, 14, bottom, 52), title)
    plot.title(title)
    plot.y_band(1.0 - band, 1.0 + band, BAND_FILL)
    if log:
        ticks = [2.0**k for k in range(-6, 7) if y_axis.lo <= 2.0**k <= y_axis.hi]
        if len(ticks) < 3:
            ticks = log_ticks(y_axis.lo, y_axis.hi)
    else:
        ticks = nice_ticks(y_axis.lo, y_axis.hi, 5)
    plot.frame(
        [(i, p.step) for i, p in enumerate(points)],
        [(v, f"{v:.3g}") for v in ticks],
        "",
        "relative QPS",
        rotate_x=rotate,
    )
    plot.hline(1.0, "#444", "4 3")
    for i, p in enumerate(points):
        if p.ratio is None:
            continue
        colour = VERDICT_COLOURS.get(p.verdict, INK)
        lo_v, hi_v = p.ci if p.ci is not None else (math.nan, math.nan)
        ci = f" [{lo_v:.2f}, {hi_v:.2f}]" if p.ci is not None else ""
        name = f"{p.step}: {p.ratio:.3f}{ci} {p.verdict}{'; ' + p.note if p.note else ''}"
        plot.interval(i, lo_v, hi_v, p.ratio, colour, name)
    return plot.svg()


def ratio_colour(ratio: float | None, scale: float = 2.0) -> str:
    """A diverging fill for a ratio: red below 1 (slower), blue above (faster), white at
    1, full strength at 1/scale and scale (log scale); grey when there is none."""
    if ratio is None or not ratio > 0:
        return "#eeeeee"
    t = max(-1.0, min(1.0, math.log(ratio) / math.log(scale))) if math.isfinite(ratio) else 1.0
    hot, cold = (202, 48, 36), (33, 102, 172)
    r, g, b = hot if t < 0 else cold
    a = abs(t) ** 0.7
    return f"rgb({255 + (r - 255) * a:.0f},{255 + (g - 255) * a:.0f},{255 + (b - 255) * a:.0f})"


def _heatmap_cell(
    step: str, col: str, p: RatioPoint | None, box: tuple[float, float, float, float]
) -> list[str]:
    """One heat map cell at (x, y, width, height): filled by its ratio, outlined when
    decided slower or faster, a dot when undecided, its figures on hover."""
    x, y, cell_w, cell_h = box
    ratio = p.ratio if p is not None else None
    name = f"{step}, {col}: no verdict"
    if p is not None and ratio is not None:
        ci = f" [{p.ci[0]:.2f}, {p.ci[1]:.2f}]" if p.ci is not None else ""
        name = f"{step}, {col}: {ratio:.3f}{ci} {p.verdict}"
    decided = p is not None and p.verdict in ("slower", "faster")
    stroke = ' stroke="#111" stroke-width="1.6"' if decided else ' stroke="#fff"'
    out = [
        f'<rect x="{_n(x)}" y="{_n(y)}" width="{_n(cell_w)}" height="{_n(cell_h)}" '
        f'fill="{ratio_colour(ratio)}"{stroke}><title>{escape(name)}</title></rect>'
    ]
    if p is not None and p.verdict == "undecided" and ratio is not None:
        out.append(
            f'<circle cx="{_n(x + cell_w / 2)}" cy="{_n(y + cell_h / 2)}" r="1.6" fill="#555"/>'
        )
    return out


def _heatmap_key(left: int, ky: float) -> list[str]:
    """The heat map's colour key below its rows: a swatch per ratio, then the legend."""
    out = []
    for k, r in enumerate((0.5, 0.67, 0.8, 0.9, 1.0, 1.11, 1.25, 1.5, 2.0)):
        kx = left + k * 34
        out.append(
            f'<rect x="{kx}" y="{ky}" width="32" height="10" fill="{ratio_colour(r)}" '
            f'stroke="#ccc"/><text x="{kx + 16}" y="{ky + 21}" text-anchor="middle">{r:g}</text>'
        )
    out.append(
        f'<text x="{left + 9 * 34 + 8}" y="{ky + 9}" fill="{AXIS}">relative QPS; outlined: '
        "slower or faster beyond chance; dot: undecided</text>"
    )
    return out


def ratio_heatmap(
    steps: Sequence[str],
    columns: Sequence[str],
    cells: dict[tuple[str, str], RatioPoint],
    title: str,
) -> str:
    """Every (step, column) ratio at once, for labs with many columns: a row per step, a
    column per column, filled by the ratio (red slower, blue faster, white 1.0); a dark
    outline marks a decided slower or faster verdict, a dot an undecided one. Hover a
    cell for its figures."""
    cell_w = max(16.0, min(44.0, 900 / max(len(columns), 1)))
    cell_h = 16.0
    left = int(min(max((len(s) for s in steps), default=4), 30) * 6.2 + 12)
    top = int(min(max((len(c) for c in columns), default=4), 24) * 4.6 + 34)
    width = int(left + cell_w * len(columns) + 16)
    height = int(top + cell_h * len(steps) + 40)
    out = [
        f'<text x="4" y="14" font-size="12" font-weight="600" fill="{INK}">{escape(title)}</text>'
    ]
    for j, col in enumerate(columns):
        x = left + cell_w * (j + 0.5)
        out.append(
            f'<text transform="translate({_n(x + 3)},{top - 5}) rotate(-55)">{escape(col)}</text>'
        )
    for i, step in enumerate(steps):
        y = top + cell_h * i
        out.append(
            f'<text x="{left - 5}" y="{_n(y + cell_h - 4.5)}" text-anchor="end">'
            f"{escape(step)}</text>"
        )
        for j, col in enumerate(columns):
            box = (left + cell_w * j, y, cell_w, cell_h)
            out += _heatmap_cell(step, col, cells.get((step, col)), box)
    out += _heatmap_key(left, top + cell_h * len(steps) + 14)
    head = (
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart heatmap" role="img" '
        f'aria-label="{escape(title)}" viewBox="0 0 {width} {height}" width="{width}" '
        f'height="{height}" font-size="10.5" style="{FONT}" fill="{INK}">'
    )
    return head + "".join(out) + "</svg>"
