"""The Explanations section of a run's report, from explain/explain.json and the run's
verdicts: per explained step, each build's figures per operation, the difference from
the base, the top functions, the flame graphs, and a named cause per slower verdict."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, cast

from dbregress.analysis.compare import VERDICT_METRICS, RunVerdicts, compare_run
from dbregress.analysis.verdict import StepVerdict
from dbregress.explain import cause
from dbregress.explain.store import load
from dbregress.report.verdict_tables import table
from dbregress.shapes.explain import CountFigures, ExplainEntry, ExplainRecord
from dbregress.shapes.run import RunJson
from dbregress.store.run import read_run

Key = tuple[str, str, str]  # (comparison, step, column) in explain.json's entries

SHOWN = (
    ("instructions", "instructions"),
    ("d1_read_misses", "D1 read misses"),
    ("d1_write_misses", "D1 write misses"),
    ("ll_read_misses", "LL read misses"),
    ("ll_write_misses", "LL write misses"),
    ("branch_mispredictions", "branch mispredictions"),
)
TOP = 10


def _num(v: float | None) -> str:
    if v is None or not math.isfinite(v):
        return "-"
    if abs(v) >= 100:
        return f"{v:,.0f}"
    return f"{v:.2f}"


def _signed(v: float) -> str:
    return ("+" if v > 0 else "") + _num(v)


def _change(c: StepVerdict | None) -> cause.MetricChange:
    if c is None:
        return cause.MetricChange("undecided")
    return cause.MetricChange(c.verdict, c.ratio, c.ci)


def _counted(entry: ExplainEntry | None) -> cause.Counted | None:
    if entry is None or not entry.get("count"):
        return None
    c = entry["count"]
    # cause.Counted takes the functions as the plain objects explain.json holds
    functions = cast(Any, c.get("functions", []))
    return cause.Counted(c["per_op"], functions, c.get("objects", {}))


def by_key(explain: ExplainRecord) -> dict[Key, ExplainEntry]:
    return {(e["comparison"], e["step"], e["column"]): e for e in explain.get("results", [])}


def evidence(
    explain: ExplainRecord,
    record: RunJson,
    verdicts: RunVerdicts,
    key: tuple[str, str, str],
) -> cause.Evidence:
    """What the run and explain say of one (comparison, column, step)."""
    comp, column, step = key
    entries = by_key(explain)
    base = next(c["labels"][0] for c in record["comparisons"] if c["name"] == comp)
    metrics = {m.key: _change(verdicts.metrics.get(m.key, {}).get(key)) for m in VERDICT_METRICS}
    return cause.Evidence(
        qps=_change(verdicts.qps.get(key)),
        metrics=metrics,
        base=_counted(entries.get((comp, step, base))),
        other=_counted(entries.get((comp, step, column))),
    )


def causes_for(
    explain: ExplainRecord, record: RunJson, verdicts: RunVerdicts
) -> dict[tuple[str, str, str], list[cause.Cause]]:
    """(comparison, column, step) -> causes, for every slower QPS verdict (whether or
    not explain measured it: the run's metrics alone may name a cause)."""
    return {
        key: cause.explain(evidence(explain, record, verdicts, key)) for key in verdicts.slower()
    }


def _figures_table(
    comp: str, step: str, labels: list[str], entries: dict[Key, ExplainEntry]
) -> list[str]:
    have = [lb for lb in labels if (comp, step, lb) in entries]
    if not have:
        return []
    base = have[0] if have[0] == labels[0] else None
    counts: dict[str, CountFigures] = {lb: entries[(comp, step, lb)]["count"] for lb in have}

    def row(label: str, values: dict[str, float | None]) -> list[str]:
        """A figure for each build, then each build's difference from the base."""
        out = [label, *(_num(values[lb]) for lb in have)]
        for lb in have[1:]:
            b, o = (values.get(base) if base else None), values[lb]
            out.append(_signed(o - b) if b is not None and o is not None else "-")
        return out

    rows = [
        row(label, {lb: c["per_op"].get(name) for lb, c in counts.items()}) for name, label in SHOWN
    ]
    scoped = any(c.get("scope") in ("sessions", "engine-calls") for c in counts.values())
    embedded = any(entries[(comp, step, lb)].get("embedded") for lb in have)
    if scoped:
        bg = {
            lb: (c.get("background_per_op") or {}).get("instructions") for lb, c in counts.items()
        }
        what = "threads" if embedded else "processes"
        rows.append(row(f"instructions, background {what}", bg))
    unit = counts[have[0]]["unit"]
    ops = ", ".join(f"{lb}: {counts[lb]['ops']} calls" for lb in have)
    header = ["per " + ("row" if unit == "rows" else "operation"), *have]
    header += [f"{lb} - {labels[0]}" for lb in have[1:]]
    lines = [f"Counted over a window of {ops}."]
    if scoped and embedded:
        lines.append(
            "The figures are the loadgen's calls into the engine's library, with all "
            "they call (the loadgen's own loop and timing left out); the last row is "
            "the engine's own threads (flushes, compactions) over the same window, "
            "whose share depends on when they ran."
        )
    elif scoped:
        lines.append(
            "The figures are the server processes serving the loadgen's sessions; the last "
            "row is the server's other processes (checkpointer, WAL writer, autovacuum, ...) "
            "over the same window, whose share depends on when they ran."
        )
    return [*lines, "", *table(header, rows)]


def _functions_table(
    comp: str, step: str, labels: list[str], entries: dict[Key, ExplainEntry]
) -> list[str]:
    have = [lb for lb in labels if (comp, step, lb) in entries]
    out = []
    base = entries.get((comp, step, labels[0]))
    base_ir = {
        (f["function"], f["object"]): f["instructions"]
        for f in (base["count"]["functions"] if base else [])
    }
    for lb in have:
        fns = entries[(comp, step, lb)]["count"]["functions"][:TOP]
        rows = []
        for f in fns:
            b = base_ir.get((f["function"], f["object"]))
            diff = _signed(f["instructions"] - b) if b is not None and lb != labels[0] else "-"
            rows.append([f"`{f['function'][:80]}`", f["object"], _num(f["instructions"]), diff])
        out += [f"Top functions on {lb} (instructions per operation):", ""]
        out += table(["function", "object", "instr/op", f"vs {labels[0]}"], rows)
    return out


def _flames(
    comp: str,
    step: str,
    labels: list[str],
    entries: dict[Key, ExplainEntry],
    timed_failed: str | None = None,
) -> list[str]:
    """The step's flame graph links, and a line for each profile taken without the page
    cache dropped before it (`timed_failed`: why the timed run could not drop it
    either, run.json's page_cache)."""
    links, notes = [], []
    for lb in labels:
        entry = entries.get((comp, step, lb))
        p = entry.get("profile") if entry else None
        if not p:
            continue
        if p.get("cache_not_dropped"):
            timed = (
                f"and the timed run recorded a failed drop too ({timed_failed}): both may "
                "have read cached files"
                if timed_failed
                else "unlike the timed run, which dropped it: it may show cached reads where "
                "the timed run read the device"
            )
            notes.append(
                f"The profile of {lb} ran without the page cache dropped before this step "
                f"({p['cache_not_dropped']}), {timed}."
            )
        if p.get("flame"):
            links.append(f"[{lb}]({p['flame']})")
        if p.get("diff"):
            links.append(f"[{lb} vs {labels[0]}]({p['diff']})")
    out = [f"Flame graphs (CPU ns per operation): {', '.join(links)}", ""] if links else []
    return out + [line for n in notes for line in (n, "")]


def _cause_lines(causes: list[cause.Cause]) -> list[str]:
    out = []
    for c in causes:
        figures = "; ".join(_describe(k, v) for k, v in c.figures.items())
        out.append(f"- **{c.text}**" + (f": {figures}" if figures else ""))
    return out


def _describe(key: str, value: Any) -> str:
    if isinstance(value, dict) and "verdict" in value:
        ratio = value.get("ratio")
        ci = value.get("ci")
        text = f"{key} x{ratio:.2f}" if ratio else f"{key} {value['verdict']}"
        return text + (f" [{ci[0]:.2f}, {ci[1]:.2f}]" if ci else "") + f" ({value['verdict']})"
    if isinstance(value, dict) and "base" in value:
        return f"{key} {_num(value['base'])} → {_num(value['other'])} per op"
    if key == "functions":
        return ", ".join(f"`{f['function'][:60]}` {_signed(f['delta'])}" for f in value)
    if value is None:
        return ""
    return f"{key} {value if not isinstance(value, float) else _num(value)}"


def _drop_failed(record: RunJson) -> str | None:
    """Why the timed run could not drop the page cache (run.json), None if it could."""
    return (record.get("page_cache") or {}).get("failed")


def section(explain: ExplainRecord, record: RunJson, verdicts: RunVerdicts) -> list[str]:
    """The report's Explanations section."""
    entries = by_key(explain)
    causes = causes_for(explain, record, verdicts)
    out = [
        "## Explanations",
        "",
        "From `dbregress explain` (docs/metrics.md): each build replayed as the run ran "
        "it, the step's Q calls counted under valgrind's callgrind over a window "
        f"({', '.join(explain.get('method', {}).get('caches', []))}), and its measured "
        "window sampled by perf for the flame graphs. Figures per operation of the "
        "step's Q (per row for the load steps).",
        "",
    ]
    quiet = (explain.get("method", {}).get("replay_settings") or {}).get("postgres")
    if quiet:
        given = ", ".join(f"{k} = {v}" for k, v in quiet.items())
        out += [
            f"PostgreSQL is counted with {given} (unless a column sets them): its "
            "time-driven background work would otherwise fall at other points of the "
            "operations under valgrind than in the run, and change what the backends do.",
            "",
        ]
    lockstep = explain.get("method", {}).get("lockstep_steps")
    if lockstep:
        out += [
            f"In {' and '.join(lockstep)} the inserter and the deleter behind it are "
            "counted taking turns, each batch after the other's: how the two sessions "
            "overlap under valgrind would otherwise change what each leaves the other.",
            "",
        ]
    pmu = explain.get("pmu")
    if pmu and pmu.get("note"):
        out += [f"Hardware counters: {pmu['note']}.", ""]
    profiler = explain.get("profiler")
    if profiler and profiler.get("why_not"):
        out += [f"No flame graphs: {profiler['why_not']}.", ""]
    for comp in record["comparisons"]:
        labels = comp["labels"]
        steps = sorted(
            {s for (c, s, _) in entries if c == comp["name"]},
            key=lambda s: min(e["count"].get("index", 0) for k, e in entries.items() if k[1] == s),
        )
        for step in steps:
            out += [f"### {comp['name']}: {step}", ""]
            out += _figures_table(comp["name"], step, labels, entries)
            out += _functions_table(comp["name"], step, labels, entries)
            out += _flames(comp["name"], step, labels, entries, _drop_failed(record))
            for lb in labels[1:]:
                found = causes.get((comp["name"], lb, step))
                if found:
                    out += [f"Why {lb} is slower than {labels[0]} at {step}:", ""]
                    out += [*_cause_lines(found), ""]
    shown = {(c, s) for (c, s, _) in entries}
    rest = [(k, v) for k, v in causes.items() if (k[0], k[2]) not in shown]
    if rest:
        out += ["### Slower steps not measured by explain", ""]
        for (comp_name, lb, step), found in rest:
            out += [f"{comp_name} {step}, {lb}:", "", *_cause_lines(found), ""]
    return out


def causes_text(run: Path) -> str:
    """What `dbregress explain` prints at its end: the causes, or that none is slower."""
    explain = load(run)
    if explain is None:
        return "No explanations stored."
    data = read_run(run)
    verdicts = compare_run(data.record, data.steps)
    causes = causes_for(explain, data.record, verdicts)
    if not causes:
        return "No step has a `slower` verdict: figures only (see the report's Explanations)."
    lines = []
    for (comp, lb, step), found in causes.items():
        lines.append(f"{comp} {step}, {lb}:")
        lines += [f"  {line[2:]}" for line in _cause_lines(found)]
    return "\n".join(lines)
