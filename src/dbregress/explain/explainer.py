"""`dbregress explain RUN`: pick the steps and columns, size each window from the run,
run the counting and profiling jobs per column, draw the flame graphs, and store it all
in the run folder as explain/explain.json (plus the callgrind files and the SVGs)."""

from __future__ import annotations

import contextlib
import math
import shutil
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from dbregress import benchmarks, provision
from dbregress.analysis import state
from dbregress.analysis.compare import compare_run, measured, usable
from dbregress.benchmarks import insert
from dbregress.benchmarks.plan import PinnedPace
from dbregress.collect import pmu, valgrind
from dbregress.engines.registry import engine_class
from dbregress.execution.execute import run_work_dir, short_name
from dbregress.explain import counting, flame, profiling
from dbregress.explain.jobs import Choice, ColumnJob
from dbregress.explain.store import EXPLAIN_DIR, load, save
from dbregress.lab.file import Comparison, Lab, load_lab
from dbregress.model.errors import DbregressError
from dbregress.shapes.explain import ExplainEntry, ExplainRecord, Profiled, ProfileEntry
from dbregress.shapes.step_result import StepResultJson
from dbregress.store.run import RunData, read_run

# A window's size when --ops is not given: for a step that runs for a duration, as many Q
# calls as took this much time in the run (at least MIN_OPS, at most MAX_OPS), after half
# as many warm-up calls, so each window costs about the same under callgrind (50 to 100
# times slower) whatever the step's speed; for a fixed-work step, the middle half of its
# calls (at most MAX_FIXED_OPS). Windows of 10 ms of calls left the q-steps' counts 1-2%
# apart between two explain runs (their readers and paced writers interleave a little
# differently each time); the middle half of a write step averages over its cycles of
# dead rows piling up and being cleaned. The seeds replay the same operations, so a window's counts
# repeat when the engine's state at the window does; they are as representative as its
# calls are many.
#
# A timed step's window lies at the middle of the time lane's measured window: it opens
# after as many calls as the time lane's step ran up to there (its warm-up and half its
# measured seconds, at the base column's rate in the run) less half the window, when
# those are more than the calls above. The engine's caches then hold what they held on
# average while the time lane measured (docs/verdicts.md, "The counting window"):
# RocksDB's block cache still fills during readwhilewriting's measured second, so a
# window just after the warm-up missed it on 26% of its gets against 10% over the timed
# window. All but the last of those calls run at valgrind's uninstrumented speed (the
# window's warm_ops), so the simulated caches are warmed by as many calls as before.
WINDOW_BUDGET_S = 0.1
MIN_OPS, MAX_OPS = 20, 2000
MAX_FIXED_OPS = 20_000
Notify = Callable[[str], None]


def require_explainable(lab: Lab) -> None:
    """For `explain = true`: what explain needs, checked before the run rather than
    after it (valgrind installed; every engine family can be counted)."""
    valgrind.require()


@dataclass(frozen=True)
class ExplainRequest:
    run: Path
    steps: tuple[str, ...] = ()  # () = the slower ones, else all
    columns: tuple[str, ...] = ()  # () = every column of each comparison, base included
    ops: int | None = None  # the window's Q calls; None = sized from the run
    profile: bool = True  # the flame graphs' perf jobs


def chosen_steps(data: RunData, lab: Lab, steps: tuple[str, ...]) -> dict[str, list[str]]:
    """comparison -> steps to explain: those asked for, else every step with a `slower`
    QPS verdict, else every reported step."""
    out: dict[str, list[str]] = {}
    for comp in lab.comparisons:
        reported = [p.name for p in benchmarks.plans(comp) if p.reported]
        if steps:
            unknown = [s for s in steps if s not in reported]
            if len(unknown) == len(steps) and len(lab.comparisons) == 1:
                raise DbregressError(
                    f"--step: {', '.join(unknown)} not in this run; its steps: "
                    f"{', '.join(reported)}"
                )
            out[comp.name] = [s for s in reported if s in steps]
    if steps:
        if not any(out.values()):
            raise DbregressError(f"--step: none of {', '.join(steps)} is a step of this run")
        return out
    verdicts = compare_run(data.record, data.steps)
    slower = verdicts.slower()
    for comp in lab.comparisons:
        reported = [p.name for p in benchmarks.plans(comp) if p.reported]
        if slower:
            out[comp.name] = [
                s for s in reported if any(k[0] == comp.name and k[2] == s for k in slower)
            ]
        else:
            out[comp.name] = reported
    return out


def chosen_columns(lab: Lab, columns: tuple[str, ...]) -> dict[str, list[str]]:
    labels = {c.label for c in lab.columns}
    unknown = [c for c in columns if c not in labels]
    if unknown:
        raise DbregressError(
            f"--column: unknown {', '.join(unknown)}; this run's columns: "
            f"{', '.join(sorted(labels))}"
        )
    return {
        comp.name: [c.label for c in comp.columns if not columns or c.label in columns]
        for comp in lab.comparisons
    }


@dataclass(frozen=True)
class Sizing:
    """How big a window is when --ops is not given (the constants above)."""

    budget_s: float = WINDOW_BUDGET_S
    min_ops: int = MIN_OPS
    max_ops: int = MAX_OPS
    max_fixed_ops: int = MAX_FIXED_OPS
    # None: a fixed-work step's window is the middle half of its calls (at most
    # max_fixed_ops); else as many calls as took this long in the run (at least min_ops,
    # at most max_fixed_ops), from a quarter of the step's calls on.
    fixed_budget_s: float | None = None
    # A timed step's window lies at the middle of the time lane's measured window
    # (above); False: it opens after half as many calls as it counts, all instrumented.
    timed_middle: bool = True
    # With timed_middle: an engine that reports its cache's state (RocksDB) opens the
    # window as soon as its block cache is as warm as the base's timed window had it
    # (analysis/state.py, until_rate); the middle stays the latest it opens.
    warm_until_state: bool = True


def window_for(
    results: list[StepResultJson],
    index: int,
    plan_name: str,
    ops: int | None,
    fixed: bool,
    sizing: Sizing = Sizing(),
) -> tuple[int, int, float]:
    """(skip_ops, ops, q_per_s) of one column's step, from its repeats in the run."""
    rates, totals = [], []
    for r in results:
        q_op = r["q"]["op"]
        o = r["ops"].get(q_op) if "ops" in r else None
        if o:
            rates.append(float(o["ops_per_s"]))
            totals.append(int(o["ops"]))
    if not rates:
        raise DbregressError(f"step {plan_name} has no usable result in the run to size from")
    rate = statistics.median(rates)
    budget = round(sizing.budget_s * rate)
    n = ops if ops is not None else min(sizing.max_ops, max(sizing.min_ops, budget))
    skip = n // 2
    if fixed:  # the window must fit in the step's own calls
        total = int(statistics.median(totals))
        if ops is None:
            # The middle half of the step's calls: a write step's cost per call rises
            # and falls as dead rows pile up and are cleaned, so a window of a few
            # calls lands anywhere on that cycle (l.i2: 20% apart between two runs).
            half = total // 2
            if sizing.fixed_budget_s is not None:
                half = round(sizing.fixed_budget_s * rate)
            skip, n = total // 4, min(sizing.max_fixed_ops, max(sizing.min_ops, half))
        skip = min(skip, total // 3)
        n = max(1, min(n, total - skip))
    return skip, n, rate


def sizing_results(data: RunData) -> list[StepResultJson]:
    """The step results that size the windows: the undisturbed repeats; a step with none
    (one repeat, disturbed by a neighbour) is sized from its disturbed ones, whose rate
    is merely lower."""
    samples = [r for rs in data.steps.values() for r in usable(rs)]
    have = {(r["column"], r["step"]) for r in samples}
    found = samples + [
        r
        for rs in data.steps.values()
        for r in rs
        if (r["column"], r["step"]) not in have and measured(r)
    ]
    return found


def explain(request: ExplainRequest, notify: Notify) -> Path:
    """Runs every job; returns the path of explain.json."""
    valgrind.require()
    data = read_run(request.run)
    lab = load_lab(request.run / "lab.toml")
    steps = chosen_steps(data, lab, request.steps)
    columns = chosen_columns(lab, request.columns)
    results = sizing_results(data)
    no_perf = flame.perf_can_sample() or (
        f"missing {', '.join(flame.missing_tools())} (make tools)"
        if flame.missing_tools()
        else None
    )
    out_root = request.run / EXPLAIN_DIR
    stored = load(request.run)
    kept = stored.get("results", []) if stored is not None else []
    entries = {(e["comparison"], e["step"], e["column"]): e for e in kept}
    started = time.monotonic()
    for comp in lab.comparisons:
        if not steps.get(comp.name) or not columns.get(comp.name):
            continue
        for column in comp.columns:
            if column.label not in columns[comp.name]:
                continue
            found_windows = windows(comp, steps[comp.name], column.label, results, request.ops)
            job = _column_job(request, lab, comp, column.label, found_windows)
            found = _run_column(job, request.profile and no_perf is None, notify)
            for step, entry in found.items():
                entries[(comp.name, step, column.label)] = entry
        _flames(out_root, comp, steps[comp.name], entries)
    with contextlib.suppress(OSError):  # each column removed its own work directory
        run_work_dir(request.run.name, "explain").rmdir()
    record: ExplainRecord = {
        "run_id": data.record["run_id"],
        "created_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "took_s": round(time.monotonic() - started, 1),
        "valgrind": valgrind.version(),
        "method": {
            "counts": "callgrind --cache-sim=yes --branch-sim=yes over a window of the "
            "step's Q calls; costs zeroed at the window's open and dumped at its close "
            "through vgdb while the loadgen waits at each edge",
            "caches": list(valgrind.CACHES),
            "replay_settings": {"postgres": engine_class("postgres").COUNTING_SETTINGS},
            "lockstep_steps": list(insert.LOCKSTEP_STEPS),
            "profile": f"perf record -e cpu-clock -F {profiling.PERF_HZ} --call-graph "
            f"{profiling.PERF_CALL_GRAPH} over the measured window, folded by inferno",
        },
        "profiler": {"available": no_perf is None, "why_not": no_perf},
        "pmu": pmu.detect().to_json(),
        "results": sorted(entries.values(), key=lambda e: (e["comparison"], e["column"])),
    }
    return save(request.run, record)


def windows(
    comp: Comparison,
    steps: list[str],
    label: str,
    results: list[StepResultJson],
    window_ops: int | None = None,
    sizing: Sizing = Sizing(),
    own_pace: bool = True,
) -> dict[str, Choice]:
    """The column's windows. Every column of a step gets the base's size and, for a
    fixed-work step, the base's warm-up (the same calls: the seeds make them the same
    operations); a timed step's window lies at the middle of the base's measured window
    in the run (timed_middle, at the base's rate, in every column: the same calls).
    Each column gets its own q_per_s (its writers keep its own run's mix), or with
    `own_pace` off (the cost lane) a paced step gets its pinned window (pinned_window:
    the same in every build and on every host) and the others the base's q_per_s."""
    choices = {}
    for index, plan in enumerate(benchmarks.plans(comp), start=1):
        if plan.name not in steps:
            continue
        sized = {}
        for who in (comp.base.label, label):
            mine = [r for r in results if r["column"] == who and r["step"] == plan.name]
            sized[who] = window_for(mine, index, plan.name, window_ops, not plan.duration_s, sizing)
        skip, ops, _ = sized[comp.base.label]
        warm = 0
        until = 0.0
        if plan.duration_s and sizing.timed_middle:
            # Where the base's timed window was, in every column: both builds count the
            # same operations. At each column's own rate the windows of an A/A pair sat
            # where the time lane's noise put them, and counted 1-1.3% apart on four
            # RocksDB steps with replays agreeing to 0.1% (false verdicts). A build whose
            # state there differs from its own timed window's is caught by the state check.
            rate = sized[comp.base.label][2]
            skip, warm = timed_middle(skip, ops, rate, comp.sizes.warmup(), plan.duration_s)
            # Or earlier, once the cache is as warm as the base's timed window had it
            # (the same rate for every column); the middle is the latest it opens.
            if sizing.warm_until_state and warm:
                base_results = [
                    r for r in results if r["column"] == comp.base.label and r["step"] == plan.name
                ]
                until = state.until_rate(state.timed(base_results))
        pace = sized[label if own_pace else comp.base.label][2]
        pin = None if own_pace or not plan.duration_s else benchmarks.counted_pace(comp, plan)
        if pin is not None and sizing.timed_middle:
            skip, ops, warm = pinned_window(pin, sizing, comp.sizes.warmup(), plan.duration_s)
            pace, until = pin.q_per_s, until if warm else 0.0
        own = [r for r in results if r["column"] == label and r["step"] == plan.name]
        choices[plan.name] = Choice(
            index,
            plan,
            skip,
            ops,
            pace,
            warm_ops=warm,
            timed=state.timed(own),
            until_hit_rate=until,
        )
    return choices


def timed_middle(
    skip: int, ops: int, rate: float, warmup_s: float, duration_s: float
) -> tuple[int, int]:
    """(skip_ops, warm_ops) of a timed step's window of `ops` calls centred on the
    middle of the time lane's measured window: after its warm-up and half its measured
    seconds at the column's `rate` in the run, less half the window; the last `skip` of
    them instrumented. Unchanged when that comes before `skip` calls."""
    before = round((warmup_s + duration_s / 2) * rate) - ops // 2
    if before <= skip:
        return skip, 0
    return before, skip


def pinned_window(
    pin: PinnedPace, sizing: Sizing, warmup_s: float, duration_s: float
) -> tuple[int, int, int]:
    """(skip_ops, ops, warm_ops) of a paced step's counted window at its pinned pace
    (PinnedPace), from the step's spec alone: a whole number of write periods (Q calls
    per writer operation, at least the sizing's calls at the pinned pace) centred on
    the writes the time lane made by the middle of its measured window (its warm-up and
    half its seconds at the step's own writer rate: the same rows in every column and
    on every host). Its edges, and the instrumented warm-up's start, sit half a period
    from a write, so each window holds exactly as many writes as periods (the loadgen
    runs a write due by the window's clock before the Q call that reaches it)."""
    period = pin.calls_per_write
    wanted = min(sizing.max_ops, max(sizing.min_ops, round(sizing.budget_s * pin.q_per_s)))
    periods = max(1, math.ceil(wanted / period))
    ops = periods * period
    writes = round((warmup_s + duration_s / 2) * pin.writes_per_s)
    half = period // 2
    skip = (writes - math.ceil(periods / 2)) * period + half
    warm = (ops // 2 // period) * period + half
    if skip <= warm:  # too early for a warm-up: every call before it instrumented
        return max(skip, half), ops, 0
    return skip, ops, warm


def _column_job(
    request: ExplainRequest, lab: Lab, comp: Comparison, label: str, choices: dict[str, Choice]
) -> ColumnJob:
    column = next(c for c in comp.columns if c.label == label)
    work = run_work_dir(request.run.name, "explain") / short_name(f"{comp.name}/{label}")
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    work.chmod(0o755)
    work.parent.chmod(0o755)
    out = request.run / EXPLAIN_DIR / label
    out.mkdir(parents=True, exist_ok=True)
    return ColumnJob(lab, comp, column, provision.fetch(column.build), choices, work, out)


def _run_column(job: ColumnJob, profile: bool, notify: Notify) -> dict[str, ExplainEntry]:
    entries: dict[str, ExplainEntry] = {}
    try:
        counted = counting.count(job, notify)
        profiled = profiling.profile(job, notify) if profile else {}
    finally:
        shutil.rmtree(job.work, ignore_errors=True)
    for step, figures in counted.items():
        entry: ExplainEntry = {
            "comparison": job.comparison.name,
            "step": step,
            "column": job.column.label,
            "build": str(job.column.build),
            "embedded": job.embedded,
            "count": figures,
            "profile": None,
        }
        p = profiled.get(step)
        if p is not None:
            folded = job.out / f"{step}.folded"
            folded.write_text(p["folded"])
            entry["profile"] = _stored_profile(p, str(folded.relative_to(job.out.parent.parent)))
        entries[step] = entry
    return entries


def _stored_profile(p: Profiled, folded: str) -> ProfileEntry:
    """A step's profile as stored: its folded stacks in a file of their own, `folded`
    (a path in the run folder)."""
    stored: ProfileEntry = {
        "samples": p["samples"],
        "cpu_s": p["cpu_s"],
        "count": p["count"],
        "elapsed_s": p["elapsed_s"],
        "hz": p["hz"],
        "pmu_per_op": p["pmu_per_op"],
        "folded": folded,
    }
    if p.get("cache_not_dropped"):
        stored["cache_not_dropped"] = p["cache_not_dropped"]
    return stored


def _flames(
    root: Path,
    comp: Comparison,
    steps: list[str],
    entries: dict[tuple[str, str, str], ExplainEntry],
) -> None:
    """Per step: a flame graph per build, and per column one of its change from the base."""
    base = comp.base.label
    for step in steps:
        have = {
            lb: p
            for (c, s, lb), e in entries.items()
            if c == comp.name and s == step and (p := e.get("profile"))
        }
        folded = {lb: root.parent / p["folded"] for lb, p in have.items()}
        for label, p in list(have.items()):
            if not folded[label].read_text().strip():
                p["why_no_flame"] = "perf sampled nothing in the measured window"
                del have[label], folded[label]
        for label, p in have.items():
            svg = root / "flame" / comp.name / step / f"{label}.svg"
            title = f"{step} on {label}: CPU ns per operation"
            flame.flamegraph(folded[label].read_text(), title, svg)
            p["flame"] = str(svg.relative_to(root.parent))
            if label != base and base in folded:
                diff = root / "flame" / comp.name / step / f"{label}-vs-{base}.svg"
                title = f"{step}: {label} vs {base} (red: more CPU per operation)"
                flame.differential(folded[base], folded[label], title, diff)
                p["diff"] = str(diff.relative_to(root.parent))
