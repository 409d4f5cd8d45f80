"""The ledger section of a study's page: the run's drift ledger (report/ledger.py's
figures, report/ledger_text.py's JSON) laid out as the seed lays out its tables, a row
per step and a column per column, each cell the cumulative change from the base and
the increment over the column before."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from dbregress.model.errors import DbregressError
from dbregress.report import ledger
from dbregress.report.ledger_text import LANE_TITLES, to_json
from dbregress.report.verdict_tables import table
from dbregress.shapes.verdicts import LedgerCellJson, LedgerStepJson, StepVerdictJson
from dbregress.study.agreement import Key, cost_figure, time_figure

INTRO = (
    "Each column's cumulative change from the comparison's base, then its increment over "
    "the column before, each with its class (slower, faster, small, same, undecided). The "
    "cumulative change is the report's own (verdicts.json), as in the tables above; the "
    "increment is `dbregress ledger RUN`'s (docs/ledger.md), a verdict of that pair of "
    "columns within this run."
)


def _pct(cell: LedgerCellJson | None) -> str:
    if cell is None or cell["ratio"] is None:
        return "-"
    return f"{100 * (cell['ratio'] - 1):+.1f}% {cell['class']}"


def _reported(step: StepVerdictJson | None, lane: str) -> str:
    """The report's cumulative change of a step in a lane (its class as the ledger
    names it: a cost lane's small change is `small`)."""
    figure = time_figure(step) if lane == "time" else cost_figure(step)
    if figure is None or figure.ratio is None:
        return "-"
    word = "small" if figure.small else figure.verdict
    return f"{100 * (figure.ratio - 1):+.1f}% {word}"


def section(path: Path, steps: Mapping[Key, StepVerdictJson]) -> list[str]:
    """The ledger of the run folder `path` as Markdown lines, each cumulative change
    the report's (`steps`: verdicts.json's step verdicts)."""
    out = ["## Ledger", "", INTRO, ""]
    try:
        found = to_json(ledger.run_ledger(path))
    except DbregressError as e:
        return [*out, f"No ledger: {e}", ""]
    groups: dict[tuple[str, str], list[LedgerStepJson]] = {}
    for row in found["steps"]:
        groups.setdefault((row["comparison"], row["lane"]), []).append(row)
    for (comparison, lane), rows in groups.items():
        columns = list(dict.fromkeys(p["column"] for r in rows for p in r["points"][1:]))
        body = []
        for r in rows:
            points = {p["column"]: p for p in r["points"][1:]}
            cells = [
                f"{_reported(steps.get((comparison, c, r['step'])), lane)} / {_pct(p['increment'])}"
                if p
                else "-"
                for c, p in ((c, points.get(c)) for c in columns)
            ]
            body.append([r["step"], *cells])
        out += [f"### {comparison}: {LANE_TITLES[lane]}", ""]
        out += table(["step", *columns], body)
    if not groups:
        out += ["The run has no comparison of two or more columns: no ledger.", ""]
    out += [f"Note: {n}" for n in found["notes"]]
    return [*out, ""] if found["notes"] else out
