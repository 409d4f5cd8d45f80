"""The drift ledger's outputs (report/ledger.py finds its points and figures): JSON
(format 1, shapes/verdicts.py LedgerJson), Markdown and TSV, and the drift gate's lines."""

from __future__ import annotations

import json
import math

from dbregress.analysis import ledger as lg
from dbregress.analysis.ledger import Cell, Ledger, Point
from dbregress.shapes.verdicts import LedgerCellJson, LedgerJson, LedgerPointJson, LedgerStepJson

FORMAT = 1


def _cell_json(c: Cell | None) -> LedgerCellJson | None:
    if c is None:
        return None
    out: LedgerCellJson = {"ratio": c.ratio, "ci": list(c.ci) if c.ci else None, "class": c.word}
    if c.functions:
        out["functions"] = [
            {"function": f.function, "base": f.base, "value": f.value, "share": f.share}
            for f in c.functions
        ]
    return out


def _point_json(p: Point) -> LedgerPointJson:
    return {
        "run": p.run,
        "column": p.column,
        "build": p.build,
        "commit": p.commit,
        "subject": p.subject,
        "cumulative": _cell_json(p.cumulative),
        "increment": _cell_json(p.increment),
    }


def beyond(ledger: Ledger, limit: float) -> list[lg.Drift]:
    """The drift the limit names: a lab's newest point, or every column of a run."""
    return lg.drift(ledger, limit, last_only=ledger.reference is not None)


def gaps(ledger: Ledger, limit: float | None = None) -> list[str]:
    """What keeps the drift gate from judging: a lab's newest point, or any column of a
    run, with no decided cumulative cost figure, or (with `limit`) a `same` beyond it
    that is not small; no cost row at all; a lab's run after the reference that could
    not be read (its newest point may be an older run's)."""
    unread = [n for n in ledger.notes if ": not read (" in n]
    last_only = ledger.reference is not None
    return [*unread, *lg.drift_gaps(ledger, last_only=last_only, limit=limit)]


def to_json(ledger: Ledger, limit: float | None = None) -> LedgerJson:
    steps: list[LedgerStepJson] = [
        {
            "comparison": r.comparison,
            "step": r.step,
            "lane": r.lane,
            "metric": r.metric,
            "points": [_point_json(p) for p in r.points],
            "total": _cell_json(r.total),
            "product_of_increments": r.product,
            "remainder": r.remainder,
        }
        for r in ledger.rows
    ]
    found = beyond(ledger, limit) if limit is not None else []
    ref = ledger.reference
    return {
        "format": FORMAT,
        "lab": ledger.title,
        "reference": None
        if ref is None
        else {"run": ref.run, "column": ref.column, "build": ref.build},
        "steps": steps,
        "notes": list(ledger.notes),
        "drift": {
            "limit": limit,
            "beyond": [
                {
                    "comparison": d.row.comparison,
                    "step": d.row.step,
                    "column": d.point.column,
                    "run": d.point.run,
                    "ratio": d.total.ratio,
                    "ci": list(d.total.ci or ()),
                    "contributors": [
                        {
                            "run": p.run,
                            "column": p.column,
                            "commit": p.commit,
                            "ratio": p.increment.ratio,
                        }
                        for p in d.contributors
                        if p.increment is not None
                    ],
                }
                for d in found
            ],
        },
    }


def _pct(c: Cell | None) -> str:
    if c is None or c.ratio is None:
        return "-"
    text = f"{100 * (c.ratio - 1):+.2f}%"
    if c.ci is not None:
        text += f" [{100 * (c.ci[0] - 1):+.2f}, {100 * (c.ci[1] - 1):+.2f}]"
    return text


def _what(p: Point) -> str:
    what = f"{p.column} ({p.build})"
    if p.commit:
        what += f" {p.commit[:12]}"
    if p.subject:
        what += f" {p.subject[:60]}"
    return f"{p.run}: {what}" if p.run else what


LANE_TITLES = {
    "cost": "cost lane, estimated cycles per operation (above 0: more work)",
    "time": "time lane, QPS (above 0: faster)",
}


def markdown(ledger: Ledger, limit: float | None = None) -> str:
    out = [f"# Drift ledger: {ledger.title}", ""]
    if ledger.reference is not None:
        out += [f"Reference (pinned): {_what(ledger.reference)}.", ""]
    out += [
        "Each point's cumulative change from the first and its increment over the point "
        "before, with intervals; class: slower/faster (a change confirmed whose interval "
        "is not shown to lie inside the band: the change itself may lie inside it), small "
        "(inside the band, beyond the small-change floor), same, undecided "
        "(docs/ledger.md).",
        "",
    ]
    for r in ledger.rows:
        out += [f"## {r.comparison} / {r.step}: {LANE_TITLES[r.lane]}", ""]
        out += ["| point | cumulative | class | increment | class |", "|---|---|---|---|---|"]
        first = r.points[0]
        out.append(f"| {_what(first)} | (first) | | | |")
        for p in r.points[1:]:
            cum, inc = p.cumulative, p.increment
            out.append(
                f"| {_what(p)} | {_pct(cum)} | {cum.word if cum else '-'} | "
                f"{_pct(inc)} | {inc.word if inc else '-'} |"
            )
        moved = [
            f"- {_what(p)}: " + "; ".join(f.words() for f in p.increment.functions)
            for p in r.points[1:]
            if p.increment is not None and p.increment.functions
        ]
        if moved:
            out += ["", "Where the increments moved (instructions per operation by function):"]
            out += ["", *moved]
        product, remainder = r.product, r.remainder
        total = _pct(r.total)
        tail = f"Total {total}"
        if product is not None:
            tail += f"; product of the increments {100 * (product - 1):+.2f}%"
        if remainder is not None:
            tail += f"; remainder {100 * remainder:+.3f}%"
        out += ["", tail + ".", ""]
    if limit is not None:
        found = beyond(ledger, limit)
        if found:
            out += [f"Drift beyond {limit:.2%}:", ""]
            for d in found:
                most = ", ".join(_contributor(p) for p in d.contributors[:3])
                where = f"{d.row.comparison} / {d.row.step} / {d.point.column}"
                out.append(f"- {where}: {_pct(d.total)}; most from {most or '-'}")
            out.append("")
        else:
            out += [f"No step drifted beyond {limit:.2%} (whole interval).", ""]
    for n in ledger.notes:
        out += [f"Note: {n}", ""]
    return "\n".join(out).rstrip() + "\n"


def drift_line(d: lg.Drift, limit: float) -> str:
    """One drift in words: where, its size with interval, the limit, who added most."""
    most = ", ".join(_contributor(p) for p in d.contributors[:3])
    where = f"{d.row.comparison}/{d.row.step} {d.point.column}"
    if d.point.run and d.point.commit:
        where += f" ({d.point.run}, {d.point.commit[:12]})"
    return f"{where} {_pct(d.total)} beyond {limit:.2%}; most from {most or '-'}"


def _contributor(p: Point) -> str:
    who = p.run or p.column
    if p.commit:
        who += f" {p.commit[:12]}"
    return f"{who} {_pct(p.increment)}"


def tsv(ledger: Ledger) -> str:
    head = [
        "comparison", "step", "lane", "position", "run", "column", "build", "commit",
        "cumulative", "cumulative_low", "cumulative_high", "cumulative_class",
        "increment", "increment_low", "increment_high", "increment_class",
    ]  # fmt: skip
    lines = ["\t".join(head)]

    def nums(c: Cell | None) -> list[str]:
        if c is None:
            return ["", "", "", ""]
        lo, hi = c.ci if c.ci else (None, None)
        return [_num(c.ratio), _num(lo), _num(hi), c.word]

    for r in ledger.rows:
        for i, p in enumerate(r.points):
            cells = [r.comparison, r.step, r.lane, str(i), p.run, p.column, p.build, p.commit or ""]
            lines.append("\t".join([*cells, *nums(p.cumulative), *nums(p.increment)]))
    return "\n".join(lines) + "\n"


def _num(v: float | None) -> str:
    return "" if v is None or not math.isfinite(v) else repr(float(v))


def dumps(ledger: Ledger, fmt: str, limit: float | None = None) -> str:
    if fmt == "json":
        return json.dumps(to_json(ledger, limit), indent=1) + "\n"
    if fmt == "tsv":
        return tsv(ledger)
    return markdown(ledger, limit)
