"""How busy the host's CPUs were during a step, and at which clock, from /proc and /sys.

A step's measured window is compared with what else ran on the same CPUs: /proc/stat's
per-CPU jiffies (user nice system idle iowait irq softirq steal) at the window's start
and end give the time the CPUs were busy and the time the hypervisor took (steal);
busy time not spent by the server or the loadgen is someone else's (`other_cpu_s`).
Only the CPUs the server and the loadgen may run on count (the caller says which):
work elsewhere on a large host does not compete with them for a CPU.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from dbregress.collect.host import read_text
from dbregress.collect.proc import TICKS_PER_S
from dbregress.shapes.step_result import Clock, HostWindow

PROC_STAT = Path("/proc/stat")
CPUINFO = Path("/proc/cpuinfo")
SYS_CPU = Path("/sys/devices/system/cpu")
# /proc/stat counts 10 ms ticks per CPU, so a window's fractions are off by up to about
# 0.02 / window_s: below this window they would be noise about noise, and are null.
MIN_WINDOW_S = 0.5


@dataclass(frozen=True)
class CpuTimes:
    """Jiffies summed over a set of CPUs."""

    cpus: int
    busy: int  # user + nice + system + irq + softirq
    idle: int  # idle + iowait
    steal: int


def parse_proc_stat(text: str, cpus: set[int] | None = None) -> CpuTimes:
    """The `cpuN` lines of /proc/stat for the CPUs in `cpus` (all when None), summed.
    Falls back to the aggregate `cpu` line when no per-CPU line matches."""
    lines = {}
    for line in text.splitlines():
        name, *values = line.split()
        if name.startswith("cpu"):
            lines[name[3:]] = [int(v) for v in values[:8]] + [0] * (8 - len(values[:8]))
    per_cpu = {int(k): v for k, v in lines.items() if k.isdigit()}
    chosen = [v for n, v in per_cpu.items() if cpus is None or n in cpus]
    if not chosen:
        if "" not in lines:
            raise ValueError("no cpu lines in /proc/stat")
        chosen, count = [lines[""]], max(1, len(per_cpu))
    else:
        count = len(chosen)
    user, nice, system, idle, iowait, irq, softirq, steal = (
        sum(c) for c in zip(*chosen, strict=True)
    )
    return CpuTimes(count, user + nice + system + irq + softirq, idle + iowait, steal)


def read_cpu_times(cpus: set[int] | None = None) -> CpuTimes | None:
    """`cpus` (default: those this process may run on) now; None where /proc/stat is
    unreadable."""
    try:
        return parse_proc_stat(PROC_STAT.read_text(), cpus or os.sched_getaffinity(0))
    except (OSError, ValueError):
        return None


def host_window(start: CpuTimes, end: CpuTimes, window_s: float, own_cpu_s: float) -> HostWindow:
    """The host's noise over a window: steal, busy time, and the busy time not spent by
    the server and the loadgen (`own_cpu_s`), as seconds and as fractions of the CPUs'
    time (null for a window shorter than MIN_WINDOW_S)."""
    steal_s = max(0, end.steal - start.steal) / TICKS_PER_S
    busy_s = max(0, end.busy - start.busy) / TICKS_PER_S
    other_s = max(0.0, busy_s - own_cpu_s)
    capacity = window_s * end.cpus if window_s >= MIN_WINDOW_S else None
    return {
        "window_s": window_s,
        "cpus": end.cpus,
        "steal_s": steal_s,
        "busy_s": busy_s,
        "other_cpu_s": other_s,
        "steal_frac": steal_s / capacity if capacity else None,
        "other_cpu_frac": other_s / capacity if capacity else None,
    }


def cpu_clock(cpus: set[int] | None = None) -> Clock:
    """The frequency governor and current MHz of `cpus` (default: ours), where the
    host exposes them (cpufreq in /sys, else /proc/cpuinfo's "cpu MHz"); null if not."""
    chosen = sorted(os.sched_getaffinity(0) if cpus is None else cpus)
    governors, mhz = set(), []
    for n in chosen:
        freq = SYS_CPU / f"cpu{n}" / "cpufreq"
        governor, khz = read_text(freq / "scaling_governor"), read_text(freq / "scaling_cur_freq")
        if governor:
            governors.add(governor)
        if khz and khz.isdigit():
            mhz.append(int(khz) / 1000)
    if not mhz:
        by_cpu = cpuinfo_mhz(read_text(CPUINFO) or "")
        mhz = [by_cpu[n] for n in chosen if n in by_cpu]
    return {
        "governor": ",".join(sorted(governors)) or None,
        "cpu_mhz": mhz or None,
    }


def cpuinfo_mhz(cpuinfo: str) -> dict[int, float]:
    """Each processor's "cpu MHz" in /proc/cpuinfo (x86 lists it; others may not)."""
    out, processor = {}, None
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        key = key.strip()
        if key == "processor" and value.strip().isdigit():
            processor = int(value)
        elif key == "cpu MHz" and processor is not None:
            out[processor] = float(value)
    return out
