"""What `dbregress run` and `calibrate` show while a lab runs.

On a terminal, a live display (rich) at the bottom of stderr:

    lab   ━━━━━━━━━━━━━━━━━━━━━━━━╺━━━━━━━━━━━━━━━  job 7/12   elapsed 1:14:03   left ~49:40
    now   kv, column r10, repeat 2 (r10/r2), step 3/5 readrandom
    step  elapsed 0:41   left 0:19   QPS 123,456 (get ops/s)

with the messages between updates (why a round is added) printed above it. The lab's
time left is the mean duration of the jobs that ended times the jobs left ("?" until one
has ended); the QPS is the step's main operation over the loadgen's latest report
interval. Elsewhere (CI logs, a pipe), one plain line per step, as before:

    [7/12 r10/r2] step 3/5 readrandom

Use either as a context manager around the run: the live display stops on the way out,
whatever ends the run (Ctrl-C included), and leaves the cursor and the terminal as they
were.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from types import TracebackType
from typing import Protocol, TextIO

from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.progress_bar import ProgressBar
from rich.table import Table
from rich.text import Text

from dbregress.execution.execute import Progress
from dbregress.model.interrupts import shielded

Clock = Callable[[], float]


def clock_text(seconds: float | None) -> str:
    """h:mm:ss, or m:ss under an hour; ? when unknown."""
    if seconds is None:
        return "?"
    s = max(0, int(seconds))
    h, m = divmod(s // 60, 60)
    return f"{h}:{m:02d}:{s % 60:02d}" if h else f"{m}:{s % 60:02d}"


def rate_text(per_s: float) -> str:
    return f"{per_s:,.0f}" if per_s >= 100 else f"{per_s:.3g}"


def step_line(p: Progress) -> str:
    """The plain line of a step (CI logs; kept as it was: scripts read it)."""
    return f"[{p.job_index}/{p.jobs} {p.job}] step {p.step_index}/{p.steps} {p.step}"


class Display(Protocol):
    """What the runner is given: `update` for its Progress, `line` for its messages."""

    def update(self, p: Progress) -> None: ...

    def line(self, text: str) -> None: ...

    def __enter__(self) -> Display: ...

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None: ...


class PlainLines:
    """One line per step, and the messages as they come: for logs."""

    def __init__(self, out: TextIO | None = None) -> None:
        self.out = out
        self.last: tuple[int, int] | None = None

    def _print(self, text: str) -> None:
        print(text, file=self.out or sys.stderr, flush=True)

    def update(self, p: Progress) -> None:
        where = (p.job_index, p.step_index)
        if where != self.last:
            self._print(step_line(p))
        self.last = where

    def line(self, text: str) -> None:
        self._print(text)

    def __enter__(self) -> PlainLines:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        return None


class LabClock:
    """The lab's elapsed time and an estimate of what is left, from the jobs seen to end.

    A job is taken to run from its first update to the next job's first update (so the
    sleep and the cache drop between jobs count, as they will for the jobs left)."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.started = clock()
        self.job_index: int | None = None
        self.job_started = self.started
        self.durations: list[float] = []

    def see(self, p: Progress) -> None:
        if p.job_index == self.job_index:
            return
        now = self.clock()
        if self.job_index is not None:
            self.durations.append(now - self.job_started)
        self.job_index, self.job_started = p.job_index, now

    def elapsed(self) -> float:
        return self.clock() - self.started

    def remaining(self, p: Progress) -> float | None:
        """Seconds left for the lab; None until a job has ended."""
        if not self.durations:
            return None
        mean = sum(self.durations) / len(self.durations)
        in_this_job = self.clock() - self.job_started
        return (p.jobs - p.job_index) * mean + max(0.0, mean - in_this_job)


class LiveDisplay:
    """The live display on a terminal (see the module's docstring)."""

    def __init__(
        self,
        console: Console | None = None,
        clock: Clock = time.monotonic,
        auto_refresh: bool = True,
    ) -> None:
        self.console = console or Console(stderr=True)
        self.times = LabClock(clock)
        self.latest: Progress | None = None
        self.finished = False  # the run ended without an error: the bar is full
        # Redrawn once a second between updates, so the lab's elapsed time moves on: the
        # display must cost the machine under test next to nothing. While it runs, other
        # output to stdout or stderr is printed above it (rich redirects both).
        self.live = Live(
            console=self.console,
            get_renderable=self.render,
            auto_refresh=auto_refresh,
            refresh_per_second=1,
        )

    def render(self) -> RenderableType:
        p = self.latest
        grid = Table.grid(padding=(0, 2))
        grid.add_column(style="bold")
        grid.add_column()
        if p is None:
            grid.add_row("lab", f"starting   elapsed {clock_text(self.times.elapsed())}")
            return grid
        done = p.job_index - 1 + (p.step_index - 1) / max(p.steps, 1)
        bar = ProgressBar(total=p.jobs, completed=p.jobs if self.finished else done, width=40)
        left = 0.0 if self.finished else self.times.remaining(p)
        lab = Text(
            f"job {p.job_index}/{p.jobs}   elapsed {clock_text(self.times.elapsed())}   "
            f"left {'~' if left is not None else ''}{clock_text(left)}"
        )
        grid.add_row("lab", Group(bar, lab) if self.console.width < 90 else _row(bar, lab))
        repeat = f"repeat {p.repeat}" + (" (warm-up)" if p.repeat == 0 else "")
        now = ", ".join(
            x
            for x in (
                p.comparison,
                f"column {p.column}" if p.column else "",
                repeat if p.column else "",
            )
            if x
        )
        grid.add_row(
            "now",
            f"{now + ' ' if now else ''}({p.job}), step {p.step_index}/{p.steps} {p.step}",
        )
        qps = (
            f"QPS {rate_text(p.rate.per_s)} ({p.rate.op} {p.rate.unit}/s)"
            if p.rate is not None
            else "QPS -"
        )
        grid.add_row(
            "step",
            f"elapsed {clock_text(p.elapsed_s)}   left {clock_text(p.remaining_s)}   {qps}",
        )
        return grid

    def update(self, p: Progress) -> None:
        with shielded():  # a Ctrl-C lands after the frame is written, not inside it
            self.times.see(p)
            self.latest = p
            self.live.refresh()

    def line(self, text: str) -> None:
        """A message between updates, printed above the display."""
        with shielded():
            self.live.console.print(text, markup=False, highlight=False, soft_wrap=True)

    def __enter__(self) -> LiveDisplay:
        self.times = LabClock(self.times.clock)
        self.live.start(refresh=True)
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.finished = kind is None
        with shielded():  # the cursor comes back even if a second Ctrl-C comes now
            self.live.stop()  # after drawing the last frame


def _row(bar: ProgressBar, text: Text) -> Table:
    row = Table.grid(padding=(0, 2))
    row.add_row(bar, text)
    return row


def for_stderr() -> Display:
    """The live display when stderr is a terminal that can redraw, plain lines otherwise."""
    console = Console(stderr=True)
    live = sys.stderr.isatty() and console.is_terminal and not console.is_dumb_terminal
    return LiveDisplay(console) if live else PlainLines()
