"""Runs a lab: which jobs run, in what order and when a comparison is done (its rounds,
the stop rule of rounds.py, a resumed run's finished jobs kept), with the run recorded
from start to end. How a job or an interleaved round runs is the executor's
(execute.py: here on real engines; a fleet's coordinator, fleet/coordinator.py, sends
rounds to its workers instead).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from pathlib import Path

from dbregress.collect import layout
from dbregress.collect.host import host_facts
from dbregress.execution import io_baseline, prepare, rounds
from dbregress.execution.execute import (
    Executor,
    LocalExecutor,
    ProgressFn,
    index_step,
    make_engine,
    run_work_dir,
)
from dbregress.lab.file import Comparison, Job, Lab
from dbregress.model import interrupts
from dbregress.model.errors import DbregressError, InternalError, Interrupted, StoreError
from dbregress.model.interrupts import shielded
from dbregress.model.records import StepResult
from dbregress.provision import Build
from dbregress.store.history import History, index_into
from dbregress.store.run import RunWriter


class Runner:
    def __init__(
        self,
        lab: Lab,
        results_root: Path,
        progress: ProgressFn | None = None,
        notify: Callable[[str], None] | None = None,
        resume: Path | None = None,
        history: bool = True,
        writer: RunWriter | None = None,
        executor: Callable[[RunWriter], Executor] | None = None,
    ) -> None:
        """A new run folder under `results_root`, or, with `resume`, that run folder
        continued: its finished jobs are kept, an interrupted one is run again. With
        `history`, every step is indexed, as it ends, in the run history of the folder
        that holds the run (store/history.py). A fleet worker passes its own `writer`
        (fleet/ship.py), which sends what it writes to the coordinator. `executor`
        makes what runs the jobs, from the run's writer: by default on this host
        (execute.LocalExecutor)."""
        self.lab = lab
        self.history = history
        layout.set_randomization(lab.aslr)
        if writer is not None:
            self.writer = writer
        elif resume is None:
            self.writer = RunWriter(results_root, lab, host_facts() | {"aslr": layout.state()})
        else:
            self.writer = RunWriter.reopen(resume, lab)
        self.progress = progress or (lambda p: None)
        self.notify = notify or (lambda line: None)
        self.executor: Executor = (
            executor(self.writer)
            if executor is not None
            else LocalExecutor(lab, self.writer, self.progress, self.notify, self._index)
        )

    @property
    def path(self) -> Path:
        return self.writer.path

    def run(self) -> Path:
        """Runs every job; returns the run folder. Raises after recording if any failed."""
        status = "failed"
        try:
            self._run_all()
            interrupts.check()  # a Ctrl-C lost in a finalizer must not end as "ok"
            failures = self.writer.record["failures"]
            status = "ok" if not failures else "failed"
            if failures:
                causes = "\n".join(f"  {f['where']}: {f['type']}: {f['message']}" for f in failures)
                said = f"{len(failures)} failure(s); finished steps are in {self.path}\n{causes}"
                bugs = sum(bool(f.get("bug")) for f in failures)
                if bugs:  # exit 3: a bug in dbregress is not an engine's failure
                    raise InternalError(
                        f"{said}\n{bugs} of them a bug in dbregress (tracebacks in "
                        f"{self.path / 'run.json'}, failures)"
                    )
                raise DbregressError(said)
        except KeyboardInterrupt:
            status = "interrupted"
            raise Interrupted(
                f"interrupted; finished steps are in {self.path}; continue with "
                f"`{self._resume_command()}`"
            ) from None
        except StoreError as e:
            raise StoreError(f"{e}; steps finished before this are in {self.path}") from e
        finally:
            with shielded():
                self._finish(status)
        return self.path

    def _run_all(self) -> None:
        """Every comparison's jobs, here (a fleet's coordinator sends them to workers)."""
        builds = self.executor.provision()
        for comparison in self.lab.comparisons:
            self._run_comparison(comparison, builds)

    def _resume_command(self) -> str:
        return f"dbregress run --resume {self.path}"

    def _finish(self, status: str) -> None:
        """Record the run's end; a failure to do so is told, never raised over the
        error that ended the run."""
        try:
            self.writer.finish(status)
        except StoreError as e:
            self.notify(f"could not record the run's end: {e}")
        self._index(lambda h: h.index_run(self.path))  # the end, and anything missed
        with contextlib.suppress(OSError):  # each job removed its own data directory
            run_work_dir(self.path.name, "run").rmdir()

    def _run_comparison(self, comparison: Comparison, builds: dict[str, Build]) -> None:
        """The warm-up job, then rounds of every column in a seeded random order: the
        minimum number of rounds, then more while a step is undecided and within reach of
        the maximum. An IO-bound comparison has fio before and after (io_baseline.py)."""
        self._device_baseline(comparison, builds, "before")
        self._run_jobs(self.lab.warmup_jobs(comparison), builds, together=False)
        number = 0
        while True:  # rounds.after says when the comparison is done
            number += 1
            order = self.lab.round(comparison, number)
            if not self.writer.has_round(comparison.name, number):  # else a resumed run's
                self.writer.add_round(comparison.name, number, [j.column.label for j in order])
            self._run_jobs(order, builds, together=self.lab.schedule == "interleaved")
            follows = rounds.after(self.lab, comparison, number, self.path)
            if follows.message:
                self.notify(follows.message)
            if not follows.rounds:
                break
        self._device_baseline(comparison, builds, "after")

    def _device_baseline(
        self, comparison: Comparison, builds: dict[str, Build], when: io_baseline.When
    ) -> None:
        """fio on the data directories' filesystem with the base column's read pattern,
        for an IO-bound comparison (io_baseline.py); recorded, never raised."""
        if not self.lab.io_bound(comparison):
            return
        work = run_work_dir(self.writer.path.name, "run")
        base = comparison.base
        options = prepare.engine_options(
            self.lab, comparison, base, work / "fio-engine", work / "fio-engine.log"
        )
        engine = make_engine(builds[base.label], options)
        io_baseline.measure(
            self.lab, comparison, engine, work / "fio", self.writer, when, self.notify
        )

    def run_unit(self, jobs: list[Job]) -> None:
        """One unit of a lab as a fleet worker runs it, with its builds fetched here: a
        warm-up job, or one round (the jobs schedule runs its jobs one after the other,
        the interleaved one together)."""
        builds = self.executor.provision([j.column for j in jobs])
        together = self.lab.schedule == "interleaved" and len(jobs) > 1
        self._run_jobs(jobs, builds, together)

    def _run_jobs(self, jobs: list[Job], builds: dict[str, Build], together: bool) -> None:
        """Jobs as the schedule says, an interleaved round together or one by one; those
        a resumed run finished before are kept as they were, not run again (a round is
        run again whole unless all of its jobs ended)."""
        if together:
            interrupts.check()
            if all(self.writer.job_finished(j) for j in jobs):
                self.executor.kept(jobs)
            else:
                self.executor.round(jobs, builds)
            return
        for job in jobs:
            interrupts.check()
            if self.writer.job_finished(job):
                self.executor.kept([job])
            else:
                self.executor.job(job, builds)

    def _index(self, write: Callable[[History], object]) -> None:
        if self.history:
            index_into(self.path.parent, write, self.notify)

    def _index_step(self, result: StepResult, index: int, h: History) -> None:
        index_step(self.path, self.writer, result, index, h)
