"""How a lab's jobs run on this host: the executor a runner hands each job and each
interleaved round (runner.py decides which run, in what order, and when to stop).

A job: provision -> start -> steps (collect + loadgen) -> store, in that order. Every
step's result is written the moment the step ends. A failure (engine crash, hang,
loadgen killed, Ctrl-C) is recorded as a failed step with its cause and the server
log's tail; the engine and the loadgen are always stopped. An interleaved round starts
every column's engine at once and runs each step on all of them in turns.

Another executor (Executor) can stand in: a fleet worker runs a unit through a runner
with this one; tests run a lab's schedule through one that makes results up, with no
engine.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import shutil
import time
import zlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, cast

from dbregress import benchmarks, provision
from dbregress.analysis.paired import pair_slices
from dbregress.benchmarks.plan import StepPlan
from dbregress.collect.cache_drop import drop_page_cache
from dbregress.engines.base import Engine, EngineOptions, Sizes
from dbregress.engines.registry import engine_class
from dbregress.execution import prepare
from dbregress.execution.session import EngineSession
from dbregress.execution.step import LiveRate, Report, StepOutcome, collect_step
from dbregress.execution.step_interleaved import Side, collect_interleaved
from dbregress.lab.file import Column, Job, Lab
from dbregress.model.errors import (
    DbregressError,
    EngineError,
    Interrupted,
    LoadgenError,
    StepTimeout,
    StoreError,
    is_bug,
    traceback_of,
)
from dbregress.model.interrupts import hurrying, shielded
from dbregress.model.records import JobId, StepError, StepResult
from dbregress.provision import Build
from dbregress.shapes.run import JobEntry
from dbregress.shapes.step_result import Paired, StepResultJson
from dbregress.store.history import History
from dbregress.store.run import RunWriter

Index = Callable[[Callable[[History], object]], None]


@dataclass(frozen=True)
class Progress:
    """Where the lab is, sent on each report interval of a running step (and while a
    step waits after its writes)."""

    job: str  # label/rN
    job_index: int  # from 1
    jobs: int  # planned so far: grows when a round is added
    step: str
    step_index: int  # from 1
    steps: int
    elapsed_s: float  # of the step
    remaining_s: float | None  # of the step; None when unknown
    comparison: str = ""
    column: str = ""
    repeat: int = 0  # 0: the warm-up job
    rate: LiveRate | None = None  # the step's main operation over the latest interval


ProgressFn = Callable[[Progress], None]


def work_root() -> Path:
    """Data directories live outside results/ (they are large and deleted after each
    job) in a place an unprivileged engine user can reach."""
    return Path(os.environ.get("DBREGRESS_WORKDIR", "/var/tmp/dbregress"))


def short_name(text: str) -> str:
    """Eight hex digits for a run, column or lab name in a data directory's path. A
    MySQL-family server's unix socket lives below that directory and its whole path must
    fit in 107 bytes, which run ids and labels chosen by users need not."""
    return f"{zlib.crc32(text.encode()):08x}"


def run_work_dir(run_name: str, kind: str) -> Path:
    """The directory under which one run's `kind` (run, cost, explain) keeps its data
    directories while they are in use."""
    return work_root() / f"{kind}-{short_name(run_name)}"


def job_work_dir(run_name: str, job: Job) -> Path:
    """The data directory of one time-lane job."""
    column = short_name(f"{job.comparison.name}/{job.column.label}")
    return run_work_dir(run_name, "run") / f"{column}-r{job.repeat}"


def make_engine(build: Build, options: EngineOptions) -> Engine:
    return engine_class(build.spec.engine)(build, options)


# Errors of the lab's own machinery (not of an engine, the loadgen or a step's deadline)
# are still recorded per job, with a traceback, and the lab goes on: a bug or an OSError
# in one job must not cost the night's other jobs. A bug (errors.is_bug) is recorded as
# one, and the run then exits 3 (runner.py), as `report --fail-on` on its folder does.
EXPECTED = (EngineError, LoadgenError, StepTimeout)


class Executor(Protocol):
    """How the jobs a runner schedules are run: `provision` the builds of the lab's
    columns (or of `columns`), then each `job` alone, or the jobs of an interleaved
    round together. Each records what it ran in the run's writer."""

    def provision(self, columns: Iterable[Column] | None = None) -> dict[str, Build]: ...

    def job(self, job: Job, builds: dict[str, Build]) -> None: ...

    def round(self, jobs: list[Job], builds: dict[str, Build]) -> None: ...

    def kept(self, jobs: list[Job]) -> None:
        """Jobs a resumed run finished before: the runner does not run them again (an
        executor that counts jobs for its progress counts them)."""
        ...


def index_step(path: Path, writer: RunWriter, result: StepResult, index: int, h: History) -> None:
    """A finished step into the run history (store/history.py)."""
    h.index_step(path, result, record=writer.record, step_no=index)


class LocalExecutor:
    """Jobs and interleaved rounds run here, on real engines."""

    def __init__(
        self,
        lab: Lab,
        writer: RunWriter,
        progress: Callable[[Progress], None],
        notify: Callable[[str], None],
        index: Index,
    ) -> None:
        self.lab, self.writer, self.progress, self.notify = lab, writer, progress, notify
        self._index = index
        self._jobs_run = 0
        self._jobs_planned = len(lab.jobs())

    @property
    def path(self) -> Path:
        return self.writer.path

    def provision(self, columns: Iterable[Column] | None = None) -> dict[str, Build]:
        """Fetch (or find in the cache) the build of every column, or of `columns` (a
        fleet worker's unit)."""
        builds: dict[str, Build] = {}
        fetched: dict[str, Build] = {}
        for column in self.lab.columns if columns is None else columns:
            key = str(column.build)
            try:
                if key not in fetched:
                    fetched[key] = provision.fetch(column.build)
            except DbregressError as e:
                self.writer.add_failure(f"provision {key}", e)
                raise
            build = fetched[key]
            builds[column.label] = build
            self.writer.set_build(
                column.label,
                {**build.identity, "spec": key, "version_string": build.version_string},
            )
        return builds

    def kept(self, jobs: list[Job]) -> None:
        self._jobs_run += len(jobs)

    def job(self, job: Job, builds: dict[str, Build]) -> None:
        self.writer.forget_job(job)  # an interrupted attempt is run again from its start
        if self._jobs_run and self.lab.sleep_between_s:
            time.sleep(self.lab.sleep_between_s)
        self._jobs_run += 1
        if prepare.drops_at_start(self.lab, job.column):
            self.writer.note_cache_drop(drop_page_cache())
        jobs = max(self._jobs_planned, self._jobs_run)
        try:
            self._run_job(job, builds[job.column.label], self._jobs_run - 1, jobs)
        except _JobFailed:  # recorded; the other columns still run
            self.writer.end_job(job, "failed")
        except KeyboardInterrupt as e:  # between steps: the job is recorded as interrupted
            if not self.writer.job_failed_by_interrupt(job):
                with shielded():
                    why = Interrupted(f"interrupted by {_signal_name(e)}")
                    self.writer.add_failure(job.name, why)
            raise
        except StoreError:
            raise
        except Exception as e:  # recorded; the other jobs still run
            self.writer.add_failure(job.name, e, _trace(e))
            self.writer.end_job(job, "failed")

    def round(self, jobs: list[Job], builds: dict[str, Build]) -> None:
        """An interleaved round: every column's engine up at once, each step run on all
        of them in turns (step_interleaved.collect_interleaved). The first to run rotates with the
        round's order, which the lab's seed draws."""
        for job in jobs:  # an interrupted attempt is run again from its start
            self.writer.forget_job(job)
        if self._jobs_run and self.lab.sleep_between_s:
            time.sleep(self.lab.sleep_between_s)
        self._jobs_run += len(jobs)
        if any(prepare.drops_at_start(self.lab, j.column) for j in jobs):
            self.writer.note_cache_drop(drop_page_cache())
        status = _InterleavedRound(self, jobs, builds).run()
        for job in jobs:
            self.writer.end_job(job, status[job.name])

    def drop_before_step(self, jobs: list[Job], index: int) -> None:
        """Before each step after the first of a storage-bound job, the page cache is
        dropped again: the steps before it (a load) leave the files they wrote cached,
        and a read step would read the OS's memory, not the device, however the host's
        reclaim happens to run; fio's baseline starts cold too (--invalidate=1)."""
        # decided per comparison, as in an interleaved round: every column of a
        # comparison starts its step in the same page-cache state
        if index > 1 and any(prepare.drops_page_cache(self.lab, j.comparison) for j in jobs):
            self.writer.note_cache_drop(drop_page_cache())

    def _run_job(self, job: Job, build: Build, job_index: int, jobs: int) -> None:
        plans = benchmarks.plans(job.comparison)
        workdir = job_work_dir(self.writer.path.name, job)
        if workdir.exists():  # left by a run killed outright (no clean-up ran); a resumed
            # run runs the job again from its start, on a fresh data directory
            self.notify(f"{job.name}: removing the data directory a killed run left: {workdir}")
            shutil.rmtree(workdir, ignore_errors=True)
        log = self.writer.job_dir(job) / "server.log"
        options = prepare.engine_options(self.lab, job.comparison, job.column, workdir, log)
        sizes = options.sizes
        engine = make_engine(build, options)
        with hurrying(engine.hurry):  # a second Ctrl-C kills instead of waiting
            ok = self._steps(engine, job, sizes, plans, job_index, jobs, workdir)
        self.writer.end_job(job, "ok" if ok else "failed")

    def _steps(
        self,
        engine: Engine,
        job: Job,
        sizes: Sizes,
        plans: list[StepPlan],
        job_index: int,
        jobs: int,
        workdir: Path,
    ) -> bool:
        """Start the engine and run every step; False if one failed. Always stops it and
        removes its data (session.py)."""
        with EngineSession([engine], [workdir]) as session:
            self._start(session, engine, job, sizes)
            for index, plan in enumerate(plans, start=1):
                report = self._reporter(job, job_index + 1, jobs, plan, index, len(plans))
                self.drop_before_step([job], index)
                if not self._run_step(session, engine, job, index, plan, report):
                    return False
        return True

    def _reporter(
        self, job: Job, job_no: int, jobs: int, plan: StepPlan, index: int, steps: int
    ) -> Report:
        """What a running step of `job` calls to update the progress display."""
        make = functools.partial(
            Progress,
            job.name,
            job_no,
            jobs,
            plan.name,
            index,
            steps,
            comparison=job.comparison.name,
            column=job.column.label,
            repeat=job.repeat,
        )

        def report(elapsed: float, left: float | None, rate: LiveRate | None) -> None:
            self.progress(make(elapsed, left, rate=rate))

        return report

    def _start(self, session: EngineSession, engine: Engine, job: Job, sizes: Sizes) -> None:
        info: JobEntry = {
            "comparison": job.comparison.name,
            "build": str(job.column.build),
            "config": job.column.config,
            "status": "running",
        }
        self.writer.set_job(job, info)
        try:
            session.start(engine)
        except StoreError:
            raise
        except Exception as e:  # a corrupted build's binary fails here with an OSError
            self._record_failure(job, 0, "start", e, engine)
            raise _JobFailed() from e
        log = self.writer.job_dir(job) / "server.log"
        info["settings"] = engine.settings_applied()
        info["sizes"] = dataclasses.asdict(sizes)
        info["server_log"] = str(log.relative_to(self.path)) if log.exists() else None
        self.writer.set_job(job, info)

    def _run_step(
        self,
        session: EngineSession,
        engine: Engine,
        job: Job,
        index: int,
        plan: StepPlan,
        report: Report,
    ) -> bool:
        """Runs one step and writes its result; False when the job cannot go on."""
        stem = self.writer.job_dir(job) / "steps" / f"{index:02d}-{plan.name}"
        spec = prepare.step_spec(self.lab, job.comparison, job.column, engine, index, plan)
        timeout = prepare.step_timeout(self.lab, plan, spec)
        try:
            outcome: StepOutcome = collect_step(
                engine, spec, stem, plan, timeout, self.lab.placement, report
            )
            if plan.wait_after_s:
                session.settle(plan.wait_after_s, report)
        except KeyboardInterrupt as e:
            why = f"interrupted by {_signal_name(e)}"
            with shielded():
                self._record_failure(job, index, plan.name, Interrupted(why), engine)
            raise
        except StoreError:
            raise
        except Exception as e:  # the step failed; the job stops, the lab goes on
            self._record_failure(job, index, plan.name, e, engine)
            return False
        self._write_ok(job, index, plan, outcome)
        return True

    def _write_ok(self, job: Job, index: int, plan: StepPlan, outcome: StepOutcome) -> None:
        """A finished step's files, and its result into the run history."""
        result = StepResult.ok(JobId(job.column.label, job.repeat), plan.name, outcome.result)
        self.writer.write_step(job, index, result, outcome.series, outcome.hlog)
        self._index(functools.partial(index_step, self.path, self.writer, result, index))

    def _record_failure(
        self, job: Job, index: int, step: str, error: BaseException, engine: Engine
    ) -> None:
        trace = _trace(error)
        bug = True if is_bug(error) else None  # exit 3 where the run is judged, not 2
        tail = engine.log_tail(40)
        failure = StepError(type(error).__name__, str(error), tail, trace or None, bug)
        result = StepResult.failed(JobId(job.column.label, job.repeat), step, failure)
        self.writer.write_step(job, index, result, [], "")
        self._index(functools.partial(index_step, self.path, self.writer, result, index))
        self.writer.add_failure(f"{job.name} {step}", error, trace)


class _InterleavedRound:
    """One interleaved round of a LocalExecutor: every job's engine started at once, then
    each step run on all of them in turns; a side whose step fails is recorded and
    stopped, the others go on. The engines are stopped and their data removed whatever
    happens."""

    def __init__(self, executor: LocalExecutor, jobs: list[Job], builds: dict[str, Build]) -> None:
        self.executor, self.jobs = executor, jobs
        self.comparison = jobs[0].comparison
        self.engines: dict[str, Engine] = {}
        workdirs: list[Path] = []
        self.sizes: Sizes | None = None
        writer = executor.writer
        for job in jobs:
            workdir = job_work_dir(writer.path.name, job)
            if workdir.exists():  # left by a run killed outright
                shutil.rmtree(workdir, ignore_errors=True)
            workdirs.append(workdir)
            log = writer.job_dir(job) / "server.log"
            options = prepare.engine_options(
                executor.lab, self.comparison, job.column, workdir, log
            )
            self.sizes = options.sizes
            self.engines[job.name] = make_engine(builds[job.column.label], options)
        # one engine's failed stop does not keep the others running
        self.session = EngineSession(list(self.engines.values()), workdirs, each_stopped=True)

    def run(self) -> dict[str, str]:
        """Each job's status at the round's end: ok, or failed."""
        executor, writer = self.executor, self.executor.writer
        status = {job.name: "failed" for job in self.jobs}
        live: list[Job] = []
        with self.session:  # the engines stopped and their data removed, however it ends
            try:
                with hurrying(self.session.hurry):
                    for job in self.jobs:
                        assert self.sizes is not None
                        try:
                            executor._start(self.session, self.engines[job.name], job, self.sizes)
                            live.append(job)
                        except _JobFailed:
                            pass
                    plans = benchmarks.plans(self.comparison)
                    for index, plan in enumerate(plans, start=1):
                        if not live:
                            break
                        executor.drop_before_step(live, index)
                        live = self.step(live, index, plan, len(plans))
                    for job in live:
                        status[job.name] = "ok"
            except KeyboardInterrupt as e:
                with shielded():
                    for job in live:
                        if not writer.job_failed_by_interrupt(job):
                            why = Interrupted(f"interrupted by {_signal_name(e)}")
                            writer.add_failure(job.name, why)
                raise
        return status

    def step(self, live: list[Job], index: int, plan: StepPlan, steps: int) -> list[Job]:
        """One step of the round on every live job's engine; returns the jobs still live
        after it (a side whose step failed is recorded and stopped)."""
        executor, lab, engines = self.executor, self.executor.lab, self.engines
        sides = []
        for job in live:
            engine = engines[job.name]
            spec = prepare.step_spec(
                lab, job.comparison, job.column, engine, index, plan, prepare.Mode.INTERLEAVED
            )
            stem = executor.writer.job_dir(job) / "steps" / f"{index:02d}-{plan.name}"
            jobs = max(executor._jobs_planned, executor._jobs_run)
            report = executor._reporter(job, executor._jobs_run, jobs, plan, index, steps)
            sides.append(Side(engine, spec, stem, report))
        timeout = prepare.step_timeout(lab, plan, sides[0].spec)
        first = live[0].repeat % len(live)  # who starts rotates from round to round
        outcomes = collect_interleaved(sides, plan, timeout, lab.placement, first)
        if plan.wait_after_s:
            self.session.settle(plan.wait_after_s, sides[0].report)  # the live sides' engines
        results: dict[str, StepResultJson] = {}
        still = []
        for job, outcome in zip(live, outcomes, strict=True):
            engine = engines[job.name]
            if isinstance(outcome, Exception):
                executor._record_failure(job, index, plan.name, outcome, engine)
                self.session.retire(engine)
                continue
            results[job.name] = outcome.result
            still.append(job)
        base = next((j for j in still if j.column == j.comparison.base), None)
        for job, outcome in zip(live, outcomes, strict=True):
            if isinstance(outcome, Exception):
                continue
            result = outcome.result
            if base is not None and job is not base:
                paired = pair_slices(results[base.name]["slices"], result["slices"])
                # analysis/paired.py's figures are untyped: they are Paired's but its base
                result["paired"] = cast(Paired, {"base": base.name, **paired})
            executor._write_ok(job, index, plan, outcome)
        return still


def _signal_name(e: KeyboardInterrupt) -> str:
    name = e.args[0] if e.args else "SIGINT"
    return "Ctrl-C" if name == "SIGINT" else str(name)


def _trace(error: BaseException) -> str | None:
    """The traceback of an error we did not expect (a bug to report); None for the
    errors a benchmark meets (an engine crash, a loadgen failure, a hang, Ctrl-C)."""
    if isinstance(error, (*EXPECTED, Interrupted)):
        return None
    return traceback_of(error)


class _JobFailed(Exception):
    """A job could not start; already recorded, the lab goes on with the next job."""
