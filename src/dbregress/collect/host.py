"""Facts about the machine a result was measured on, saved with every run."""

from __future__ import annotations

import os
import platform
import socket
from pathlib import Path

from dbregress.collect import pmu


def read_text(path: str | Path) -> str | None:
    """A small /proc or /sys file's text, stripped; None where it cannot be read."""
    try:
        return Path(path).read_text().strip()
    except OSError:
        return None


def _cpuinfo_model(cpuinfo: str) -> str:
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("model name", "Model", "cpu model"):
            return value.strip()
    return "unknown"


def _mem_total_bytes(meminfo: str) -> int | None:
    for line in meminfo.splitlines():
        if line.startswith("MemTotal:"):
            return int(line.split()[1]) * 1024
    return None


def host_facts() -> dict[str, object]:
    """Kernel, CPU, cores, memory, frequency governor, hostname, Python version.

    `perf_counters` says once whether perf can count cycles and instructions here
    (collect/pmu.py runs `perf stat` once): on a host without a PMU, "no PMU:
    instructions come from `dbregress explain` (valgrind)".
    """
    uname = os.uname()
    affinity = sorted(os.sched_getaffinity(0))
    return {
        "hostname": socket.gethostname(),
        "kernel": f"{uname.sysname} {uname.release} {uname.version}",
        "machine": uname.machine,
        "cpu_model": _cpuinfo_model(read_text("/proc/cpuinfo") or ""),
        "cpu_count": os.cpu_count(),
        "cpu_affinity": affinity,
        "mem_total_bytes": _mem_total_bytes(read_text("/proc/meminfo") or ""),
        "cpu_governor": read_text("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor"),
        "python": platform.python_version(),
        "perf_counters": pmu.detect().note,
    }
