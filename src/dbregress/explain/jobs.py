"""One column's benchmark replayed from a fresh engine, as the run ran it (the lab's
config, sizes, seeds, placement and injected slowdown), with the chosen steps measured:

- `count`: the chosen steps run under callgrind for a window of their Q calls (the
  loadgen's `window`: warm-up calls, then the counted ones, paused at both edges while
  vgdb zeroes and dumps the counters). PostgreSQL runs under valgrind for the whole job
  (instrumentation off outside the windows, so its backends are forked children of a
  valgrind'd postmaster); RocksDB, embedded, runs in the loadgen, which runs under
  valgrind for the chosen steps only.
- `profile`: every step at full speed; over each chosen step's measured window, `perf
  record` samples the server's (or the loadgen's) stacks.

Steps that are not chosen run as they did in the run, so the data a chosen step meets
is the data it met there.
"""

from __future__ import annotations

import gzip
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from dbregress import benchmarks, prepare
from dbregress.analysis import state
from dbregress.analysis.state import CacheState
from dbregress.benchmarks.plan import StepPlan
from dbregress.collect import pmu
from dbregress.collect.perfctl import PerfControl, PerfError
from dbregress.collect.proc import tree_pids
from dbregress.collect.valgrind import Callgrind
from dbregress.engines import process
from dbregress.engines.base import Engine
from dbregress.engines.mysql import CONNECTION_FUNCTIONS
from dbregress.engines.registry import engine_class
from dbregress.execute import make_engine
from dbregress.explain import callgrind, flame
from dbregress.explain.flame import FlameError
from dbregress.explain.stepper import Hooks, Stepped, drive
from dbregress.explain.threads import (
    ReadViewHold,
    client_binary,
    split_connection_threads,
)
from dbregress.lab import Column, Comparison, Lab
from dbregress.loadgen import Loadgen
from dbregress.prepare import COUNT, PROFILE
from dbregress.provision import Build
from dbregress.provision import mysql as mysql_family
from dbregress.session import EngineSession
from dbregress.shapes.events import Event, Summary
from dbregress.shapes.explain import (
    CountFigures,
    EntryFigures,
    FunctionFigures,
    Profiled,
    WindowEvent,
)
from dbregress.shapes.spec import StepSpec

Notify = Callable[[str], None]
SLOWDOWN = 20  # timeouts of a step run under valgrind: this many times the plain one


def count_settings(job: ColumnJob) -> dict[str, str]:
    """The settings of the counting replay: the column's, over the engine's own
    adjustments for counting (its COUNTING_SETTINGS: engines/postgres.py's
    QUIET_POSTGRES, engines/mysql.py's QUIET_MYSQL)."""
    quiet = engine_class(job.build.spec.engine).COUNTING_SETTINGS
    return {**quiet, **dict(job.column.settings)}


PERF_HZ = 499  # sampling frequency (not a multiple of common timer ticks)
# The builds have no frame pointers: perf copies 8 KiB of each sample's stack and
# unwinds it from the DWARF call-frame information (deep enough for these engines).
PERF_CALL_GRAPH = "dwarf,8192"


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
    # contention), unpinned, keep no callgrind files and no function tables; explain's
    # jobs follow the lab's placement and keep both.
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


def _engine(job: ColumnJob, name: str, wrapper: tuple[str, ...]) -> Engine:
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


def _replay(
    job: ColumnJob,
    engine: Engine,
    name: str,
    measure: Callable[[Choice, StepSpec, Path], Stepped],
    slow: float,
    notify: Notify,
) -> None:
    """Start the engine, run every step in order (`measure` runs the chosen ones), and
    stop it and remove its data whatever happens (session.py, as a run's job does)."""
    plans = benchmarks.plans(job.comparison)
    last = max(c.index for c in job.choices.values())
    # not shielded, as before: the cost lane runs replays in worker threads (session.py)
    with EngineSession([engine], [job.work / name], shield=False) as session:
        session.start(engine)
        for index, plan in enumerate(plans, start=1):
            if index > last:
                break
            choice = job.choices.get(plan.name)
            spec = _step_spec(job, engine, name, index, plan, choice)
            stem = job.work / f"{name}-steps" / f"{index:02d}-{plan.name}"
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


# -- counting: callgrind over the window ----------------------------------------------


class _CountHooks(Hooks):
    """Instrumentation on at `ready` (the warm-up calls warm the simulated caches),
    costs zeroed at the window's open, dumped and instrumentation off at its close."""

    def __init__(
        self,
        cg: Callgrind,
        targets: Callable[[Loadgen], list[int]],
        hint: str,
        warm: bool,
        hold: ReadViewHold | None = None,
        counting: bool = True,
    ) -> None:
        self.cg, self.targets, self.hint, self.warm = cg, targets, hint, warm
        self.counting = counting
        self.hold = hold  # the MySQL family: purge held off the window (threads.py)
        self.opened = self.closed = 0.0
        self.close: WindowEvent | None = None
        self.sessions: set[str] = set()  # pids of the server processes serving the clients

    def ready(self, loadgen: Loadgen, event: Event) -> None:
        self.sessions = {str(p) for p in event.get("server_pids", [])}
        if self.hold is not None:
            self.hold.start()  # before the warm-up calls
        if not self.warm and self.counting:
            self.cg.control(self.targets(loadgen), "instrumentation on")

    def window(self, loadgen: Loadgen, event: WindowEvent) -> None:
        if not self.counting:
            if event["edge"] == "close":
                self.close = event
                if self.hold is not None:
                    self.hold.release()
            return
        pids = self.targets(loadgen)
        if event["edge"] == "warm":
            self.cg.control(pids, "instrumentation on")
        elif event["edge"] == "open":
            self.cg.control(pids, "zero")
            self.opened = time.time()
        else:
            self.cg.control(pids, f"dump {self.hint}")
            self.closed = time.time()
            self.close = event
            self.cg.control(self.targets(loadgen), "instrumentation off")
            if self.hold is not None:
                self.hold.release()


def count(job: ColumnJob, notify: Notify) -> dict[str, CountFigures]:
    """callgrind's figures for each chosen step: {step: figures} (see figures())."""
    cg = Callgrind(
        job.work / "callgrind",
        {} if job.embedded else process.as_server_user(),
        separate_threads=job.embedded or job.threaded,
    )
    cg.prepare(None if job.embedded else process.run_as())
    wrapper = tuple(cg.wrapper())
    engine = _engine(job, "count", () if job.embedded else wrapper)
    found: dict[str, CountFigures] = {}

    def targets(loadgen: Loadgen) -> list[int]:
        return [loadgen.pid] if job.embedded else tree_pids(engine.server_pid())

    def measure(choice: Choice, spec: StepSpec, stem: Path) -> Stepped:
        hint = f"dbregress-{job.column.label}-{choice.index:02d}"
        hold = _read_view_hold(job, engine)
        hooks = _CountHooks(cg, targets, hint, choice.warm_ops > 0, hold, choice.counted)
        timeout = prepare.step_timeout(job.lab, choice.plan, spec, SLOWDOWN)
        try:
            stepped = drive(
                engine,
                spec,
                stem,
                timeout,
                job.client_cpus,
                hooks,
                wrapper if job.embedded else (),
            )
        finally:
            if hold is not None:
                hold.release()  # idempotent
        if hooks.close is None:
            raise callgrind.CallgrindError(
                f"{job.column.label} {choice.plan.name}: the window never opened: the step "
                f"made fewer than {choice.skip_ops + 1} calls of its Q operation"
            )
        if choice.counted:
            files = window_files(cg.out_dir, hint, hooks.opened, hooks.closed)
            found[choice.plan.name] = _window(job, choice, files, hooks, hooks.close, stepped)
        return stepped

    slow = 1.0 if job.embedded else SLOWDOWN
    _replay(job, engine, "count", measure, slow, notify)
    return found


def _read_view_hold(job: ColumnJob, engine: Engine) -> ReadViewHold | None:
    """The MySQL family's hold of purge off the window (threads.py), where the build
    has a client to hold it with."""
    if job.threaded and (client := client_binary(job.build.basedir)) is not None:
        env = mysql_family.build_env(job.build.basedir)
        # the engine's connection is the spec's engine block (EngineSpec)
        return ReadViewHold(client, engine.connection(), env)
    return None


def _window(
    job: ColumnJob,
    choice: Choice,
    files: list[Path],
    hooks: _CountHooks,
    close: WindowEvent,
    stepped: Stepped,
) -> CountFigures:
    """One counted window's figures, from its callgrind files (then kept gzipped with
    the run, or removed): the work of the processes or threads serving the loadgen's
    sessions, the rest as the engine's background."""
    plan = choice.plan
    profiles = {f: callgrind.read(f) for f in files}
    if job.embedded:
        sessions, background = embedded_split(profiles, plan.name)
    else:
        sessions, background = server_split(profiles, hooks.sessions, job.threaded, plan.name)
    profile = callgrind.merge(profiles[f] for f in sessions)
    # An embedded engine: only its calls from the loadgen's threads count (the
    # client's loop, timing and injected slowdown stay out), see engine_work().
    work = engine_work(job.build, profile, plan.name) if job.embedded else None
    step = figures(
        profile, close, stepped.summary, choice, len(files), functions=job.keep, engine=work
    )
    step["wall_s"] = round(stepped.wall_s, 2)  # the counted step, under valgrind
    # where the window opened: skip_ops, or earlier once the cache was warm
    step["skip_ops"] = int(stepped.summary.get("window_skip_ops", choice.skip_ops))
    judged = state.judged(stepped.summary.get("window_engine_stats"), close["ops"], choice.timed)
    if judged:
        step["engine_state"] = judged["engine_state"]
        step["state_mismatch"] = judged["state_mismatch"]
    step["scope"] = ENGINE_CALLS if work is not None else "sessions"
    rest = callgrind.merge(profiles[f] for f in background)
    step["background_per_op"] = per_op_of(rest, step) if rest.events else {}
    if job.keep:
        _keep(files, job.out / f"{choice.index:02d}-{plan.name}")
    else:
        for f in files:
            f.unlink()
    return step


def window_files(out_dir: Path, hint: str, opened: float, closed: float) -> list[Path]:
    """The callgrind files of one window: every process's dump at the close, and the
    final file of each process that ended inside the window (not of one that took the
    dump: its final file holds what it did after)."""
    dumped, ended = [], []
    for f in sorted(out_dir.glob("callgrind.out.*")):
        trigger = callgrind.trigger(f)
        if trigger == f"dump {hint}":
            dumped.append(f)
        elif trigger.startswith("Program termination") and (
            opened <= f.stat().st_mtime <= closed + 1.0
        ):
            ended.append(f)
    pids = {_pid(f) for f in dumped}
    return dumped + [f for f in ended if _pid(f) not in pids]


def split_sessions(files: list[Path], sessions: set[str]) -> tuple[list[Path], list[Path]] | None:
    """A window's files as (those of the processes serving the loadgen's sessions, the
    rest: the server's background processes); None when no file is a session's (no
    session pids reported, or none of their processes left a file)."""
    mine = [f for f in files if _pid(f) in sessions]
    if not mine:
        return None
    return mine, [f for f in files if _pid(f) not in sessions]


def server_split(
    profiles: dict[Path, callgrind.Profile], sessions: set[str], threaded: bool, step: str
) -> tuple[list[Path], list[Path]]:
    """A server's window as (the work serving the loadgen's sessions, the rest): by
    thread for the MySQL family (split_connection_threads), by process otherwise
    (split_sessions); CallgrindError when it cannot be split. A counting replay counts
    the sessions' work (scope "sessions") or fails: the whole server's work (background
    processes and threads with it) would be another measure under the same name, so the
    replay fails and the cost lane runs it again, as it does any failed replay."""
    files = list(profiles)
    if threaded:
        split = split_connection_threads(profiles)
        why = (
            f"no thread ran the statement dispatcher ({', '.join(sorted(CONNECTION_FUNCTIONS))}) "
            f"in {len(profiles)} callgrind file(s): a server without symbols, or one file"
        )
    else:
        split = split_sessions(files, sessions)
        why = (
            f"none of {len(files)} callgrind file(s) is of a process serving the "
            f"loadgen's sessions (session pids: {', '.join(sorted(sessions)) or 'none reported'})"
        )
    if split is None:
        raise callgrind.CallgrindError(
            f"{step}: cannot tell the work serving the loadgen's sessions from the server's "
            f"background: {why}; the whole server's work is not counted in its place"
        )
    return split


# The loadgen's own code, as callgrind names its object.
LOADGEN_OBJECT = "dbregress-loadgen"


def split_threads(
    profiles: dict[Path, callgrind.Profile],
) -> tuple[list[Path], list[Path]] | None:
    """An embedded engine's window, a file per thread, as (the loadgen's threads: those
    that ran any of the loadgen's own code in the window, its clients among them; the
    rest: the engine's background threads, RocksDB's flushes and compactions); None
    when that cannot be told (one file, or none with the loadgen's code). Of the
    loadgen's threads only their calls into the engine count (engine_work())."""
    mine = [
        f
        for f, p in profiles.items()
        if any(callgrind.object_name(ob) == LOADGEN_OBJECT for ob, _ in p.functions)
    ]
    if len(profiles) < 2 or not mine:
        return None
    return mine, [f for f in profiles if f not in mine]


def embedded_split(
    profiles: dict[Path, callgrind.Profile], step: str
) -> tuple[list[Path], list[Path]]:
    """split_threads, or CallgrindError when the window's files cannot be split: an
    embedded engine is counted as the loadgen's calls into it (scope "engine-calls") or
    not at all. Counting whole threads instead (the client's loop, its timing and any
    injected slowdown with the engine's work) would be another measure under the same
    name, so the counting replay fails and the cost lane runs it again, as it does any
    failed replay."""
    split = split_threads(profiles)
    if split is None:
        threads = sum(
            any(callgrind.object_name(ob) == LOADGEN_OBJECT for ob, _ in p.functions)
            for p in profiles.values()
        )
        raise callgrind.CallgrindError(
            f"{step}: cannot tell the loadgen's threads from the engine's in the window "
            f"({len(profiles)} callgrind file(s), {threads} with {LOADGEN_OBJECT}'s code): "
            f"the engine's calls cannot be counted apart from the client's own work"
        )
    return split


# The scope of an embedded engine's figures: the loadgen's calls into its library.
ENGINE_CALLS = "engine-calls"


def engine_objects(build: Build) -> Callable[[str], bool]:
    """Whether an object (as callgrind names it: the mapped file's path) is the
    embedded engine's library: the build's library file by name (or the file it links
    to), else any librocksdb* (a library loaded under another path)."""
    names = set()
    if build.library is not None:
        names = {build.library.name, build.library.resolve().name}

    def is_engine(ob: str) -> bool:
        name = callgrind.object_name(ob)
        return name in names or name.startswith("librocksdb")

    return is_engine


def engine_work(build: Build, profile: callgrind.Profile, step: str) -> callgrind.EngineCalls:
    """The embedded engine's work in the loadgen's threads' profile: the calls from the
    loadgen's object into the engine's library, inclusive (callgrind.EngineCalls)."""
    found = callgrind.engine_calls(
        profile, engine_objects(build), lambda ob: callgrind.object_name(ob) == LOADGEN_OBJECT
    )
    if not any(found.total):
        raise callgrind.CallgrindError(
            f"{step}: callgrind recorded no call from {LOADGEN_OBJECT} into the engine's "
            f"library ({build.library}) in the window: nothing to count"
        )
    return found


def _pid(f: Path) -> str:
    """The pid in callgrind.out.PID, callgrind.out.PID.N or (a file per thread)
    callgrind.out.PID.N-TID."""
    return f.name.split(".")[2].split("-")[0]


def _keep(files: list[Path], into: Path) -> None:
    """Gzipped copies of a window's callgrind files (callgrind_annotate reads them
    unzipped), kept with the run."""
    shutil.rmtree(into, ignore_errors=True)
    into.mkdir(parents=True)
    for f in files:
        with open(f, "rb") as src, gzip.open(into / (f.name + ".gz"), "wb") as dst:
            shutil.copyfileobj(src, dst)
        f.unlink()


# What explain reports per operation, from callgrind's events.
FIGURES: dict[str, tuple[str, ...]] = {
    "instructions": ("Ir",),
    "d1_read_misses": ("D1mr",),
    "d1_write_misses": ("D1mw",),
    "ll_read_misses": ("ILmr", "DLmr"),
    "ll_write_misses": ("DLmw",),
    "i1_misses": ("I1mr",),
    "branches": ("Bc", "Bi"),
    "branch_mispredictions": ("Bcm", "Bim"),
}
# The figures of each function in the table (shapes/explain.py FunctionFigures).
FUNCTION_FIGURES = ("instructions", "d1_read_misses", "ll_read_misses", "branch_mispredictions")
FUNCTIONS_KEPT = 300


# Estimated cycles, from the simulated caches' events by the model gungraun (formerly
# iai-callgrind) uses, after Itamar Turner-Trauring's "Beyond instruction counts"
# (pythonspeed.com, 2021): an access that misses the last level goes to RAM, one that
# misses L1 only hits the last level, every other instruction fetch and data access hits
# L1; cycles = L1 hits + 5 x LL hits + 35 x RAM accesses. A model, not a measurement:
# it weighs memory-system bloat beside code bloat with fixed costs, the same on any host.
CYCLES_LL, CYCLES_RAM = 5, 35


def estimated_cycles(events: tuple[str, ...], costs: list[int]) -> float:
    def e(name: str) -> int:
        return costs[events.index(name)]

    ram = e("ILmr") + e("DLmr") + e("DLmw")
    ll_hits = e("I1mr") + e("D1mr") + e("D1mw") - ram
    l1_hits = e("Ir") + e("Dr") + e("Dw") - ll_hits - ram
    return float(l1_hits + CYCLES_LL * ll_hits + CYCLES_RAM * ram)


def per_op(events: tuple[str, ...], costs: list[int], divisor: float) -> dict[str, float]:
    out = {
        name: sum(costs[events.index(e)] for e in parts) / divisor
        for name, parts in FIGURES.items()
    }
    out["estimated_cycles"] = estimated_cycles(events, costs) / divisor
    if "sysCount" in events:  # --collect-systime: system calls made by the counted code
        out["system_calls"] = costs[events.index("sysCount")] / divisor
    return out


ENTRIES_KEPT = 20  # the engine's entry points (its C API functions) kept per step


def figures(
    profile: callgrind.Profile,
    close: WindowEvent,
    summary: Summary,
    choice: Choice,
    files: int,
    functions: bool = True,
    engine: callgrind.EngineCalls | None = None,
) -> CountFigures:
    """Per-operation figures of one window: per op of the step's Q unit (rows for the
    load steps, calls otherwise), as the run's per-op metrics are.

    With `engine` (an embedded engine), `per_op`, `objects` and `functions` are the
    engine's calls' (callgrind.EngineCalls): every event of the calls into its library,
    inclusive; `client_per_op` is the whole of the profile's threads (the loadgen's
    loop and the engine's calls together, as counted before), `entries` the engine's
    functions the loadgen called, `reentered_per_op` the cost of calls from the engine
    back into the loadgen and `nested_per_op` that of the loadgen's engine calls made
    inside them, left out (both 0 unless the loadgen registers callbacks)."""
    unit = summary.get("q_unit", "ops")
    divisor = float(close["rows"] if unit == "rows" else close["ops"])
    if divisor <= 0:
        raise callgrind.CallgrindError(
            f"{choice.plan.name}: the window counted no {unit}; nothing to divide by"
        )
    events = profile.events
    merged, objects = _by_function(profile, engine, divisor)
    kept = FUNCTIONS_KEPT if functions else 0
    top = sorted(merged.items(), key=lambda kv: -kv[1][0])[:kept]
    totals = profile.totals if engine is None else engine.total
    out: CountFigures = {
        "index": choice.index,
        "unit": unit,
        "ops": close["ops"],
        "rows": close["rows"],
        "divisor": divisor,
        "skip_ops": choice.skip_ops,
        "q_per_s": choice.q_per_s,
        "files": files,
        "caches": profile.caches,
        "per_op": per_op(events, totals, divisor),
        "objects": dict(sorted(objects.items(), key=lambda kv: -kv[1])),
        "functions": [
            _function_figures(fn, ob, per_op(events, cost, divisor)) for (ob, fn), cost in top
        ],
    }
    if engine is not None:
        out["client_per_op"] = per_op(events, profile.totals, divisor)
        out["reentered_per_op"] = per_op(events, engine.reentered, divisor)
        out["nested_per_op"] = per_op(events, engine.nested, divisor)
        out["entries"] = _entries(engine, divisor)
    return out


def _by_function(
    profile: callgrind.Profile, engine: callgrind.EngineCalls | None, divisor: float
) -> tuple[dict[tuple[str, str], list[int]], dict[str, float]]:
    """The window's costs by (object, function), by name without parameters and
    object file: overloads (and C++ signatures that change between versions) count as
    one function; and its instructions per operation by object file. With `engine`, the
    engine's calls'."""
    merged: dict[tuple[str, str], list[int]] = {}
    objects: dict[str, float] = {}
    table = profile.functions if engine is None else engine.functions
    for (ob, fn), cost in table.items():
        key = (callgrind.object_name(ob), callgrind.short_name(fn))
        callgrind.add_cost(merged, key, cost)
    by_object = (
        [(ob, c) for (ob, _), c in table.items()] if engine is None else engine.objects.items()
    )
    for ob, cost in by_object:
        name = callgrind.object_name(ob)
        objects[name] = objects.get(name, 0.0) + cost[0] / divisor
    return merged, objects


def _function_figures(function: str, obj: str, figures: dict[str, float]) -> FunctionFigures:
    """A function's row of the table: FUNCTION_FIGURES of its per-operation figures."""
    return {
        "function": function,
        "object": obj,
        "instructions": figures["instructions"],
        "d1_read_misses": figures["d1_read_misses"],
        "ll_read_misses": figures["ll_read_misses"],
        "branch_mispredictions": figures["branch_mispredictions"],
    }


def _entries(engine: callgrind.EngineCalls, divisor: float) -> list[EntryFigures]:
    """The embedded engine's entry points the loadgen called most, per operation."""
    entries = sorted(engine.entries.items(), key=lambda kv: -kv[1][0])[:ENTRIES_KEPT]
    return [
        {
            "function": callgrind.short_name(fn),
            "calls_per_op": engine.entry_calls.get(fn, 0) / divisor,
            "instructions": cost[0] / divisor,
        }
        for fn, cost in entries
    ]


def per_op_of(profile: callgrind.Profile, window: CountFigures) -> dict[str, float]:
    """Another profile of the same window (the background processes or threads, each
    counted whole) per operation."""
    return per_op(profile.events, profile.totals, window["divisor"])


# -- profiling: perf record over the measured window ----------------------------------


class PerfHooks(Hooks):
    """perf record over the measured window and, on a host with a PMU, perf stat's
    cycles and instructions too. perf attaches at `ready` (the loadgen idles, waiting
    for go) with its events disabled, and is switched on at `measuring` and off at
    `stopped` through its control FIFO (collect/perfctl.py): a window shorter than
    perf's own start is still sampled whole."""

    def __init__(self, targets: Callable[[Loadgen], list[int]], data: Path) -> None:
        self.targets, self.data = targets, data
        self.perf: PerfControl | None = None
        self.pmu: pmu.Counter | None = None
        self.counters: pmu.Counts = {}

    def ready(self, loadgen: Loadgen, event: Event) -> None:
        pids = self.targets(loadgen)
        args = ["record", "-q", "-e", "cpu-clock", "-F", str(PERF_HZ)]
        args += ["--call-graph", PERF_CALL_GRAPH, "-o", str(self.data)]
        self.perf = PerfControl(args, pids)
        found = pmu.detect()
        if found.available:
            self.pmu = pmu.Counter(pids, found.events)
        try:
            self.perf.start()
            if self.pmu is not None:
                self.pmu.start()
        except PerfError as e:
            raise FlameError(str(e)) from e

    def measuring(self, loadgen: Loadgen) -> None:
        if self.pmu is not None:
            self.pmu.enable()
        if self.perf is not None:
            self.perf.enable()

    def stopped(self, loadgen: Loadgen) -> None:
        if self.perf is not None:
            self.perf.disable()
        if self.pmu is not None:
            self.pmu.disable()
            self.counters = self.pmu.stop()
        self.close()

    def close(self) -> None:
        """Stop perf (it writes its data); safe to call twice."""
        for perf in (self.perf, self.pmu):
            if perf is not None:
                perf.close()


def profile(job: ColumnJob, notify: Notify) -> dict[str, Profiled]:
    """For each chosen step: the folded stacks of its measured window, in CPU
    nanoseconds per operation of Q ({step: {"folded": text, ...}})."""
    engine = _engine(job, "profile", ())
    found: dict[str, Profiled] = {}

    def targets(loadgen: Loadgen) -> list[int]:
        return [loadgen.pid] if job.embedded else tree_pids(engine.server_pid())

    def measure(choice: Choice, spec: StepSpec, stem: Path) -> Stepped:
        data = job.work / f"{choice.index:02d}-{choice.plan.name}.perf.data"
        hooks = PerfHooks(targets, data)
        plan = choice.plan
        timeout = prepare.step_timeout(job.lab, plan, spec)
        try:
            stepped = drive(engine, spec, stem, timeout, job.client_cpus, hooks)
        finally:
            hooks.close()
        summary = stepped.summary
        q = summary["ops"].get(summary["q_op"])
        count = q.get(summary.get("q_unit", "ops"), 0) if q is not None else 0
        folded = flame.collapse(data)
        data.unlink(missing_ok=True)
        cpu_ns = sum(n for _, n in flame.parse_folded(folded))
        found[plan.name] = {
            "folded": flame.per_op(folded, count),
            "samples": round(cpu_ns * PERF_HZ / 1e9),
            "cpu_s": cpu_ns / 1e9,
            "count": count,
            "elapsed_s": summary["elapsed_s"],
            "hz": PERF_HZ,
            "pmu_per_op": {k: v / count for k, v in hooks.counters.items() if v and count},
        }
        return stepped

    _replay(job, engine, "profile", measure, 1.0, notify)
    return found
