"""A step prepared in one place: the engine's options, the loadgen's step spec and the
step's deadline, for a run's time lane, its cost lane (the counting replays) and
`dbregress explain` alike. They must never measure different steps, so none of them
builds a spec, a size or a timeout of its own.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from dbregress import benchmarks
from dbregress.benchmarks.plan import StepPlan
from dbregress.engines.base import Engine, EngineOptions, Sizes
from dbregress.lab import Column, Comparison, Lab


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
        stop_timeout_s=60.0 * slow,
        wrapper=wrapper,
    )


def step_spec(
    lab: Lab, comparison: Comparison, column: Column, engine: Engine, index: int, plan: StepPlan
) -> dict[str, Any]:
    """The loadgen's spec of step `index` (1-based) of the comparison's benchmark: the
    same seed, warm-up and injected slowdown in every job and replay of the column."""
    spec = benchmarks.step_spec(comparison, engine.connection(), plan, lab.seed * 1000 + index)
    warmup = comparison.sizes.warmup() if plan.duration_s else 0.0
    spec.update(warmup_s=warmup, inject_slowdown=column.inject_slowdown)
    return spec


def step_timeout(lab: Lab, plan: StepPlan, spec: dict[str, Any], slow: float = 1.0) -> float:
    """The step's deadline: the lab's `step_timeout_s`, else ten times its expected
    length plus two minutes; times `slow` for a step run under valgrind."""
    plain = lab.step_timeout_s or (plan.expected_s() + spec["warmup_s"]) * 10 + 120
    return plain * slow
