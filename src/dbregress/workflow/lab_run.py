"""A lab run, start to end: its time lane (here, or on a fleet of hosts through a Dask
scheduler), then its cost lane (the counting replays; on a fleet, on its workers of one
method identity). `dbregress run`, `bisect` (one run per point) and `calibrate` all run
a lab through here, so the order of the lanes and the choice of where they run are
written once.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Protocol, runtime_checkable

from dbregress.cost.lane import run_lane
from dbregress.execution.execute import ProgressFn
from dbregress.execution.runner import Runner
from dbregress.lab.file import Lab

Notify = Callable[[str], None]


@runtime_checkable
class CountsOnFleet(Protocol):
    """A fleet's coordinator (fleet/coordinator.py FleetRunner): its workers run the
    cost lane's replays, where the lab counts and some worker can."""

    def counts(self) -> bool: ...

    def run_lane(self, notify: Notify) -> None: ...


def runner_for(
    lab: Lab,
    results: Path,
    notify: Notify,
    *,
    scheduler: str | None = None,
    tls: Path | None = None,
    progress: ProgressFn | None = None,
    resume: Path | None = None,
    history: bool = True,
) -> Runner:
    """The runner of a lab's time lane: on this host, or, given a scheduler, the fleet's
    coordinator (fleet/coordinator.py), which sends the jobs to its workers."""
    if scheduler:
        # imported here: Dask only where a fleet is used
        from dbregress.fleet.coordinator import FleetRunner

        return FleetRunner(
            lab,
            results,
            scheduler,
            progress,
            notify=notify,
            resume=resume,
            history=history,
            tls=tls,
        )
    return Runner(lab, results, progress, notify=notify, resume=resume, history=history)


def run_lab(
    runner: Runner,
    lab: Lab,
    say: Notify,
    live: AbstractContextManager[object] | None = None,
) -> None:
    """The time lane (inside `live`, a progress display stopped whatever ends the lane,
    Ctrl-C included), then the cost lane where the lab counts: on the fleet's workers
    for a fleet's runner, else here."""
    with live if live is not None else contextlib.nullcontext():
        runner.run()
    if isinstance(runner, CountsOnFleet):
        if runner.counts():
            runner.run_lane(say)
    elif lab.counts():
        run_lane(runner.path, lab, say)
