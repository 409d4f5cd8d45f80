"""One engine session: the engines of a job (or of an interleaved round's jobs, or of an
explain replay) from their start to their data's removal.

A run's jobs (execute.py) and explain's and the cost lane's replays (explain/jobs.py)
all start their engines, wait after the steps that wait, and stop the engines and remove
their data whatever happens; they do it here, the same way: while a step's wait passes
each engine is checked every half second (a crash then fails the step it followed, not
the next one), and a lab's clean-up runs shielded from a first Ctrl-C (a server left
running would outlive us).
"""

from __future__ import annotations

import contextlib
import shutil
import time
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType

from dbregress.engines.base import Engine
from dbregress.execution.step import Report
from dbregress.model.interrupts import shielded

SETTLE_CHECK_S = 0.5  # how often the engines are checked while a wait passes


class EngineSession:
    """`engines`, whose data lives in `workdirs`. Used as a context manager, the engines
    are stopped and the work directories removed when the block ends, however it ends.
    With `each_stopped` (several engines), an engine whose stop fails does not keep the
    others from being stopped: its error is dropped; else the error is raised (after the
    work directories are removed). With `shield` (a lab's jobs and rounds) the clean-up
    runs shielded (interrupts.shielded); without it (the replays, which the cost lane
    runs in worker threads: a shield's depth is the process's, so a worker's shield
    would hold back the main thread's Ctrl-C and raise it in the worker) it does not."""

    def __init__(
        self,
        engines: Sequence[Engine],
        workdirs: Sequence[Path],
        each_stopped: bool = False,
        shield: bool = True,
    ) -> None:
        self.engines, self.workdirs = list(engines), list(workdirs)
        self.each_stopped, self.shield = each_stopped, shield
        self.live: list[Engine] = []  # started, not retired: the ones a wait checks

    def __enter__(self) -> EngineSession:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.close()

    def start(self, engine: Engine) -> None:
        """Start one of the session's engines; a wait checks it from then on."""
        engine.start()
        self.live.append(engine)

    def settle(self, seconds: float, report: Report | None = None) -> None:
        """The post-step wait: nothing runs, the engines' background work settles. Each
        live engine is checked at least every SETTLE_CHECK_S (EngineCrashed if one died);
        `report` is told how far the wait is."""
        end = time.monotonic() + seconds
        while (left := end - time.monotonic()) > 0:
            for engine in self.live:
                engine.check_alive()
            if report is not None:
                report(seconds - left, left, None)
            time.sleep(min(SETTLE_CHECK_S, left))

    def retire(self, engine: Engine) -> None:
        """Stop one engine now (its step failed; the others go on); waits skip it."""
        if engine in self.live:
            self.live.remove(engine)
        with self._shielded():
            engine.stop()

    def hurry(self) -> None:
        """Kill every engine's processes at once (a second Ctrl-C)."""
        for engine in self.engines:
            engine.hurry()

    def close(self) -> None:
        """Stop every engine and remove every work directory (shielded from Ctrl-C)."""
        self.live = []
        with self._shielded():
            try:
                for engine in self.engines:
                    if self.each_stopped:
                        with contextlib.suppress(Exception):
                            engine.stop()
                    else:
                        engine.stop()
            finally:
                for workdir in self.workdirs:
                    shutil.rmtree(workdir, ignore_errors=True)

    def _shielded(self) -> contextlib.AbstractContextManager[None]:
        return shielded() if self.shield else contextlib.nullcontext()
