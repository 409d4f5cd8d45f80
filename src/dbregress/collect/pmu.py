"""Hardware counters (cycles, instructions) where the host has a PMU perf can read.

`detect()` runs `perf stat -e cycles,instructions true` once: on most virtual machines
(this project's CI included) the counters are `<not supported>`, and then the
instructions per operation come from `dbregress explain` (valgrind) instead. Where they
work, `Sampler` counts them for a set of processes over a step's measured window
(`perf stat -p` from `measuring` to `stopped`).
"""

from __future__ import annotations

import functools
import re
import shutil
import signal
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

EVENTS = ("cycles", "instructions")
NO_PMU = "no PMU: instructions come from `dbregress explain` (valgrind)"


@dataclass(frozen=True)
class Pmu:
    available: bool
    note: str  # what a report says once

    def to_json(self) -> dict[str, Any]:
        return {"available": self.available, "note": self.note}


def parse_stat(text: str) -> dict[str, int | None]:
    """perf stat's CSV (-x,) or human output -> counts per event; None when the event is
    `<not supported>` or `<not counted>`."""
    counts: dict[str, int | None] = {}
    for line in text.splitlines():
        fields = line.split(",")
        if len(fields) >= 3 and fields[2].split(":")[0] in EVENTS:
            value = fields[0].strip()
            counts[fields[2].split(":")[0]] = int(value) if value.isdigit() else None
            continue
        m = re.match(r"\s*([\d,.]+|<not supported>|<not counted>)\s+(\w+)", line)
        if m and m.group(2) in EVENTS:
            raw = m.group(1).replace(",", "").replace(".", "")
            counts[m.group(2)] = int(raw) if raw.isdigit() else None
    return counts


@functools.cache
def detect() -> Pmu:
    """Whether perf can count cycles and instructions here (asked once per process)."""
    if shutil.which("perf") is None:
        return Pmu(False, NO_PMU + "; perf is not installed")
    try:
        out = subprocess.run(
            ["perf", "stat", "-x,", "-e", ",".join(EVENTS), "true"],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return Pmu(False, NO_PMU)
    counts = parse_stat(out.stderr)
    if all(counts.get(e) for e in EVENTS):
        return Pmu(True, "hardware counters: cycles and instructions from perf stat")
    return Pmu(False, NO_PMU)


class Sampler:
    """perf stat counting cycles and instructions of `pids` from start() to stop()."""

    def __init__(self) -> None:
        self._proc: subprocess.Popen[str] | None = None

    def start(self, pids: Iterable[int]) -> None:
        targets = ",".join(str(p) for p in pids)
        self._proc = subprocess.Popen(
            ["perf", "stat", "-x,", "-e", ",".join(EVENTS), "-p", targets],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )

    def stop(self) -> dict[str, int | None]:
        """Counts over the window; {} if it never started."""
        if self._proc is None:
            return {}
        self._proc.send_signal(signal.SIGINT)
        try:
            _, err = self._proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            _, err = self._proc.communicate()
        self._proc = None
        return parse_stat(err)
