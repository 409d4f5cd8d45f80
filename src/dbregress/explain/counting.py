"""The counting replay, `count`: callgrind over each chosen step's window, switched
on, zeroed and dumped at the window's edges, and the window's figures read from its
files. Apart from jobs.py (what both replays share) and profiling.py (perf); which files
are the window's and how they split is window_split.py, the per-operation figures
count_figures.py.
"""

from __future__ import annotations

import gzip
import shutil
import time
from collections.abc import Callable
from pathlib import Path

from dbregress.analysis import state
from dbregress.collect.proc import tree_pids
from dbregress.collect.valgrind import Callgrind
from dbregress.engines import process
from dbregress.engines.base import Engine
from dbregress.execution import prepare
from dbregress.explain import callgrind
from dbregress.explain.count_figures import figures, per_op_of
from dbregress.explain.jobs import SLOWDOWN, Choice, ColumnJob, Notify, replay, replay_engine
from dbregress.explain.stepper import Hooks, Stepped, drive
from dbregress.explain.threads import ReadViewHold, client_binary
from dbregress.explain.window_split import (
    ENGINE_CALLS,
    embedded_split,
    engine_work,
    server_split,
    window_files,
)
from dbregress.loadgen.client import Loadgen
from dbregress.provision import mysql as mysql_family
from dbregress.shapes.events import Event
from dbregress.shapes.explain import CountFigures, WindowEvent
from dbregress.shapes.spec import StepSpec


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
    engine = replay_engine(job, "count", () if job.embedded else wrapper)
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
    replay(job, engine, "count", measure, slow, notify)
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
    step = figures(profile, close, stepped.summary, choice, len(files), functions=True, engine=work)
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


def _keep(files: list[Path], into: Path) -> None:
    """Gzipped copies of a window's callgrind files (callgrind_annotate reads them
    unzipped), kept with the run."""
    shutil.rmtree(into, ignore_errors=True)
    into.mkdir(parents=True)
    for f in files:
        with open(f, "rb") as src, gzip.open(into / (f.name + ".gz"), "wb") as dst:
            shutil.copyfileobj(src, dst)
        f.unlink()
