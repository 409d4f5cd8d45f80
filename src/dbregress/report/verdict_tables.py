"""Markdown sections built on verdicts: relative QPS with its interval and mark, the
verdict table with reasons, and what the host did during the measured windows."""

from __future__ import annotations

import statistics
from collections.abc import Mapping

from dbregress.analysis import state
from dbregress.analysis.compare import RunVerdicts, lane_gaps
from dbregress.analysis.cost import CostComparison
from dbregress.analysis.cost_methods import COST_METRICS
from dbregress.analysis.summary import Matrix
from dbregress.analysis.verdict import StepVerdict
from dbregress.collect.hostprobe import describe
from dbregress.report.count_store import StoreReport
from dbregress.shapes.calibration import Calibration
from dbregress.shapes.run import RunJson
from dbregress.shapes.step_result import StepResultJson

# A mark says what the verdict claims, never what a single number looks like.
QPS_MARKS = {"slower": "(-)", "faster": "(+)", "same": "=", "undecided": "?"}
LEGEND = (
    "(-) slower and (+) faster: the change is beyond chance at the lab's false-alarm "
    "rate; = the same: the interval lies within the equivalence band; ? undecided: "
    "more repeats needed. Ratio: Hodges-Lehmann estimate over repeats; [interval]: "
    "its {ci:.0%} confidence interval (`same` is judged on the narrower {tost:.0%} one, so "
    "a = can show a {ci:.0%} interval wider than the band; docs/verdicts.md)."
)

PAIRED_LEGEND = (
    "(-) slower and (+) faster: the change is beyond chance at the lab's false-alarm "
    "rate; = the same: the interval lies within the equivalence band; ? undecided: "
    "more repeats needed. Interleaved schedule: each repeat's ratio pairs the column's "
    "slices with the base's of the same turns; Ratio: geometric mean over repeats; "
    "[interval]: its {ci:.0%} t interval (`same` is judged on the narrower {tost:.0%} "
    "one; docs/verdicts.md, The interleaved schedule)."
)


def table(header: list[str], rows: list[list[str]]) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return [*out, ""]


def ratio_text(c: StepVerdict | None, marks: dict[str, str] = QPS_MARKS) -> str:
    if c is None or c.ratio is None:
        return "-"
    text = f"{c.ratio:.2f} {marks.get(c.verdict, '?')}"
    if c.ci is not None:
        text += f" [{c.ci[0]:.2f}, {c.ci[1]:.2f}]"
    return text


def policy_line(v: RunVerdicts) -> str:
    p = v.policy
    return (
        f"False-alarm rate {p.alpha:.0%} over the whole lab (Benjamini-Hochberg), "
        f"equivalence band ±{p.band:.0%}."
    )


def counts_line(found: Mapping[tuple[str, str], StepVerdict | CostComparison]) -> str:
    counts = {k: 0 for k in QPS_MARKS}
    for c in found.values():
        counts[c.verdict] = counts.get(c.verdict, 0) + 1
    return ", ".join(f"{n} {k}" for k, n in counts.items())


def relative_qps(m: Matrix, v: RunVerdicts) -> list[str]:
    others = m.labels[1:]
    if not others:
        return []
    found = v.for_comparison(m.comparison)
    rows = [[s, *(ratio_text(found.get((lb, s))) for lb in others)] for s in m.steps]
    return [
        f"### Relative QPS (vs {m.base})",
        "",
        f"Verdicts: {counts_line(found)}. {policy_line(v)}",
        "",
        (PAIRED_LEGEND if v.paired else LEGEND).format(
            ci=1 - v.policy.alpha, tost=1 - 2 * v.policy.alpha
        ),
        "",
        *table(["step", *others], rows),
    ]


def verdicts(m: Matrix, v: RunVerdicts) -> list[str]:
    """Every (step, column) verdict with the figures behind it."""
    found = v.for_comparison(m.comparison)
    rows = []
    for s in m.steps:
        for lb in m.labels[1:]:
            c = found.get((lb, s))
            if c is None:
                continue
            more = f"+{c.more_repeats}" if c.more_repeats is not None else "-"
            rows.append(
                [
                    s,
                    lb,
                    ratio_text(c),
                    c.verdict,
                    f"{c.n_base}/{c.n_other}",
                    more if c.verdict == "undecided" else "",
                    c.reason,
                ]
            )
    if not rows:
        return []
    header = ["step", "column", "ratio [CI]", "verdict", "repeats", "more", "why"]
    return [
        f"### Verdicts (vs {m.base})",
        "",
        "repeats: base/column repeats used; more: repeats per side that would probably "
        "decide an undecided step.",
        "",
        *table(header, rows),
    ]


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.1%}"


def noise_line(results: list[StepResultJson]) -> str:
    """One sentence on what else used the host during the measured windows ("" if no
    window says)."""
    hosts = [h for r in results if r.get("status") == "ok" and (h := r.get("host"))]
    if not hosts:
        return ""
    steal = _median([f for h in hosts if (f := h.get("steal_frac")) is not None])
    other = _median([f for h in hosts if (f := h.get("other_cpu_frac")) is not None])
    return (
        f"Over {len(hosts)} measured windows, median steal {_pct(steal)} and median CPU "
        f"used by other processes {_pct(other)} of the host. "
    )


def host_noise(results: list[StepResultJson], v: RunVerdicts) -> list[str]:
    """What else used the host during the measured windows, and which repeats it spoiled."""
    line = noise_line(results)
    if not line:
        return []
    out = ["## Host noise", "", line]
    if v.disturbed:
        rows = [[d.column, str(d.repeat), d.step, d.why] for d in v.disturbed]
        out += [
            f"{len(v.disturbed)} disturbed repeat(s) were left out of the verdicts:",
            "",
            *table(["column", "repeat", "step", "why"], rows),
        ]
    else:
        out += ["No repeat was disturbed.", ""]
    return out


def calibration(cal: Calibration | None) -> list[str]:
    """The host's last calibration, so a reader knows what change these repeats can see."""
    if not cal:
        return []
    out = [
        "## This host's calibration",
        "",
        f"`dbregress calibrate {cal.get('lab', '?')}` on {cal.get('measured_at', '?')}:",
        "",
    ]
    rows = calibration_rows(cal)
    out += table(["placement", "median CV", "median detectable change", "A/A run"], rows)
    if cal.get("steadiest") and len(rows) > 1:
        out += [f"Steadiest placement: {cal['steadiest']}.", ""]
    for line in probe_lines(cal):
        out += [line, ""]
    return out


def probe_lines(cal: Calibration) -> list[str]:
    """What the host probes said before and after the A/A runs (collect/hostprobe.py)."""
    probes = cal.get("host_probe")
    if not probes:
        return []
    return [
        f"Host probe {when} the A/A runs, no engine running: {describe(probe)}."
        for when, probe in (("before", probes.get("before")), ("after", probes.get("after")))
        if probe
    ]


def calibration_rows(cal: Calibration) -> list[list[str]]:
    """Per placement: median CV, median detectable change, the A/A run."""
    rows = []
    for mode, p in cal.get("placements", {}).items():
        steps = p.get("steps", [])
        changes = [c for s in steps if (c := s.get("min_change")) is not None]
        rows.append(
            [
                mode,
                _pct(p.get("median_cv")),
                _pct(_median(changes)),
                p.get("run_id", "?"),
            ]
        )
    return rows


def cost_text(c: CostComparison | None) -> str:
    """A cost ratio (column over base: above 1 is more work per operation) with its mark
    and interval, to three decimals: its changes are small and its intervals narrow."""
    if c is None or c.ratio is None:
        return "-"
    text = f"{c.ratio:.3f} {QPS_MARKS.get(c.verdict, '?')}"
    if c.small and c.ci is not None:
        return f"{text} · {small_text(c.ratio, c.ci)} small"
    if c.ci is not None:
        text += f" [{c.ci[0]:.3f}, {c.ci[1]:.3f}]"
    return text


def small_text(ratio: float, ci: tuple[float, float]) -> str:
    """A small change in percent with its interval: `+0.42% [0.39, 0.45]`."""
    lo, hi = (100 * (v - 1) for v in ci)
    return f"{100 * (ratio - 1):+.2f}% [{lo:.2f}, {hi:.2f}]"


def reading(time: StepVerdict | None, cost: CostComparison | None) -> str:
    """One line that reads the two lanes together where they say different things."""
    t = time.verdict if time is not None else "undecided"
    c = cost.verdict if cost is not None else None
    if c is None or t == c:
        if c == "slower":
            return (
                "more work per operation, and slower in time: a CPU regression (explain names it)"
            )
        return ""
    if c == "same" and t == "slower":
        return "slower in time at the same work per operation: waiting, IO or contention"
    if c == "same" and t == "faster":
        return "faster in time at the same work per operation: less waiting, IO or contention"
    if c == "slower" and t == "undecided":
        return "more work per operation; this host is too noisy to confirm it in time"
    if c == "faster" and t == "undecided":
        return "less work per operation; this host is too noisy to confirm it in time"
    if c == "slower" and t == "same":
        return "more work per operation that does not show in time (waits hide it, or it is small)"
    if c == "slower" and t == "faster":
        return "more work per operation but faster in time: less waiting outweighs it"
    if c == "faster" and t == "slower":
        return "less work per operation but slower in time: waiting, IO or contention"
    if c == "faster" and t == "same":
        return "less work per operation that does not show in time"
    if c == "undecided" and t in ("slower", "faster"):
        return f"{t} in time; the counts' replays did not decide"
    return ""


def lanes_counts(v: RunVerdicts, comparison: str) -> str:
    """The summary line over both lanes of one comparison."""
    time = v.for_comparison(comparison)
    line = f"time lane (QPS): {counts_line(time)}"
    if v.cost is None:
        return line + "; no cost lane (valgrind missing, or count = false)"
    cost = {(col, s): c for (comp, col, s), c in v.cost.headline().items() if comp == comparison}
    return f"{line}; cost lane (estimated cycles/op): {counts_line(cost)}"


LanePair = tuple[str, str, StepVerdict | None, CostComparison | None, CostComparison | None]


def lane_pairs(m: Matrix, v: RunVerdicts) -> list[LanePair]:
    """(step, column, time verdict, cost verdict, instructions verdict) of every non-base
    column and step of a comparison: what the Markdown and HTML both-lanes tables show."""
    found = v.for_comparison(m.comparison)
    return [
        (s, lb, found.get((lb, s)), v.cost_for(key), v.cost_metric("instructions", key))
        for s in m.steps
        for lb in m.labels[1:]
        for key in [(m.comparison, lb, s)]
    ]


def both_lanes(m: Matrix, v: RunVerdicts, stored: StoreReport | None = None) -> list[str]:
    """Per step and column, the time verdict beside the cost verdict, and a reading
    where they differ; where a verdict pooled replays taken from the count store
    (`stored`), how many of each side's this run counted."""
    if v.cost is None or len(m.labels) < 2:
        return []
    rows = []
    for s, lb, time, cost, instr in lane_pairs(m, v):
        replays = f"{cost.replays[0]}/{cost.replays[1]}" if cost is not None else "-"
        if cost is not None and stored is not None:
            replays += stored.fresh_text((m.comparison, lb, s))
        row = [ratio_text(time), cost_text(cost), cost_text(instr), replays, reading(time, cost)]
        rows.append([s, lb, *row])
    p = v.policy
    header = [
        "step",
        "column",
        "time: QPS",
        "cost: est. cycles/op",
        "instr/op",
        "replays",
        "reading",
    ]
    return [
        f"### Both lanes (vs {m.base})",
        "",
        f"Verdicts: {lanes_counts(v, m.comparison)}.",
        "",
        "Time: relative QPS over repeats (higher is faster). Cost: estimated cycles per "
        "operation, column over base, from counting replays under valgrind (higher is more "
        f"work; (-) slower means more work); `same` within ±{p.cost_band:.0%}; replays: "
        "base/column counting replays used"
        + (
            ", (fresh base/column) of them counted in this run where some were taken "
            "from the count store"
            if any("(fresh" in r[5] for r in rows)
            else ""
        )
        + " (docs/verdicts.md).",
        "",
        *table(header, rows),
    ]


def cost_details(m: Matrix, v: RunVerdicts) -> list[str]:
    """Every count per operation of the cost lane: base and column values, ratio,
    verdict and reason, and the background work beside the foreground."""
    if v.cost is None:
        return []
    rows = []
    for s in m.steps:
        for lb in m.labels[1:]:
            key = (m.comparison, lb, s)
            for metric in COST_METRICS:
                c = v.cost_metric(metric.key, key)
                if c is None:
                    continue
                rows.append(
                    [
                        s,
                        lb,
                        metric.label,
                        _count(c.base),
                        _count(c.value),
                        cost_text(c),
                        c.verdict,
                        f"{max(c.spread):.2%}",
                        c.reason,
                    ]
                )
            head = v.cost_for(key)
            if head is not None and any(b is not None for b in head.background):
                b0, b1 = head.background
                rows.append(
                    [
                        s,
                        lb,
                        "background est. cycles/op",
                        _count(b0),
                        _count(b1),
                        "",
                        "",
                        "",
                        "not judged: background work lands differently under valgrind",
                    ]
                )
            if head is not None and any(side is not None for side in head.state):
                rows.append([s, lb, _state_label(head), *_state(head)])
    if not rows:
        return []
    header = ["step", "column", "count", m.base, "column", "ratio [CI]", "verdict", "spread", "why"]
    return [
        f"### Cost lane: counts per operation (vs {m.base})",
        "",
        "Foreground: the engine's work for the benchmark's sessions (server backends or "
        "connection threads; for RocksDB its library's calls from the loadgen, the loadgen's "
        "own code left out). spread: the largest max/min - 1 of "
        "either side's replays. Cache misses per op (hit rate), counted (mean over replays) / "
        "timed (the step's measured window): a side further apart than the misses that would "
        f"move its count by {state.BAND_SHARE:.0%} of the cost band gets no cost verdict "
        "(docs/verdicts.md, The engine's state).",
        "",
        *table(header, rows),
    ]


def _state_label(c: CostComparison) -> str:
    kinds = {side.kind for side in c.state if side is not None}
    rates = any(side is not None and side.counted is not None for side in c.state)
    what = " / ".join(sorted(state.COUNTED.get(k, k) for k in kinds))
    return f"{what}: misses/op{' (hit rate)' if rates else ''}, counted / timed"


def _state(c: CostComparison) -> list[str]:
    """Each side's cache misses per operation (and hit rate, where the engine counts
    hits) over its counted windows and its timed window, and whether they met within
    the tolerance (analysis/state.py)."""

    def misses(value: float | None) -> str:
        return "-" if value is None else f"{value:.4f}"

    def rate(value: float | None) -> str:
        return "" if value is None else f" ({value:.1%})"

    cells = [
        "-"
        if side is None
        else f"{misses(side.counted_misses)}{rate(side.counted)} / "
        f"{misses(side.timed_misses)}{rate(side.timed)}"
        for side in c.state
    ]
    tolerances = [f"±{s.tolerance:.4f}" for s in c.state if s is not None and s.tolerance]
    mismatch = [side.mismatch for side in c.state if side is not None and side.mismatch]
    # a side's counted windows missed the timed state, or it was not measured (the
    # verdict's reason says which side and how: analysis/state.py `mismatch`)
    missed = any(m.startswith("counted windows missed") for m in mismatch)
    why = (
        "a side's counted windows missed its timed window's state: no verdict"
        if missed
        else "a side's engine state was not measured: no verdict"
        if mismatch
        else "the counted windows met the timed window's state"
    )
    if tolerances:
        why += f" (tolerance {', '.join(tolerances)} misses/op)"
    return [*cells, "", "", "", why]


def _count(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:,.0f}" if value >= 100 else f"{value:.3g}"


def lanes_line(record: RunJson, v: RunVerdicts) -> str:
    """Which lanes judged this run, and why a lane did not: the report's first claim."""
    gaps = lane_gaps(v, record)
    parts = []
    schedule = record.get("schedule") or "jobs"
    time_what = f"time lane (QPS, {schedule} schedule)"
    if "time" in gaps:
        parts.append(f"{time_what}: no verdict, {gaps['time']}")
    else:
        decided, judged = v.decided("time")
        parts.append(f"{time_what}: {decided} of {judged} steps decided")
    if v.cost is None:
        parts.append(f"cost lane: {gaps.get('cost', 'none')}")
    else:
        decided, judged = v.decided("cost")
        parts.append(
            f"cost lane (counting replays under valgrind, `same` within "
            f"±{v.policy.cost_band:.0%}): {decided} of {judged} steps decided"
        )
    return "Lanes: " + "; ".join(parts) + "."
