"""One loadgen step of an explain job, run by step_loadgen.run_loadgen (the driver a run's steps
use too) and followed through its handshake (follow.py) with hooks at each boundary:
where a profiler is switched on, zeroed, read and switched off. Every step of an explain
job runs through here (those not explained with no hooks), so the data each step leaves
is what the run's steps left."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import cast

from dbregress.engines.base import Engine
from dbregress.execution.step_loadgen import StepHandler, run_loadgen
from dbregress.loadgen.client import Loadgen
from dbregress.shapes.events import Event, Summary
from dbregress.shapes.explain import WindowEvent
from dbregress.shapes.spec import StepSpec


class Hooks:
    """What happens at each boundary of a step; by default nothing."""

    def ready(self, loadgen: Loadgen, event: Event) -> None:
        """Every client is set up; nothing timed has run. The event's `server_pids` name
        the server processes serving the sessions, where the engine has them."""

    def measuring(self, loadgen: Loadgen) -> None:
        """The measured window begins (after the warm-up)."""

    def window(self, loadgen: Loadgen, event: WindowEvent) -> None:
        """An edge of the profiler's window; no Q call is in flight."""

    def stopped(self, loadgen: Loadgen) -> None:
        """The last timed operation has ended."""


@dataclass
class Stepped:
    summary: Summary
    windows: list[WindowEvent] = field(default_factory=list)  # the window events
    wall_s: float = 0.0


class _Hooked(StepHandler):
    """The loop's handler: a step's hooks, given the loadgen, and its window events.
    Its methods take the events as follow.Handler's do."""

    def __init__(self, hooks: Hooks, loadgen: Loadgen) -> None:
        self.hooks, self.loadgen = hooks, loadgen
        self.windows: list[WindowEvent] = []

    def ready(self, event: Event) -> None:
        self.hooks.ready(self.loadgen, event)

    def measuring(self, event: Event) -> None:
        self.hooks.measuring(self.loadgen)

    def window(self, event: Event) -> None:
        edge = cast(WindowEvent, event)  # an Event whose `ops` is the window's calls
        self.windows.append(edge)
        self.hooks.window(self.loadgen, edge)

    def stopped(self, event: Event) -> None:
        self.hooks.stopped(self.loadgen)


def drive(
    engine: Engine,
    spec: StepSpec,
    stem: Path,
    timeout_s: float,
    cpus: frozenset[int] | None,
    hooks: Hooks | None = None,
    wrapper: tuple[str, ...] = (),
) -> Stepped:
    """Run one step to its summary (step_loadgen.run_loadgen, as a run's steps are run);
    LoadgenError, StepTimeout or the engine's crash."""
    t0 = time.monotonic()

    def hooked(loadgen: Loadgen) -> _Hooked:
        return _Hooked(hooks or Hooks(), loadgen)

    step = spec["workload"]["step"]
    run = run_loadgen(engine, spec, stem, step, timeout_s, cpus, hooked, wrapper, t0=t0)
    return Stepped(run.summary, run.handler.windows, time.monotonic() - t0)
