"""A step prepared in one place: the engine's options, the loadgen's step spec and the
step's deadline, for a run's time lane, its cost lane (the counting replays) and
`dbregress explain` alike. They must never measure different steps, so none of them
builds a spec, a size or a timeout of its own.

A step is run in one of four modes (Mode), and what a mode changes in the spec is
written here, as the mode's own fields, rather than patched in by its caller:

- `timed`: a job of the time lane, as the lab says;
- `interleaved`: a turn of the interleaved schedule, the loadgen's `slices` added;
- `count`: a counting replay under callgrind: the Insert Benchmark's inserter and
  deleter in lockstep, closed-loop write steps from a settled engine, and the counted
  `window` (Window);
- `profile`: `dbregress explain`'s perf replay, as timed.
"""

from __future__ import annotations

import enum
import os
from dataclasses import dataclass
from pathlib import Path

from dbregress import benchmarks
from dbregress.analysis.state import PROBE_EVERY
from dbregress.benchmarks import insert, kv
from dbregress.benchmarks.plan import StepPlan
from dbregress.engines.base import Engine, EngineOptions, Sizes
from dbregress.lab.file import STORAGE_BOUND_CONFIGS, Column, Comparison, Lab
from dbregress.lab.micro_names import WRITES
from dbregress.shapes.spec import EngineSpec, Slices, StepSpec, WindowSpec


def host_memory() -> int:
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def engine_sizes(comparison: Comparison) -> Sizes:
    return benchmarks.engine_sizes(comparison, host_memory())


def engine_options(
    lab: Lab,
    comparison: Comparison,
    column: Column,
    workdir: Path,
    log_path: Path,
    *,
    settings: dict[str, str] | None = None,
    slow: float = 1.0,
    wrapper: tuple[str, ...] = (),
    pin: bool = True,
) -> EngineOptions:
    """The engine's options for a job of `column`: the column's config and settings
    (`settings` replaces them where a replay needs its own, over the column's), the
    comparison's sizes, the lab's placement (unless `pin` is off: counting replays run
    side by side on every CPU) and its start timeout, times `slow` for an engine run
    under valgrind."""
    return EngineOptions(
        workdir=workdir,
        log_path=log_path,
        config_name=column.config,
        settings=dict(column.settings) if settings is None else settings,
        sizes=engine_sizes(comparison),
        cpus=lab.placement.server_cpus if pin else None,
        start_timeout_s=lab.start_timeout_s * slow,
        # under valgrind at most 3 minutes: the counted windows are dumped while the
        # engine runs, so a shutdown that hangs (a child valgrind itself crashed in, seen
        # as callgrind's "vgCallgrind_post_signal" assertion) loses nothing by the kill,
        # where 20 minutes of waiting held the whole cost lane
        stop_timeout_s=60.0 * min(slow, STOP_SLOW_MAX),
        wrapper=wrapper,
    )


STOP_SLOW_MAX = 3.0  # the most a slow engine's (valgrind's) stop timeout is stretched


class Mode(enum.Enum):
    TIMED = "timed"
    INTERLEAVED = "interleaved"
    COUNT = "count"
    PROFILE = "profile"


TIMED, INTERLEAVED, COUNT, PROFILE = Mode

# A fixed-work step's slices per side in the interleaved schedule, roughly.
SLICES_PER_FIXED_STEP = 40


@dataclass(frozen=True)
class Window:
    """A counting replay's window over a step's Q calls: `skip_ops` calls run first
    (the last `warm_ops` of them instrumented, warming the simulated caches; 0: all of
    them), then `ops` calls are counted. Paced writers run at `q_per_s`, the base's Q
    rate, so every build counts as many writes per call. With `until_hit_rate` the
    window opens as soon as the block cache is that warm (probed every PROBE_EVERY
    calls), skip_ops being the latest it opens; only the one calling thread of a
    single-client step can probe."""

    skip_ops: int
    ops: int
    q_per_s: float
    warm_ops: int = 0
    until_hit_rate: float = 0.0

    def to_spec(self, clients: int) -> WindowSpec:
        out: WindowSpec = {
            "skip_ops": self.skip_ops,
            "ops": self.ops,
            "q_per_s": round(self.q_per_s, 3),
            "warm_ops": self.warm_ops,
        }
        if self.until_hit_rate > 0 and clients == 1:
            out["until_hit_rate"] = round(self.until_hit_rate, 5)
            out["probe_every"] = PROBE_EVERY
        return out


def step_spec(
    lab: Lab,
    comparison: Comparison,
    column: Column,
    engine: Engine,
    index: int,
    plan: StepPlan,
    mode: Mode = Mode.TIMED,
    window: Window | None = None,
) -> StepSpec:
    """The loadgen's spec of step `index` (1-based) of the comparison's benchmark in
    `mode`: the same seed, warm-up and injected slowdown in every job and replay of the
    column; a counting replay's step counts `window` (None: it runs uncounted, as the
    mode runs it)."""
    return spec_for(lab, comparison, column, engine.connection(), index, plan, mode, window)


def spec_for(
    lab: Lab,
    comparison: Comparison,
    column: Column,
    connection: EngineSpec,
    index: int,
    plan: StepPlan,
    mode: Mode = Mode.TIMED,
    window: Window | None = None,
) -> StepSpec:
    """step_spec with the engine's `connection` given (the count store keys a replay's
    steps by their specs with none: cost/planning.py count_key)."""
    if window is not None and mode is not Mode.COUNT:
        raise ValueError(f"a window is counted in the count mode only, not {mode.value}")
    spec = benchmarks.step_spec(comparison, connection, plan, lab.seed * 1000 + index)
    warmup = comparison.sizes.warmup() if plan.duration_s else 0.0
    spec["warmup_s"] = warmup
    spec["inject_slowdown"] = column.inject_slowdown
    if mode is Mode.INTERLEAVED:
        spec["slices"] = slice_spec(plan, lab.slice_ms)
    elif mode is Mode.COUNT:
        spec = count_spec(spec)
        if window is not None:
            spec["window"] = window.to_spec(int(spec.get("clients", 1)))
    return spec


def slice_spec(plan: StepPlan, slice_ms: int) -> Slices:
    """The loadgen's `slices` of an interleaved step: time slices for a timed step; for
    a fixed-work step, slices of equal work (Q calls), so every side has done the same
    part of the step at the end of each turn and ends the step in the same state."""
    if plan.duration_s:
        return {"ms": slice_ms}
    rows = plan.section.get("rows_per_commit") or insert.ROWS_PER_COMMIT.get(plan.step, 1)
    per_call = int(rows)
    calls = plan.work // per_call if plan.work else 1
    return {"q_calls": max(1, calls // SLICES_PER_FIXED_STEP)}


def count_spec(spec: StepSpec) -> StepSpec:
    """A step's spec for the counting replay: the Insert Benchmark's l.i1 and l.i2 in
    lockstep (insert.LOCKSTEP_STEPS); closed-loop write steps of the kv and micro
    benchmarks start from a settled engine (kv.SETTLE_STEPS, the micro writes)."""
    workload = spec["workload"]
    kind, step = workload["kind"], workload["step"]
    if kind == "insert" and step in insert.LOCKSTEP_STEPS:
        spec = {**spec, "workload": {**workload, "lockstep": True}}
    if (kind == "kv" and step in kv.SETTLE_STEPS) or (kind == "micro" and step in WRITES):
        spec = {**spec, "settle_first": True}
    return spec


def step_timeout(lab: Lab, plan: StepPlan, spec: StepSpec, slow: float = 1.0) -> float:
    """The step's deadline: the lab's `step_timeout_s`, else ten times its expected
    length plus two minutes; times `slow` for a step run under valgrind."""
    plain = lab.step_timeout_s or (plan.expected_s() + spec.get("warmup_s", 0.0)) * 10 + 120
    return plain * slow


def drops_at_start(lab: Lab, column: Column) -> bool:
    """Whether a job of `column` starts with the page cache dropped (`drop_caches`; by
    default when the column is storage-bound): the timed run and explain's profiling
    replay decide it alike."""
    if lab.drop_caches is not None:
        return lab.drop_caches
    return column.config in STORAGE_BOUND_CONFIGS


def drops_page_cache(lab: Lab, comparison: Comparison) -> bool:
    """Whether each step after the first of the comparison's jobs starts with the page
    cache dropped (`drop_caches`; by default when a column of it is storage-bound, so
    every column starts its steps in the same state; a job's own start is decided per
    column): the timed run and explain's profiling replay decide it alike."""
    if lab.drop_caches is not None:
        return lab.drop_caches
    return any(c.config in STORAGE_BOUND_CONFIGS for c in comparison.columns)
