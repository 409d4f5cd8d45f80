"""Plain-text exports of a run's tables: `dbregress report RUN --format tsv|csv`.

TSV is laid out as the seed reports publish their tables, ready to paste: per comparison
an absolute table (median QPS over repeats) and a relative one (QPS vs the base, the
verdicts' ratio). Each starts with a legend, `col-N : <label> (<build>, <config>)`, a
blank line and a header row of the col-N names; then one row per step, the values
separated by tabs and the step name last.

CSV has one row per (comparison, column, step), header row first: the QPS ratio with its
interval and verdict, the repeats, the median QPS and every per-operation metric with
its own ratio and verdict, and whether the cost verdict is a small change
(`cost_small`: `same` for the gate, beyond the small-change floor). The base column's
rows carry its absolute values only.

Where a cost lane counted the run, TSV lists after each comparison's tables what its
counting replays changed, and CSV's `cost_counting_changes` says it for each column and
step (report/disclosure.py, from cost/lane.json). In a run whose cost lane used the
count store, CSV ends with `cost_reused_base`, `cost_reused_column` and
`cost_reused_from`: how many of the replays each side's verdict used were taken from the
store, and the runs they were counted in (report/count_store.py); a run that did not use
it has no such columns, as before the store existed.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Sequence

from dbregress.analysis.compare import VERDICT_METRICS, RunVerdicts
from dbregress.analysis.cost import CostComparison
from dbregress.analysis.cost_methods import COST_METRICS
from dbregress.analysis.summary import Cell, Matrix
from dbregress.analysis.verdict import StepVerdict
from dbregress.report import count_store, disclosure, io_tables
from dbregress.shapes.replay import CostLaneRecord, ReplayRecord
from dbregress.shapes.run import ColumnEntry, RunJson


def _column_names(record: RunJson) -> dict[str, str]:
    """label -> `label (build, config)`."""
    return {c["label"]: f"{c['label']} ({c['build']}, {c['config']})" for c in record["columns"]}


def _qps(cell: Cell) -> str:
    if cell.status != "ok" or cell.qps is None:
        return "-"
    return f"{cell.qps:.0f}" if abs(cell.qps) >= 100 else f"{cell.qps:.3g}"


def _ratio(c: StepVerdict | None) -> str:
    if c is None or c.ratio is None:
        return "-"
    return "inf" if math.isinf(c.ratio) else f"{c.ratio:.2f}"


def _table(title: str, legend: list[str], rows: list[list[str]], width: int) -> list[str]:
    header = "\t".join(f"col-{i}" for i in range(1, width + 1))
    return [title, *legend, "", header, *("\t".join(r) for r in rows), ""]


def tsv(
    record: RunJson, ms: list[Matrix], v: RunVerdicts, lane: CostLaneRecord | None = None
) -> str:
    """The TSV tables (run.json and cost/lane.json typed or as read: store/)."""
    names = _column_names(record)
    out: list[str] = []
    for m in ms:
        legend = [f"col-{i} : {names.get(lb, lb)}" for i, lb in enumerate(m.labels, 1)]
        rows = [[*(_qps(m.cell(lb, s)) for lb in m.labels), s] for s in m.steps]
        title = f"{m.comparison}: QPS, median over repeats"
        out += _table(title, legend, rows, len(m.labels))
        out += io_tables.tsv(v.io_for(m.comparison))
        others = m.labels[1:]
        if not others:
            continue
        found = v.for_comparison(m.comparison)
        legend = [
            f"Relative to: {names.get(m.base, m.base)}",
            *(f"col-{i} : {names.get(lb, lb)}" for i, lb in enumerate(others, 1)),
        ]
        rows = [[*(_ratio(found.get((lb, s))) for lb in others), s] for s in m.steps]
        out += _table(f"{m.comparison}: relative QPS", legend, rows, len(others))
        if v.cost is not None:
            rows = [
                [*(_cost_ratio(v.cost_for((m.comparison, lb, s))) for lb in others), s]
                for s in m.steps
            ]
            title = f"{m.comparison}: relative estimated cycles per operation (cost lane)"
            out += _table(title, legend, rows, len(others))
            out += disclosure.tsv(disclosure.disclosure(lane, record, m.comparison))
    return "\n".join(out)


def _cost_ratio(c: CostComparison | None) -> str:
    """The cost ratio; a small change (same for the gate, beyond the floor) to four
    decimals and marked, as `1.0042 small`."""
    if c is None or c.ratio is None:
        return ""
    return f"{c.ratio:.4f} small" if c.small else f"{c.ratio:.3f}"


def _num(value: float | None) -> str:
    if value is None:
        return ""
    return repr(float(value)) if math.isfinite(value) else ("inf" if value > 0 else "-inf")


def _triple(c: StepVerdict | CostComparison | None) -> list[str]:
    if c is None:
        return ["", "", "", ""]
    low, high = c.ci if c.ci is not None else (None, None)
    return [_num(c.ratio), _num(low), _num(high), c.verdict]


CSV_HEADER = [
    "comparison",
    "benchmark",
    "column",
    "base",
    "build",
    "config",
    "step",
    "status",
    "op",
    "unit",
    "repeats",
    "qps_median",
    "ratio",
    "ci_low",
    "ci_high",
    "verdict",
    "repeats_base",
    "repeats_column",
    "p_value",
    *(
        f"{mt.key}{suffix}"
        for mt in VERDICT_METRICS
        for suffix in ("", "_ratio", "_ci_low", "_ci_high", "_verdict")
    ),
    # The cost lane: per count metric, the column's mean per operation over its
    # counting replays, the ratio to the base with its interval and verdict.
    *(
        f"cost_{cm.key}{suffix}"
        for cm in COST_METRICS
        for suffix in ("", "_ratio", "_ci_low", "_ci_high", "_verdict")
    ),
    "cost_replays_base",
    "cost_replays_column",
    # the headline's `same` verdict is a small change: beyond the floor of what separates
    # two builds of the same code, inside the band (docs/ledger.md)
    "cost_small",
    # what the column's counting replays changed for the step (cost/lane.json)
    "cost_counting_changes",
]
# Last, in a run that used the count store only: of the replays each side's cost verdict
# used, how many were taken from the store, and the runs they were counted in.
CSV_REUSED = ["cost_reused_base", "cost_reused_column", "cost_reused_from"]


def csv_rows(
    record: RunJson,
    ms: list[Matrix],
    v: RunVerdicts,
    lane: CostLaneRecord | None = None,
    stored: count_store.StoreReport | None = None,
) -> list[list[str]]:
    """One row per (comparison, column, step), CSV_HEADER's fields, then CSV_REUSED's
    where `stored` says the run used the count store."""
    columns: dict[str, ColumnEntry] = {c["label"]: c for c in record["columns"]}
    rows = []
    for m in ms:
        found = v.for_comparison(m.comparison)
        changed = disclosure.disclosure(lane, record, m.comparison) if v.cost else None
        for lb in m.labels:
            col = columns.get(lb)
            for s in m.steps:
                cell = m.cell(lb, s)
                c = found.get((lb, s)) if lb != m.base else None
                row = [
                    m.comparison,
                    m.benchmark,
                    lb,
                    m.base,
                    str(col.get("build", "")) if col else "",
                    str(col.get("config", "")) if col else "",
                    s,
                    cell.status,
                    cell.q_op,
                    cell.q_unit,
                    str(cell.repeats),
                    _num(cell.qps),
                    *_triple(c),
                    str(c.n_base) if c else "",
                    str(c.n_other) if c else "",
                    _num(c.p_value) if c else "",
                ]
                for mt in VERDICT_METRICS:
                    mc = v.metrics.get(mt.key, {}).get((m.comparison, lb, s))
                    row += [_num(cell.per_op.get(mt.key)), *_triple(mc)]
                for cm in COST_METRICS:
                    cc = v.cost_metric(cm.key, (m.comparison, lb, s))
                    if lb == m.base:  # the base's own value, from any column's verdict
                        cc = _base_cost(v, m, cm.key, s)
                        row += [_num(cc.base) if cc else "", "", "", "", ""]
                    else:
                        row += [_num(cc.value) if cc else "", *_triple(cc)]
                head = v.cost_for((m.comparison, lb, s)) if lb != m.base else None
                row += [str(head.replays[0]), str(head.replays[1])] if head else ["", ""]
                row.append(("true" if head.small else "false") if head else "")
                row.append(changed.for_cell(lb, s) if changed is not None else "")
                if stored is not None:
                    row += stored.csv_cells((m.comparison, lb, s) if lb != m.base else None)
                rows.append(row)
    return rows


def _base_cost(v: RunVerdicts, m: Matrix, metric: str, step: str) -> CostComparison | None:
    for lb in m.labels[1:]:
        c = v.cost_metric(metric, (m.comparison, lb, step))
        if c is not None:
            return c
    return None


def csv_text(
    record: RunJson,
    ms: list[Matrix],
    v: RunVerdicts,
    lane: CostLaneRecord | None = None,
    replays: Sequence[ReplayRecord] | None = None,
) -> str:
    """The CSV export (run.json, cost/lane.json and the counting replays typed or as
    read: store/; replays None: which were taken from the count store is not told)."""
    stored = count_store.summarize(record, v, lane, replays)
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(CSV_HEADER + (CSV_REUSED if stored is not None else []))
    writer.writerows(csv_rows(record, ms, v, lane, stored))
    return buf.getvalue()
