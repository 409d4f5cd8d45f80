"""One column's benchmark replayed from a fresh engine, as the run ran it (the lab's
config, sizes, seeds, placement and injected slowdown), with the chosen steps measured:

- `count` (counting.py): the chosen steps run under callgrind for a window of their Q
  calls (the loadgen's `window`: warm-up calls, then the counted ones, paused at both
  edges while vgdb zeroes and dumps the counters). PostgreSQL runs under valgrind for the
  whole job (instrumentation off outside the windows, so its backends are forked children
  of a valgrind'd postmaster); RocksDB, embedded, runs in the loadgen, which runs under
  valgrind for the chosen steps only.
- `profile` (profiling.py): every step at full speed; over each chosen step's measured
  window, `perf record` samples the server's (or the loadgen's) stacks.

Steps that are not chosen run as they did in the run, so the data a chosen step meets
is the data it met there. This module holds what both replays share: the job (ColumnJob),
the chosen steps (Choice), the engine and the replay of every step in order.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from dbregress import benchmarks
from dbregress.analysis.state import CacheState
from dbregress.benchmarks.plan import StepPlan
from dbregress.collect.cache_drop import drop_page_cache
from dbregress.engines.base import Engine
from dbregress.engines.registry import engine_class
from dbregress.execution import prepare
from dbregress.execution.execute import make_engine
from dbregress.execution.prepare import COUNT, PROFILE
from dbregress.execution.session import EngineSession
from dbregress.explain.stepper import Stepped, drive
from dbregress.lab.file import Column, Comparison, Lab
from dbregress.provision import Build
from dbregress.shapes.spec import StepSpec

Notify = Callable[[str], None]
SLOWDOWN = 20  # timeouts of a step run under valgrind: this many times the plain one


def count_settings(job: ColumnJob) -> dict[str, str]:
    """The settings of the counting replay: the column's, over the engine's own
    adjustments for counting for the build's version (its counting_settings:
    engines/postgres.py's QUIET_POSTGRES and, from 18 on, SYNC_IO; engines/mysql.py's
    QUIET_MYSQL)."""
    quiet = engine_class(job.build.spec.engine).counting_settings(job.build.version_string)
    return {**quiet, **dict(job.column.settings)}


@dataclass(frozen=True)
class Choice:
    """A step to explain: where it is in the benchmark and its window."""

    index: int  # 1-based, as in the run's step files
    plan: StepPlan
    skip_ops: int
    ops: int
    q_per_s: float  # the run's Q calls per second for this column: paced writers' clock
    # 0: instrumentation on from the step's start (every skipped call warms the simulated
    # caches); else on only for the last warm_ops skipped calls, the rest run at valgrind's
    # uninstrumented speed (the cost lane's fixed-work steps: l.i0's first 50,000 rows
    # under the cache simulation cost more than all its other work).
    warm_ops: int = 0
    # False: the step runs exactly as when counted (under valgrind, its window's edges,
    # its hold) but nothing is switched on or read: the cost lane's added replays count
    # only the steps whose replays disagree, and the others still leave the same state.
    counted: bool = True
    # The engine's state over the timed step's measured window in the run (this
    # column's repeats), which the counted window's is checked against (state.py).
    timed: CacheState | None = None
    # 0, or the window opens early, once the engine's block cache is this warm (its
    # data hit rate between two probes; state.py): skip_ops is then the latest it opens.
    until_hit_rate: float = 0.0

    def window(self) -> prepare.Window:
        """The counted window the loadgen is told of (prepare.Window)."""
        return prepare.Window(
            self.skip_ops, self.ops, self.q_per_s, self.warm_ops, self.until_hit_rate
        )


@dataclass(frozen=True)
class ColumnJob:
    lab: Lab
    comparison: Comparison
    column: Column
    build: Build
    choices: dict[str, Choice]  # by step name
    work: Path  # private: the engine's data, the profilers' scratch; removed after
    out: Path  # run folder's explain/<label>/: what is kept
    # The cost lane's replays run side by side on every CPU (counts do not depend on
    # contention), unpinned, and keep no callgrind files (their replay records keep the
    # costliest functions of each window); explain's jobs follow the lab's placement and
    # keep the files.
    pin: bool = True
    keep: bool = True

    @property
    def embedded(self) -> bool:
        return self.build.spec.engine == "rocksdb"

    @property
    def threaded(self) -> bool:
        """A server in one process, a thread per connection (the MySQL family)."""
        return self.build.spec.engine in ("mariadb", "mysql")

    @property
    def client_cpus(self) -> frozenset[int] | None:
        return self.lab.placement.client_cpus if self.pin else None


def replay_engine(job: ColumnJob, name: str, wrapper: tuple[str, ...]) -> Engine:
    options = prepare.engine_options(
        job.lab,
        job.comparison,
        job.column,
        job.work / name,
        job.out / f"{name}-server.log",
        settings=count_settings(job) if name == "count" else None,
        slow=SLOWDOWN if wrapper else 1,
        wrapper=wrapper,
        pin=job.pin,
    )
    return make_engine(job.build, options)


def replay(
    job: ColumnJob,
    engine: Engine,
    name: str,
    measure: Callable[[Choice, StepSpec, Path], Stepped],
    slow: float,
    notify: Notify,
) -> dict[str, str]:
    """Start the engine, run every step in order (`measure` runs the chosen ones), and
    stop it and remove its data whatever happens (session.py, as a run's job does); by
    step, why the page cache could not be dropped before it where it was to be (a step
    whose drop worked, or that needed none, is not in it)."""
    plans = benchmarks.plans(job.comparison)
    last = max(c.index for c in job.choices.values())
    drops = name == "profile" and prepare.drops_page_cache(job.lab, job.comparison)
    failed: dict[str, str] = {}
    if name == "profile" and prepare.drops_at_start(job.lab, job.column) and plans:
        why = _drop(job, notify)  # as the timed run started the job (execute.job)
        if why:
            failed[plans[0].name] = why
    # not shielded, as before: the cost lane runs replays in worker threads (session.py)
    with EngineSession([engine], [job.work / name], shield=False) as session:
        session.start(engine)
        for index, plan in enumerate(plans, start=1):
            if index > last:
                break
            choice = job.choices.get(plan.name)
            spec = _step_spec(job, engine, name, index, plan, choice)
            stem = job.work / f"{name}-steps" / f"{index:02d}-{plan.name}"
            if drops and index > 1:
                # as the timed run started the step (execute.drop_before_step): a perf
                # profile of a storage-bound read step sees the device, not the files
                # the load left cached (the counts are user space: no drop there)
                why = _drop(job, notify)
                if why:
                    failed[plan.name] = why
            t0 = time.monotonic()
            if choice is not None:
                measure(choice, spec, stem)
                where = f" ({choice.ops} calls after {choice.skip_ops})" if name == "count" else ""
                what = f"{name} {plan.name}{where}"
            else:
                timeout = prepare.step_timeout(job.lab, plan, spec, slow)
                drive(engine, spec, stem, timeout, job.client_cpus)
                what = f"{name}: replayed {plan.name}"
            notify(f"{job.column.label}: {what} in {time.monotonic() - t0:.1f} s")
            if plan.wait_after_s:
                session.settle(plan.wait_after_s)  # the engine checked as the wait passes
    return failed


def _drop(job: ColumnJob, notify: Notify) -> str | None:
    failed = drop_page_cache()
    if failed:
        notify(f"{job.column.label}: {failed}")
    return failed


def _step_spec(
    job: ColumnJob, engine: Engine, name: str, index: int, plan: StepPlan, choice: Choice | None
) -> StepSpec:
    """The spec of step `index` in a counting (with the chosen step's window) or a
    profiling replay."""
    if name == "count":
        window = None if choice is None else choice.window()
        return prepare.step_spec(
            job.lab, job.comparison, job.column, engine, index, plan, COUNT, window
        )
    return prepare.step_spec(job.lab, job.comparison, job.column, engine, index, plan, PROFILE)
