"""Small inline SVG charts for the HTML report, written directly (no plotting library):
the drawing every chart shares (axes, ticks, colours, the Plot), line charts on linear or
log axes, and measured-beside-model dot charts; the ratio-per-step dot charts with error
bars and the ratio heat map are in ratio_svg.py.

Every chart is a complete `<svg>` element with a viewBox, so the page scales it; text is
real text (searchable, a few bytes), coordinates are rounded to 0.1 px, and there is no
script. docs/reports.md says why this is written here rather than with a library.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

FONT = "font-family:system-ui,'DejaVu Sans',sans-serif"
GRID = "#e3e3e3"
AXIS = "#777"
INK = "#333"
# Verdict colours (charts); the report's CSS uses lighter tints of the same hues.
VERDICT_COLOURS = {
    "slower": "#c0392b",
    "faster": "#1e8449",
    "same": "#5d6d7e",
    "undecided": "#b9770e",
}
# Column colours: the base is near-black; the others take these, then evenly spaced hues.
BASE_COLOUR = "#222222"
PALETTE = (
    "#1f77b4",
    "#ff7f0e",
    "#2ca02c",
    "#d62728",
    "#9467bd",
    "#8c564b",
    "#e377c2",
    "#bcbd22",
    "#17becf",
)


def column_colours(labels: Sequence[str]) -> dict[str, str]:
    """A colour per column, the base (first) near-black; stable for a given order."""
    out = {}
    others = labels[1:]
    for i, label in enumerate(others):
        if len(others) <= len(PALETTE):
            out[label] = PALETTE[i]
        else:  # many columns: hues around the wheel, alternating lightness
            hue = (i * 360 / len(others)) % 360
            light = 38 if i % 2 == 0 else 55
            out[label] = f"hsl({hue:.0f},70%,{light}%)"
    if labels:
        out[labels[0]] = BASE_COLOUR
    return out


def _n(v: float) -> str:
    """A coordinate, to 0.1 px, without a trailing .0."""
    text = f"{v:.1f}"
    return text[:-2] if text.endswith(".0") else text


def si(v: float) -> str:
    """A short axis label: 950, 1.5k, 12k, 3.4M; small values keep their decimals."""
    a = abs(v)
    if a >= 1e9:
        return f"{v / 1e9:.3g}G"
    if a >= 1e6:
        return f"{v / 1e6:.3g}M"
    if a >= 1e4:
        return f"{v / 1e3:.3g}k"
    if a >= 1 or a == 0:
        return f"{v:.4g}"
    return f"{v:.2g}"


def nice_ticks(lo: float, hi: float, count: int = 5) -> list[float]:
    """About `count` round tick values covering [lo, hi] (1, 2, 2.5 or 5 times 10^k)."""
    if not (math.isfinite(lo) and math.isfinite(hi)) or hi <= lo:
        return [lo]
    raw = (hi - lo) / max(count, 1)
    mag = 10 ** math.floor(math.log10(raw))
    step = next((m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw), 10 * mag)
    first = math.ceil(lo / step - 1e-9) * step
    ticks = []
    v = first
    while v <= hi + step * 1e-9:
        ticks.append(round(v, 12))
        v += step
    return ticks


def log_ticks(lo: float, hi: float) -> list[float]:
    """Ticks on a log axis over [lo, hi] (lo > 0): the powers of ten inside, with 2 and
    5 times them when the range spans less than three decades."""
    if lo <= 0 or hi <= lo:
        return [hi]
    first, last = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
    mults = (1,) if last - first > 3 else (1, 2, 5)
    ticks = [
        m * 10.0**e
        for e in range(first, last + 1)
        for m in mults
        if lo * (1 - 1e-9) <= m * 10.0**e <= hi * (1 + 1e-9)
    ]
    return ticks or [lo, hi]


@dataclass(frozen=True)
class Axis:
    lo: float
    hi: float
    log: bool = False

    def frac(self, v: float) -> float:
        """Where v lies along the axis, 0 at lo and 1 at hi (outside when v is)."""
        if self.log:
            lo, hi = math.log10(self.lo), math.log10(self.hi)
            v = math.log10(max(v, self.lo * 1e-3))
        else:
            lo, hi = self.lo, self.hi
        return 0.5 if hi == lo else (v - lo) / (hi - lo)


def padded(lo: float, hi: float, log: bool = False, share: float = 0.05) -> Axis:
    """An axis a little wider than [lo, hi]."""
    if log:
        lo, hi = max(lo, 1e-9), max(hi, lo * 1.0001, 1e-9)
        if hi / lo < 1.5:  # a flat series: show at least a factor of 3
            mid = math.sqrt(lo * hi)
            return Axis(mid / 1.8, mid * 1.8, True)
        f = (hi / lo) ** share
        return Axis(lo / f, hi * f, True)
    if hi <= lo:
        lo, hi = lo - 0.5 if lo else 0.0, hi + 0.5 if hi else 1.0
    pad = (hi - lo) * share
    return Axis(lo - pad, hi + pad)


class Plot:
    """One chart: a plotting area inside margins, drawn into a list of SVG elements."""

    def __init__(
        self,
        width: int,
        height: int,
        x: Axis,
        y: Axis,
        margin: tuple[int, int, int, int] = (22, 18, 34, 52),  # top, right, bottom, left
        label: str = "",
    ) -> None:
        self.width, self.height, self.x, self.y = width, height, x, y
        self.top, self.right, self.bottom, self.left = margin
        self.label = label
        self.parts: list[str] = []

    def px(self, v: float) -> float:
        return self.left + self.x.frac(v) * (self.width - self.left - self.right)

    def py(self, v: float) -> float:
        return self.height - self.bottom - self.y.frac(v) * (self.height - self.top - self.bottom)

    def clip_y(self, v: float) -> float:
        return min(max(self.py(v), self.top), self.height - self.bottom)

    def title(self, text: str) -> None:
        self.parts.append(
            f'<text x="{self.left}" y="14" font-size="12" font-weight="600" '
            f'fill="{INK}">{escape(text)}</text>'
        )

    def frame(
        self,
        x_ticks: Sequence[tuple[float, str]],
        y_ticks: Sequence[tuple[float, str]],
        x_label: str = "",
        y_label: str = "",
        rotate_x: bool = False,
    ) -> None:
        """Grid lines at the y ticks, tick labels, the axes and their labels."""
        x0, x1 = self.left, self.width - self.right
        y0, y1 = self.top, self.height - self.bottom
        out = self.parts
        for v, text in y_ticks:
            y = self.py(v)
            if y0 - 0.5 <= y <= y1 + 0.5:
                out.append(f'<path d="M{x0} {_n(y)}H{x1}" stroke="{GRID}"/>')
                out.append(
                    f'<text x="{x0 - 4}" y="{_n(y + 3.5)}" text-anchor="end">{escape(text)}</text>'
                )
        for v, text in x_ticks:
            x = self.px(v)
            if not x0 - 0.5 <= x <= x1 + 0.5:
                continue
            out.append(f'<path d="M{_n(x)} {y1}v4" stroke="{AXIS}"/>')
            if rotate_x:
                out.append(
                    f'<text transform="translate({_n(x + 3)},{y1 + 8}) rotate(-55)" '
                    f'text-anchor="end">{escape(text)}</text>'
                )
            else:
                out.append(
                    f'<text x="{_n(x)}" y="{y1 + 15}" text-anchor="middle">{escape(text)}</text>'
                )
        out.append(f'<path d="M{x0} {y0}V{y1}H{x1}" stroke="{AXIS}" fill="none"/>')
        if x_label:
            out.append(
                f'<text x="{x1}" y="{self.height - 3}" text-anchor="end" fill="{AXIS}">'
                f"{escape(x_label)}</text>"
            )
        if y_label:
            out.append(
                f'<text transform="translate(11,{_n((y0 + y1) / 2)}) rotate(-90)" '
                f'text-anchor="middle" fill="{AXIS}">{escape(y_label)}</text>'
            )

    def x_band(self, lo: float, hi: float, fill: str, text: str = "") -> None:
        """A shaded vertical strip (e.g. the warm-up), under the data."""
        a, b = self.px(lo), self.px(hi)
        a, b = max(a, self.left), min(b, self.width - self.right)
        if b <= a:
            return
        h = self.height - self.bottom - self.top
        self.parts.append(
            f'<rect x="{_n(a)}" y="{self.top}" width="{_n(b - a)}" height="{h}" fill="{fill}"/>'
        )
        if text:  # at the foot of the strip, where the lines seldom are
            y = self.height - self.bottom - 4
            self.parts.append(f'<text x="{_n(a + 3)}" y="{y}" fill="{AXIS}">{escape(text)}</text>')

    def y_band(self, lo: float, hi: float, fill: str) -> None:
        """A shaded horizontal strip (e.g. the equivalence band), under the data."""
        a, b = self.clip_y(hi), self.clip_y(lo)
        if b <= a:
            return
        w = self.width - self.right - self.left
        self.parts.append(
            f'<rect x="{self.left}" y="{_n(a)}" width="{w}" height="{_n(b - a)}" fill="{fill}"/>'
        )

    def hline(self, v: float, colour: str, dash: str = "") -> None:
        y = self.py(v)
        if self.top <= y <= self.height - self.bottom:
            d = f' stroke-dasharray="{dash}"' if dash else ""
            self.parts.append(
                f'<path d="M{self.left} {_n(y)}H{self.width - self.right}" stroke="{colour}"{d}/>'
            )

    def vline(self, x: float, colour: str, dash: str = "", name: str = "") -> None:
        """A vertical line at x across the plotting area, titled `name`."""
        px = self.px(x)
        if self.left <= px <= self.width - self.right:
            d = f' stroke-dasharray="{dash}"' if dash else ""
            title = f"<title>{escape(name)}</title>" if name else ""
            self.parts.append(
                f'<path d="M{_n(px)} {self.top}V{self.height - self.bottom}" '
                f'stroke="{colour}" stroke-width="1.5"{d}>{title}</path>'
            )

    def line(
        self, points: Sequence[tuple[float, float]], colour: str, width: float, name: str
    ) -> None:
        """A polyline through the points (clipped to the plotting area), titled `name`
        (shown on hover, no script)."""
        if not points:
            return
        # px and clip_y inlined: a 40 x 40 report draws some 100,000 of these points
        x_lo, x_hi, top, bottom = self.left, self.width - self.right, self.top, self.height
        bottom -= self.bottom
        x_scale, y_scale = x_hi - x_lo, bottom - top
        xf, yf = self.x.frac, self.y.frac
        coords = " ".join(
            f"{x_lo + xf(x) * x_scale:.1f},{min(max(bottom - yf(y) * y_scale, top), bottom):.1f}"
            for x, y in points
        )
        self.parts.append(
            f'<polyline points="{coords}" fill="none" stroke="{colour}" '
            f'stroke-width="{width:g}" stroke-linejoin="round"><title>{escape(name)}</title>'
            "</polyline>"
        )

    def interval(
        self, x: float, lo: float, hi: float, mid: float | None, colour: str, name: str
    ) -> None:
        """An error bar from lo to hi with a dot at mid."""
        cx = _n(self.px(x))
        a, b = self.clip_y(hi), self.clip_y(lo)
        parts = [f'<g stroke="{colour}" fill="{colour}"><title>{escape(name)}</title>']
        if math.isfinite(lo) and math.isfinite(hi):
            parts.append(
                f'<path d="M{cx} {_n(a)}V{_n(b)}M{cx} {_n(a)}m-3 0h6M{cx} {_n(b)}m-3 0h6"/>'
            )
        if mid is not None:
            if math.isfinite(mid) and self.top <= self.py(mid) <= self.height - self.bottom:
                parts.append(f'<circle cx="{cx}" cy="{_n(self.py(mid))}" r="3.5"/>')
            else:  # off the chart: a triangle at the edge pointing where it is
                up = mid > self.y.hi if math.isfinite(mid) else mid > 0
                y = self.top + 1 if up else self.height - self.bottom - 1
                tip = -6 if up else 6
                parts.append(f'<path d="M{cx} {_n(y)}m-4 {-tip}l4 {tip}l4 {-tip}z" stroke="none"/>')
        parts.append("</g>")
        self.parts.append("".join(parts))

    def svg(self, css_class: str = "chart") -> str:
        label = f' aria-label="{escape(self.label)}"' if self.label else ""
        head = (
            f'<svg xmlns="http://www.w3.org/2000/svg" class="{css_class}" role="img"{label} '
            f'viewBox="0 0 {self.width} {self.height}" width="{self.width}" '
            f'height="{self.height}" font-size="10.5" style="{FONT}" fill="{INK}">'
        )
        return head + "".join(self.parts) + "</svg>"


@dataclass(frozen=True)
class Line:
    name: str
    colour: str
    points: list[tuple[float, float]]
    width: float = 1.4


def line_chart(
    series: Sequence[Line],
    title: str,
    x_label: str,
    y_label: str,
    width: int = 430,
    height: int = 220,
    log_y: bool = False,
    x_ticks: Sequence[tuple[float, str]] | None = None,
    x_range: tuple[float, float] | None = None,
    shade_x: tuple[float, float, str] | None = None,
    y_from_zero: bool = True,
    change_marks: Sequence[tuple[float, str, str]] = (),
) -> str:
    """Lines on shared axes; an empty chart says "no data" rather than vanishing.
    change_marks: (x, colour, name) of a dashed vertical line half a step before x (a
    change point starting at column x)."""
    xs = [x for s in series for x, _ in s.points]
    ys = [y for s in series for _, y in s.points if math.isfinite(y) and (y > 0 or not log_y)]
    if x_range is None:
        x_range = (min(xs), max(xs)) if xs else (0.0, 1.0)
    x_axis = Axis(*x_range) if x_range[1] > x_range[0] else padded(*x_range)
    if ys:
        lo = 0.0 if y_from_zero and not log_y else min(ys)
        y_axis = padded(lo, max(ys), log=log_y)
        if y_from_zero and not log_y:
            y_axis = Axis(0.0, y_axis.hi)
    else:
        y_axis = Axis(1.0, 10.0, True) if log_y else Axis(0.0, 1.0)
    plot = Plot(width, height, x_axis, y_axis, label=title)
    plot.title(title)
    if shade_x is not None:
        plot.x_band(shade_x[0], shade_x[1], "#f1f1f1", shade_x[2])
    yt = log_ticks(y_axis.lo, y_axis.hi) if log_y else nice_ticks(y_axis.lo, y_axis.hi, 4)
    xt = x_ticks if x_ticks is not None else [(v, si(v)) for v in nice_ticks(*x_range, 6)]
    plot.frame(xt, [(v, si(v)) for v in yt], x_label, y_label)
    for x, colour, name in change_marks:
        plot.vline(x - 0.5, colour, "5 3", name)
    for s in series:
        plot.line(s.points, s.colour, s.width, s.name)
    if not ys:
        plot.parts.append(
            f'<text x="{width / 2:.0f}" y="{height / 2:.0f}" text-anchor="middle" '
            f'fill="{AXIS}">no data</text>'
        )
    return plot.svg()


# The latency curves' x axis: percentile p at log10(1 / (1 - p/100)), so 90% is 1,
# 99% is 2, 99.9% is 3 (HdrHistogram's percentile distribution plot).
def nines(p: float) -> float:
    return math.log10(1 / max(1 - p / 100, 1e-7))


NINES_TICKS = [(nines(p), f"{p:g}") for p in (0, 90, 99, 99.9, 99.99, 99.999)]


@dataclass(frozen=True)
class DotPair:
    """A measured value and a model's for one x position (a column's step)."""

    label: str
    measured: float
    model: float
    colour: str


def dot_pairs(points: Sequence[DotPair], title: str, y_label: str, width: int = 330) -> str:
    """Measured (filled dot) beside the model's (ring) per x position, the y axis from 0."""
    n = max(len(points), 1)
    hi = max([p.measured for p in points] + [p.model for p in points] + [1e-9])
    y_axis = padded(0.0, hi, share=0.08)
    y_axis = Axis(0.0, y_axis.hi)
    longest = max((len(p.label) for p in points), default=4)
    bottom = int(min(longest, 28) * 5.2 + 16)
    plot = Plot(width, 200 + bottom - 34, Axis(-0.5, n - 0.5), y_axis, (22, 14, bottom, 52), title)
    plot.title(title)
    ticks = nice_ticks(0.0, y_axis.hi, 5)
    plot.frame(
        [(i, p.label) for i, p in enumerate(points)],
        [(v, f"{v:.3g}") for v in ticks],
        "",
        y_label,
        rotate_x=True,
    )
    for i, p in enumerate(points):
        cx, my, py = _n(plot.px(i)), _n(plot.py(p.measured)), _n(plot.py(p.model))
        name = f"{p.label}: measured {p.measured:.3g}, model {p.model:.3g}"
        plot.parts.append(
            f"<g><title>{escape(name)}</title>"
            f'<circle cx="{cx}" cy="{my}" r="4" fill="{p.colour}"/>'
            f'<circle cx="{cx}" cy="{py}" r="5.5" fill="none" stroke="{p.colour}" '
            'stroke-width="1.5"/></g>'
        )
    return plot.svg()
