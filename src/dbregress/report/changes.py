"""The series sections of the reports: every column relative to the base, as published
benchmark reports lay out a version series (a legend `col-N : build`, then one row per
step with a value per column and the step's name last), with the change points marked,
per lane; and a chart per step for the HTML report."""

from __future__ import annotations

import math
from typing import TypedDict

from markupsafe import Markup

from dbregress.analysis.changepoints import Change, Series
from dbregress.analysis.compare import RunVerdicts
from dbregress.analysis.summary import Matrix
from dbregress.report import svg

LANE_COLOURS = {"time": "#1f6fb2", "cost": "#c2571a"}  # the series charts' lines and marks
LANES = {
    "time": ("Time lane: QPS relative to col-1 (higher is better)", "relative QPS"),
    "cost": (
        "Cost lane: estimated cycles per operation relative to col-1 (lower is better)",
        "relative est. cycles/op",
    ),
}
LEGEND = (
    "A mark before a value is a change point: the step's level shifts at that column and "
    "stays until the next mark (▼ slower, ▲ faster: more cost per operation is slower; "
    "in the cost lane ▽ and △ mark a small shift, inside the band yet beyond the "
    "small-change floor: docs/ledger.md). "
    "Found by PELT over the columns and confirmed by a two-sample test of the levels "
    "before and after, at a false-alarm rate of {alpha:.0%} over every series of this "
    "report (docs/changepoints.md)."
)


def _relative(s: Series) -> list[float | None]:
    base = s.levels[0]
    return [None if v is None or base is None else v / base for v in s.levels]


def _cell(value: float | None, change: Change | None) -> str:
    text = "-" if value is None else f"{value:.2f}"
    return f"{change.mark}{text}" if change is not None else text


def _at(s: Series) -> dict[int, Change]:
    return {c.index: c for c in s.moved()}


def shown(m: Matrix, v: RunVerdicts) -> dict[str, dict[str, Series]]:
    """lane -> step -> series of this comparison, in the matrix's step order."""
    if v.changes is None or len(m.labels) < 3:
        return {}
    out = {}
    for lane, series in v.changes.of(m.comparison).items():
        ordered = {s: series[s] for s in m.steps if s in series}
        ordered |= {s: x for s, x in series.items() if s not in ordered}
        if ordered:
            out[lane] = ordered
    return out


def markdown(m: Matrix, v: RunVerdicts) -> list[str]:
    lanes = shown(m, v)
    if not lanes or v.changes is None:
        return []
    out = [
        f"### Series and change points (vs {m.base})",
        "",
        LEGEND.format(alpha=v.changes.alpha),
        "",
        *(f"col-{i + 1} : {lb}" for i, lb in enumerate(m.labels)),
        "",
    ]
    cols = [f"col-{i + 1}" for i in range(len(m.labels))]
    found: list[list[str]] = []
    for lane, series in lanes.items():
        out += [LANES[lane][0], "", "| " + " | ".join([*cols, "step"]) + " |"]
        out.append("|" + "|".join("---:" for _ in cols) + "|---|")
        for step, s in series.items():
            at = _at(s)
            cells = [_cell(x, at.get(i)) for i, x in enumerate(_relative(s))]
            out.append("| " + " | ".join([*cells, step]) + " |")
            for c in s.moved():
                found.append(
                    [
                        step,
                        lane,
                        f"col-{c.index + 1} {m.labels[c.index]}",
                        f"{c.ratio:.3f} [{c.ci[0]:.3f}, {c.ci[1]:.3f}]",
                        c.word,
                        f"col-{c.before[0] + 1}..{c.before[1] + 1} vs "
                        f"col-{c.after[0] + 1}..{c.after[1] + 1}; {c.reason}",
                    ]
                )
        out.append("")
    if found:
        out += [
            "Change points (ratio: the level after over the level before, in the lane's "
            "own metric, with its interval):",
            "",
            "| step | lane | starts at | ratio [CI] | verdict | segments; test |",
            "|---|---|---|---|---|---|",
            *("| " + " | ".join(r) + " |" for r in found),
            "",
        ]
    else:
        out += ["No change point in any series.", ""]
    return out


def charts(m: Matrix, v: RunVerdicts) -> list[Markup]:
    """Per step, the series of both lanes relative to col-1 on one chart, a dashed line
    where a change point starts."""
    lanes = shown(m, v)
    steps = list(dict.fromkeys(s for series in lanes.values() for s in series))
    colours = LANE_COLOURS
    out = []
    ticks = [(float(i), f"col-{i + 1}") for i in range(len(m.labels))]
    for step in steps:
        lines, marks = [], []
        for lane, series in lanes.items():
            s = series.get(step)
            if s is None:
                continue
            pts = [
                (float(i), x)
                for i, x in enumerate(_relative(s))
                if x is not None and math.isfinite(x)
            ]
            lines.append(svg.Line(LANES[lane][1], colours[lane], pts, 1.8))
            marks += [
                (
                    float(c.index),
                    colours[lane],
                    f"{lane} lane: {c.word} from col-"
                    f"{c.index + 1}, {c.ratio:.3f} [{c.ci[0]:.3f}, {c.ci[1]:.3f}]",
                )
                for c in s.moved()
            ]
        chart = svg.line_chart(
            lines,
            f"{step}: relative to col-1",
            "column",
            "relative",
            x_ticks=ticks,
            x_range=(0.0, float(max(len(m.labels) - 1, 1))),
            y_from_zero=False,
            change_marks=marks,
        )
        out.append(Markup(chart))
    return out


class SeriesTable(TypedDict):
    """One lane's series table on the page: its title, header and rows of cells."""

    title: str
    header: list[str]
    rows: list[list[str]]


def html_tables(m: Matrix, v: RunVerdicts) -> list[SeriesTable]:
    """Per lane: a title, the header (col-N ... step) and rows of cells, for the page."""
    out: list[SeriesTable] = []
    for lane, series in shown(m, v).items():
        rows = []
        for step, s in series.items():
            at = _at(s)
            rows.append([*(_cell(x, at.get(i)) for i, x in enumerate(_relative(s))), step])
        header = [*(f"col-{i + 1}" for i in range(len(m.labels))), "step"]
        out.append({"title": LANES[lane][0], "header": header, "rows": rows})
    return out


def legend(m: Matrix, v: RunVerdicts) -> str:
    if v.changes is None:
        return ""
    cols = "; ".join(f"col-{i + 1}: {lb}" for i, lb in enumerate(m.labels))
    return f"{LEGEND.format(alpha=v.changes.alpha)} Columns: {cols}."
