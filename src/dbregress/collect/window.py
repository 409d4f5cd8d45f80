"""A step's boundaries as the runner sees them, and what each phase spent.

The runner reads the counters (a `Mark`) when the loadgen reports each boundary
(schema/events.schema.json): before spawning it, at `ready`, at `measuring`, at
`stopped` and after the summary. Per-operation figures use only the measured window,
`measuring` to `stopped`: the server's process tree from /proc, the loadgen's CPU from
its own getrusage figures in the events (µs, where /proc has 10 ms ticks), its IO from
/proc. For an embedded engine the loadgen is the server.
"""

from __future__ import annotations

import dataclasses
import os
import time
from dataclasses import dataclass
from typing import Literal

from dbregress.collect.diskstats import SECTOR_BYTES, Device, DiskSample, read_device
from dbregress.collect.hostcpu import CpuTimes, host_window, read_cpu_times
from dbregress.collect.proc import TreeSample, Usage, all_stats, snapshot_tree
from dbregress.shapes import events
from dbregress.shapes import step_result as shapes

# The phases outside the measured window, between the runner's marks.
PHASES = {
    "setup": ("spawn", "ready"),
    "warmup": ("ready", "measuring"),
    "checks": ("stopped", "end"),
}


@dataclass(frozen=True)
class Mark:
    """The counters at one boundary of a step."""

    at: float  # time.monotonic()
    server: TreeSample | None  # None for an embedded engine
    loadgen: TreeSample | None  # None before the loadgen runs
    cpu: CpuTimes | None  # the host's CPUs; None where /proc/stat is unreadable
    process: events.ProcessUsage | None = None  # the loadgen's getrusage at this boundary
    disk: DiskSample | None = None  # the data directory's block device (collect/diskstats.py)
    # dbregress's own CPU seconds so far (every thread of this process): the harness that
    # follows the steps, freezes and thaws the sides of an interleaved step and reads
    # these counters is not another process disturbing the host
    harness_s: float = 0.0


def take_mark(
    server_pid: int | None,
    loadgen_pid: int | None,
    process: events.ProcessUsage | None = None,
    cpus: set[int] | None = None,
    host_first: bool = False,
    device: str | None = None,
) -> Mark:
    """Reads both process trees (one pass over /proc), the read counters of the block
    `device` and the counters of the host's `cpus` (default: ours). The host's come
    last, so a window starting here does not count this reading as someone else's work,
    or with `host_first` first, for a window ending here."""
    cpu_at = (read_cpu_times(cpus), time.monotonic()) if host_first else None
    disk = None if device is None else read_device(device)
    stats = all_stats()
    server = None if server_pid is None else snapshot_tree(server_pid, stats)
    loadgen = None if loadgen_pid is None else snapshot_tree(loadgen_pid, stats)
    cpu, at = cpu_at or (read_cpu_times(cpus), time.monotonic())
    return Mark(at, server, loadgen, cpu, process, disk, harness_cpu_s())


def harness_cpu_s() -> float:
    """This process's CPU seconds so far, user and system, over all its threads."""
    times = os.times()
    return times.user + times.system


def device_window(start: Mark, end: Mark, device: Device, clients: int) -> shapes.DeviceJson:
    """The block device's reads over the window (the whole device's: other processes'
    reads count too), or nulls and why not."""
    if start.disk is None or end.disk is None:
        note = device.note or f"{device.name}'s counters could not be read"
        return {
            "name": device.name,
            "note": note,
            "clients": clients,
            "reads": None,
            "read_bytes": None,
            "read_ms": None,
        }
    d = start.disk.delta(end.disk)
    return {
        "name": device.name,
        "note": device.note,
        "clients": clients,
        "reads": d.reads,
        "read_bytes": d.sectors * SECTOR_BYTES,
        "read_ms": d.read_ms,
    }


def _cpu_s(p: events.ProcessUsage) -> float:
    return float(p["user_s"] + p["system_s"])


def loadgen_usage(start: Mark, end: Mark) -> Usage:
    """The loadgen's use between two marks: CPU and switches from its own getrusage
    figures, IO from /proc."""
    assert start.loadgen and end.loadgen and start.process and end.process
    p0, p1 = start.process, end.process
    switches = p1["voluntary_cs"] + p1["involuntary_cs"] - p0["voluntary_cs"] - p0["involuntary_cs"]
    return dataclasses.replace(
        start.loadgen.delta(end.loadgen),
        user_s=max(0.0, p1["user_s"] - p0["user_s"]),
        system_s=max(0.0, p1["system_s"] - p0["system_s"]),
        ctx_switches=max(0, switches),
    )


def window_usage(start: Mark, end: Mark) -> tuple[Usage, Usage | None]:
    """(server, client) over the window; an embedded engine's server is the loadgen."""
    loadgen = loadgen_usage(start, end)
    if start.server is None or end.server is None:
        return loadgen, None
    return start.server.delta(end.server), loadgen


def phases(marks: dict[str, Mark], loadgen_phases: events.LoadgenPhases) -> shapes.Phases:
    """Wall time (the loadgen's clock), server CPU (null for an embedded engine) and the
    loadgen's CPU of each phase outside the measured window."""

    def phase(name: Literal["setup", "warmup", "checks"]) -> shapes.Phase:
        a, b = PHASES[name]
        first, last = marks[a].server, marks[b].server
        server = None
        if first is not None and last is not None:
            usage = first.delta(last)
            server = usage.user_s + usage.system_s
        own = loadgen_phases[name]
        return {
            "wall_s": own["wall_s"],
            "server_cpu_s": server,
            "client_cpu_s": _cpu_s(own["process"]),
        }

    return {"setup": phase("setup"), "warmup": phase("warmup"), "checks": phase("checks")}


def host(start: Mark, end: Mark, server: Usage, client: Usage | None) -> shapes.HostWindow:
    """The host's noise over the window (collect/hostcpu.py); nulls where /proc/stat
    could not be read."""
    window_s = end.at - start.at
    if start.cpu is None or end.cpu is None:
        return {
            "window_s": window_s,
            "cpus": None,
            "steal_s": None,
            "busy_s": None,
            "other_cpu_s": None,
            "steal_frac": None,
            "other_cpu_frac": None,
        }
    own = server.user_s + server.system_s + (client.user_s + client.system_s if client else 0.0)
    harness = max(0.0, end.harness_s - start.harness_s)
    window = host_window(start.cpu, end.cpu, window_s, own + harness)
    window["harness_cpu_s"] = harness
    return window
