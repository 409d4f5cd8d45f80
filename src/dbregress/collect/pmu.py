"""Hardware counters (cycles, instructions) where the host has a PMU perf can read.

`detect()` runs `perf stat -e cycles,instructions true` once: on most virtual machines
(this project's CI included) the counters are `<not supported>`, and then the
instructions per operation come from `dbregress explain` (valgrind) instead. Where they
work, a `Counter` counts them for a set of processes over each step's measured window:
`perf stat -p` attached at `ready` with its events off, switched on at `measuring` and
off at `stopped` (collect/perfctl.py).

`DBREGRESS_PERF_EVENTS=task-clock,context-switches` (any events perf knows) makes
`detect()` count those instead, on any host: software events stand in for the hardware
ones, so the counting itself is tested where there is no PMU. Only `cycles` and
`instructions` become per-operation metrics; every counted event is stored with the step.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TypedDict

from dbregress.collect.perfctl import PerfControl

EVENTS = ("cycles", "instructions")
EVENTS_VARIABLE = "DBREGRESS_PERF_EVENTS"
NO_PMU = "no PMU: instructions come from `dbregress explain` (valgrind)"

Counts = dict[str, float | None]


class PmuJson(TypedDict):
    """Whether this host counts, as an explanation's method record keeps it."""

    available: bool
    note: str
    events: list[str]


@dataclass(frozen=True)
class Pmu:
    available: bool
    note: str  # what a report says once
    events: tuple[str, ...] = EVENTS

    def to_json(self) -> PmuJson:
        return {"available": self.available, "note": self.note, "events": list(self.events)}


def parse_stat(text: str, events: Iterable[str] = EVENTS) -> Counts:
    """perf stat's CSV (-x,) or human output -> counts per event; None when the event is
    `<not supported>` or `<not counted>`. Software clocks (task-clock, cpu-clock) are
    in milliseconds, as perf prints them."""
    wanted = set(events)
    counts: Counts = {}
    for line in text.splitlines():
        fields = line.split(",")
        if len(fields) >= 3:
            # a modifier may follow the name (cycles:u); a tracepoint's name has a colon
            name = fields[2] if fields[2] in wanted else fields[2].rsplit(":", 1)[0]
            if name in wanted:
                counts[name] = _number(fields[0].strip())
                continue
        m = re.match(r"\s*([\d,.]+|<not supported>|<not counted>)\s+(?:msec\s+)?([\w-]+)", line)
        if m and m.group(2) in wanted:
            counts[m.group(2)] = _number(m.group(1).replace(",", ""))
    return counts


def _number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


@functools.cache
def detect() -> Pmu:
    """Whether perf can count cycles and instructions here (asked once per process),
    or the events DBREGRESS_PERF_EVENTS names."""
    forced = tuple(e.strip() for e in os.environ.get(EVENTS_VARIABLE, "").split(",") if e.strip())
    if shutil.which("perf") is None:
        return Pmu(False, NO_PMU + "; perf is not installed")
    events = forced or EVENTS
    try:
        out = subprocess.run(
            ["perf", "stat", "-x,", "-e", ",".join(events), "true"],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return Pmu(False, NO_PMU)
    counts = parse_stat(out.stderr, events)
    if forced:
        ok = tuple(e for e in events if counts.get(e) is not None)
        if ok:
            return Pmu(True, f"counters {', '.join(ok)} from perf stat ({EVENTS_VARIABLE})", ok)
        return Pmu(False, f"perf stat counts none of {EVENTS_VARIABLE}'s events here")
    if all(counts.get(e) for e in EVENTS):
        return Pmu(True, "hardware counters: cycles and instructions from perf stat")
    return Pmu(False, NO_PMU)


class Counter(PerfControl):
    """perf stat counting `events` of `pids` (and the threads and children they start)
    over the windows between enable() and disable(); stop() gives the counts."""

    def __init__(self, pids: Iterable[int], events: Iterable[str]) -> None:
        self.events = tuple(events)
        super().__init__(["stat", "-x,", "-e", ",".join(self.events)], pids)

    def stop(self) -> Counts:
        """Counts over the enabled windows; an event perf could not count is None."""
        counts = parse_stat(self.finish(), self.events)
        return {e: counts.get(e) for e in self.events}
