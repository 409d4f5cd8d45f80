"""The site's HTML pages from its data (site/model.py), with jinja2 templates
(site/templates/): no script and nothing loaded from elsewhere, every value escaped.
Pages hold no time of their own generation, so a page whose data did not change is
the same bytes and is not written again (site/write.py)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined

from dbregress.analysis import changepoints
from dbregress.report import svg
from dbregress.shapes.site import JsonObject
from dbregress.shapes.verdicts import LedgerCellJson, LedgerJson
from dbregress.site import charts
from dbregress.site.gather import slug
from dbregress.site.model import Bisection, Chart, LabData, NightLine, StepData, VersionSeries

_ENV = Environment(
    loader=PackageLoader("dbregress.site", "templates"),
    autoescape=True,
    undefined=StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
    keep_trailing_newline=True,
)


def _render(template: str, **values: Any) -> str:
    return _ENV.get_template(template).render(**values)


def _nav(depth: int, lab: str | None = None) -> list[tuple[str, str]]:
    up = "../" * depth
    nav = [(f"{up}index.html", "all labs")]
    if lab is not None:
        nav += [
            (f"{up}{slug(lab)}/index.html", f"lab {lab}"),
            (f"{up}{slug(lab)}/moved.html", "what moved"),
        ]
    return nav


def _date(started: str | None) -> str:
    return (started or "").replace("T", " ")[5:16] or "?"


def _columns(data: StepData) -> list[str]:
    return list(dict.fromkeys(line.column for c in data.charts for line in c.lines))


def _legend(data: StepData, colours: dict[str, str]) -> list[tuple[str, str, str]]:
    out = []
    for column in _columns(data):
        builds = list(
            dict.fromkeys(
                p.build + (f" ({p.commit[:12]})" if p.commit else "")
                for c in data.charts
                for line in c.lines
                if line.column == column
                for piece in line.pieces
                for p in piece
            )
        )
        shown = ", ".join(builds[:3]) + (f" and {len(builds) - 3} more" if len(builds) > 3 else "")
        out.append((column, colours[column], shown))
    return out


def step_page(lab: LabData, data: StepData, runs: Sequence[tuple[int, str]]) -> str:
    colours = svg.column_colours(_columns(data))
    drawn = [charts.step_chart(c, colours, runs) for c in data.charts]
    moved = [m for m in lab.moved if (m.comparison, m.step) == (data.comparison, data.step)]
    return _render(
        "step.html.j2",
        title=f"{lab.name}: {data.comparison} / {data.step}",
        nav=_nav(1, lab.name),
        lab=lab.name,
        comparison=data.comparison,
        step=data.step,
        alpha=f"{changepoints.ALPHA:.0%}",
        change_slower=charts.CHANGE_COLOURS["slower"],
        change_faster=charts.CHANGE_COLOURS["faster"],
        break_colour=charts.BREAK_COLOUR,
        legend=_legend(data, colours),
        charts=drawn,
        moved=moved,
        data="data/" + data.page.rsplit("/", 1)[1].removesuffix(".html") + ".json",
    )


def run_axis(lab: LabData) -> list[tuple[int, str]]:
    return [(i, _date(r.started)) for i, r in enumerate(lab.runs)]


MOVED_SHOWN = 1000  # lines of the "what moved" page; all of them are in data/lab.json


def moved_page(lab: LabData) -> str:
    return _render(
        "moved.html.j2",
        title=f"What moved in {lab.name}",
        nav=_nav(1, lab.name),
        lab=lab.name,
        moved=lab.moved[:MOVED_SHOWN],
        total=len(lab.moved),
        bisections=lab.bisections,
    )


def lab_page(lab: LabData) -> str:
    return _render(
        "lab.html.j2",
        title=f"Lab {lab.name}",
        nav=_nav(1, lab.name),
        lab=lab.name,
        steps=lab.steps,
        series=lab.series,
        runs=list(reversed(lab.runs)),
        ledger=lab.ledger,
    )


def _pct(cell: LedgerCellJson | None) -> tuple[str, str]:
    """A ledger cell as a change in percent with its interval, and its class."""
    if cell is None or cell["ratio"] is None:
        return "-", ""
    text = f"{100 * (cell['ratio'] - 1):+.2f}%"
    if cell["ci"]:
        lo, hi = cell["ci"]
        text += f" [{100 * (lo - 1):+.2f}, {100 * (hi - 1):+.2f}]"
    return text, cell["class"]


def ledger_page(lab: str, ledger: LedgerJson) -> str:
    """The lab's cost ledger since the fixed reference: per step, every later point's
    cumulative change and its increment over the point before."""
    steps = [
        {"name": f"{s['comparison']} / {s['step']}", "total": _pct(s["total"]),
         "product": s["product_of_increments"], "remainder": s["remainder"],
         "points": [(p, _pct(p["cumulative"]), _pct(p["increment"])) for p in s["points"]]}
        for s in ledger["steps"]
    ]  # fmt: skip
    return _render(
        "ledger.html.j2",
        title=f"{lab}: the drift ledger",
        nav=_nav(1, lab),
        lab=lab,
        reference=ledger["reference"],
        steps=steps,
        notes=ledger["notes"],
    )


def _fmt(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f}"


@dataclass(frozen=True)
class _Group:
    name: str
    rows: list[Any]
    time_chart: str
    cost_chart: str
    key: list[tuple[str, str]]  # (step, its line's colour)


def series_page(lab: str, v: VersionSeries) -> str:
    groups: dict[str, list[Any]] = {}
    for r in v.rows:
        groups.setdefault(r.group, []).append(r)
    drawn = []
    for name, rows in groups.items():
        table = [
            {"step": r.step, "time": list(zip(map(_fmt, r.time), r.time_words, strict=True)),
             "cost": list(zip(map(_fmt, r.cost), r.cost_words, strict=True))}
            for r in rows
        ]  # fmt: skip
        time = charts.series_chart(
            f"{name}: QPS relative to {v.columns[0]}", v.columns,
            [(r.step, r.time) for r in rows], "relative QPS",
        )  # fmt: skip
        cost = charts.series_chart(
            f"{name}: est. cycles/op relative to {v.columns[0]}", v.columns,
            [(r.step, r.cost) for r in rows], "relative est. cycles/op",
        )  # fmt: skip
        colours = svg.column_colours(["", *[r.step for r in rows]])  # as series_chart
        drawn.append(_Group(name, table, time, cost, [(r.step, colours[r.step]) for r in rows]))
    return _render(
        "series.html.j2",
        title=f"{lab}: version series {v.run_id}",
        nav=_nav(1, lab),
        lab=lab,
        run_id=v.run_id,
        comparison=v.comparison,
        columns=v.columns,
        legend=list(zip(v.columns, v.builds, strict=True)),
        groups=drawn,
        report=v.report,
    )


def _spark(chart: Chart | None) -> tuple[str, str]:
    """The newest column's sparkline of one lane, and that column; red where that
    column's latest change point is a slowdown."""
    if chart is None or not chart.lines:
        return '<span class="note">-</span>', ""
    line = chart.lines[-1]
    values: list[float | None] = []
    for piece in line.pieces:
        if values:
            values.append(None)  # a method boundary or a run without a level: a gap
        values += [p.level for p in piece]
    shown = sum(v is not None for v in values)
    host = f" on {chart.host}" if chart.host else ""
    name = f"{chart.lane} lane of {line.column}, {chart.step}{host}, over {shown} runs"
    mine = [m for m in chart.changes if m.column == line.column]
    colour = charts.CHANGE_COLOURS["slower"] if mine and mine[-1].word == "slower" else "#1f6fb2"
    return charts.sparkline(values, colour, name), line.column


def _latest(charts_of: list[Chart], lane: str, last: int) -> Chart | None:
    """The lane's chart holding the lab's last run (the time lane's host class it ran
    on), else its first."""
    mine = [c for c in charts_of if c.lane == lane]
    for c in mine:
        if any(p.run == last for line in c.lines for piece in line.pieces for p in piece):
            return c
    return mine[0] if mine else None


def index_entry(lab: LabData) -> JsonObject:
    """What the index says of a lab."""
    steps = []
    for s in lab.steps:
        time = _latest(list(s.charts), "time", len(lab.runs) - 1)
        cost = _latest(list(s.charts), "cost", len(lab.runs) - 1)
        t, column = _spark(time)
        c, other = _spark(cost)
        steps.append(
            {"comparison": s.comparison, "step": s.step, "page": s.page, "column": column or other,
             "time": t, "cost": c}
        )  # fmt: skip
    return {
        "name": lab.name,
        "slug": slug(lab.name),
        "runs": len(lab.runs),
        "last": lab.runs[-1],
        "open": lab.open_regressions,
        "last_judged": lab.last_judged,
        "last_undecided": lab.last_undecided,
        "last_not_judged": lab.last_not_judged,
        "ledger": lab.ledger["reference"] if lab.ledger else None,
        "steps": steps,
        "problems": lab.problems,
    }


def index_page(
    entries: list[JsonObject],
    bisections: list[Bisection],
    nights: dict[str, list[NightLine]] | None = None,
) -> str:
    """The index: each lab (its nights, when the nightly recipe ran it), then the nights
    of labs the history has no run of yet (their first nights failed), then the
    bisections."""
    nights = nights or {}
    shown = {str(e["name"]) for e in entries}
    return _render(
        "index.html.j2",
        title="dbregress: run history",
        nav=[],
        labs=entries,
        bisections=bisections,
        nights=nights,
        runless={lab: lines for lab, lines in nights.items() if lab not in shown},
    )
