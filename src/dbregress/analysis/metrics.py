"""Every metric dbregress reports: its key, unit and which direction is better.

docs/metrics.md is the prose version of this table; a test keeps them in step.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Better = Literal["higher", "lower"]


@dataclass(frozen=True)
class Metric:
    key: str  # key in a StepResult's per_op (or q.value for qps)
    label: str  # column header in reports
    unit: str
    better: Better
    description: str


QPS = Metric(
    "qps",
    "Q",
    "ops/s",
    "higher",
    "The step's throughput: inserted rows/s (l.i0, l.i1, l.i2), indexed rows/s (l.x), "
    "queries/s (q-steps).",
)
PER_OP: tuple[Metric, ...] = (
    Metric(
        "server_cpu_us",
        "srv cpu/o",
        "µs",
        "lower",
        "CPU time (user + system) of the server's whole process tree during the step, "
        "per operation of Q.",
    ),
    Metric(
        "server_user_us",
        "srv usr/o",
        "µs",
        "lower",
        "User-mode CPU time of the server's process tree per operation.",
    ),
    Metric(
        "server_system_us",
        "srv sys/o",
        "µs",
        "lower",
        "Kernel-mode CPU time of the server's process tree per operation.",
    ),
    Metric(
        "client_cpu_us",
        "cli cpu/o",
        "µs",
        "lower",
        "CPU time (user + system) of dbregress-loadgen during the step, per operation.",
    ),
    Metric(
        "cs",
        "cs/o",
        "switches",
        "lower",
        "Voluntary + involuntary context switches of the server's processes, per operation.",
    ),
    Metric(
        "rkb",
        "rKB/o",
        "KiB",
        "lower",
        "Bytes the server's processes read from storage (/proc/PID/io read_bytes), per operation.",
    ),
    Metric(
        "wkb",
        "wKB/o",
        "KiB",
        "lower",
        "Bytes the server's processes caused to be written to storage (write_bytes), "
        "per operation.",
    ),
    Metric(
        "server_instructions",
        "srv instr/o",
        "instructions",
        "lower",
        "Instructions the server's processes retired (perf stat, hardware counters) per "
        "operation; only on hosts with a PMU.",
    ),
    Metric(
        "server_cycles",
        "srv cyc/o",
        "cycles",
        "lower",
        "CPU cycles of the server's processes (perf stat) per operation; only on hosts with a PMU.",
    ),
    Metric("ops_per_s", "o/s", "ops/s", "higher", "Operations of Q per second (the same as Q)."),
)
# Per-op metrics that only some hosts measure: reports show them where a result has them.
COUNTERS = ("server_instructions", "server_cycles")
LATENCY: tuple[Metric, ...] = (
    Metric("p50", "p50", "µs", "lower", "Median latency, from each operation's intended start."),
    Metric("p99", "p99", "µs", "lower", "99th percentile latency."),
    Metric("max", "max", "µs", "lower", "Largest latency in the step."),
)
ENGINE: tuple[Metric, ...] = (
    Metric(
        "write_amp",
        "w-amp",
        "ratio",
        "lower",
        "Bytes flushed and compacted per byte the user wrote, over the step (RocksDB).",
    ),
    Metric(
        "stall_pct",
        "stall %",
        "percent",
        "lower",
        "Time writes were stalled, as a percentage of the step (RocksDB).",
    ),
    Metric(
        "lsm_bytes",
        "LSM size",
        "bytes",
        "lower",
        "Total size of the SST files at the step's end (RocksDB).",
    ),
)
ALL: tuple[Metric, ...] = (QPS, *PER_OP, *LATENCY, *ENGINE)
