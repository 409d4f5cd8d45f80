"""IO efficiency and the read-latency model of an IO-bound step (docs/metrics.md).

A random-read step that misses the engine's cache spends each operation's time in three
places: its own userland CPU, the libc and kernel CPU of its reads, and the device. fio
reading the same device with the same block size and concurrency (collect/fio.py) shows
what a reader that does nothing else gets, and the device's time per read
(analysis/fio_baseline.py):

    IO efficiency           = the engine's device reads per second
                              / fio's device reads per second
    predicted time per op   = user CPU per op + system CPU per op
                              + device reads per op * device latency

With O_DIRECT every read is a device read. A buffered read may be a page-cache hit
instead, for the engine and for fio alike, so a buffered step's efficiency compares the
two only in the same page-cache state: each side's hit rate is 1 - device reads / its
reads of its files (fio's from the device's counters over its run, the engine's from its
own count of its file reads), and the two must lie close enough that, by the model, a
reader like fio would read the device no more than STATE_BAND more or less often per
second at the engine's rate than at its own. Otherwise the row gives device reads per
operation and both hit rates, and no efficiency, with the reason. The model's figures
are left out, with the reason, where fio's device time is flagged (at or below zero).
fio reads as the base column does; a column that reads the other way (a buffered column
beside an O_DIRECT base, or the reverse) gets no efficiency, with the reason, and its
row says how it reads (fio_baseline.column_direct).

The prediction stands beside the measured time per operation of a closed-loop client
(clients / QPS: what the reads per second follow from), with the difference in µs and
in percent. Everything here is pure: stored step results and run.json in, rows out.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace

from dbregress.analysis.fio_baseline import (
    Baseline,
    baselines,
    column_direct,
    column_modes,
    state_moves,
)
from dbregress.analysis.state import INNODB_READS, PG_READ_CALLS
from dbregress.model.records import JobId
from dbregress.shapes.run import RunJson
from dbregress.shapes.step_result import StepResultJson

# A step whose main operation writes has no reads to set against fio's.
WRITE_OPS = frozenset(
    {"insert", "put", "delete", "update", "create_index", "flush", "compact", "cleanup"}
)
# Below this share of the device's read bytes in the window read by the engine's own
# processes (/proc/PID/io read_bytes), the device's reads are not the engine's alone:
# the row keeps its figures and gives no efficiency, naming the share.
OWN_SHARE_LOW = 0.8
# Buffered reads: the engine's page-cache hit rate and fio's are the same state when, by
# the model with fio's CPU and device time, a reader like fio would read the device at
# most this much more or less often per second at the engine's hit rate than at its own.
STATE_BAND = 0.05
# The engine's reads of its files (page-cache hits and misses alike) over a step's
# measured window, by the counter the loadgen reads from it (its engine_stats).
FILE_READS = {
    "rocksdb.": "rocksdb.sst.read.micros.count",  # every read of an SST file
    "postgres.": PG_READ_CALLS,  # the sessions' backends' read calls
    "innodb.": INNODB_READS,  # pages InnoDB read into its buffer pool
}


# -- the model's arithmetic --------------------------------------------------------------


def io_efficiency(engine_read_iops: float, fio_read_iops: float) -> float:
    """The engine's device reads per second over fio's at the same concurrency."""
    if fio_read_iops <= 0:
        raise ValueError("fio's reads per second must be positive")
    return engine_read_iops / fio_read_iops


def predicted_latency_us(
    user_us_per_op: float, system_us_per_op: float, reads_per_op: float, device_us: float
) -> float:
    """Userland CPU + kernel CPU + the device's time, per operation."""
    return user_us_per_op + system_us_per_op + reads_per_op * device_us


def predicted_read_iops(clients: int, reads_per_op: float, latency_us: float) -> float:
    """Device reads per second of `clients` closed-loop clients at that time per op."""
    return clients * reads_per_op * 1e6 / latency_us


# -- per step and column -----------------------------------------------------------------


@dataclass(frozen=True)
class IoRow:
    """One step of one column: medians over its measured repeats. `efficiency` is None,
    with `no_efficiency` saying why, for buffered reads not in fio's page-cache state and
    for a column that does not read as fio did (`buffered` is the column's own kind of
    read); the model's figures are None where the device time is flagged
    (`device_flag`)."""

    label: str
    step: str
    repeats: int
    clients: int
    reads_per_op: float  # device reads
    read_kib: float  # mean request size
    read_iops: float  # device reads per second
    fio_iops: float  # fio's device reads per second
    efficiency: float | None
    user_us_per_read: float
    system_us_per_read: float
    user_us_per_op: float
    system_us_per_op: float
    device_us: float | None
    predicted_us: float | None
    measured_us: float  # clients / QPS: a closed-loop client's time per operation
    timed_us: float | None  # the loadgen's mean latency of the operation (inside the call)
    own_share: float | None  # the engine's read bytes / the device's read bytes
    buffered: bool = False
    file_reads_per_op: float | None = None  # the engine's reads of its files (buffered)
    page_cache_hit_rate: float | None = None  # 1 - device reads / file reads (buffered)
    fio_page_cache_hit_rate: float | None = None
    no_efficiency: str | None = None
    device_flag: str | None = None

    @property
    def diff_us(self) -> float | None:
        return None if self.predicted_us is None else self.predicted_us - self.measured_us

    @property
    def diff_pct(self) -> float | None:
        diff = self.diff_us
        if diff is None:
            return None
        return 100 * diff / self.measured_us if self.measured_us else 0.0

    @property
    def predicted_efficiency(self) -> float | None:
        """The efficiency the model predicts from the predicted time per operation."""
        if self.predicted_us is None or self.efficiency is None or self.predicted_us <= 0:
            return None
        iops = predicted_read_iops(self.clients, self.reads_per_op, self.predicted_us)
        return io_efficiency(iops, self.fio_iops)


@dataclass(frozen=True)
class Absent:
    """A step (of a column, or of every column: label None) with no IO-efficiency row."""

    step: str
    label: str | None
    why: str


@dataclass(frozen=True)
class IoSection:
    """A comparison's IO-efficiency section: its baseline, its rows, or why not."""

    comparison: str
    labels: list[str]
    baseline: Baseline | None  # None: no baseline stored for it
    rows: list[IoRow] = field(default_factory=list)
    absent: list[Absent] = field(default_factory=list)
    why_not: str | None = None  # why the whole section has no table
    # why the run could not drop the page cache (run.json's page_cache.failed)
    cache_not_dropped: str | None = None

    def row(self, label: str, step: str) -> IoRow | None:
        return next((r for r in self.rows if r.label == label and r.step == step), None)


@dataclass(frozen=True)
class _Repeat:
    clients: int
    reads_per_op: float
    read_kib: float
    read_iops: float
    user_us_per_op: float
    system_us_per_op: float
    measured_us: float
    timed_us: float | None
    own_share: float | None
    file_reads_per_op: float | None


def file_reads(result: StepResultJson) -> float | None:
    """The engine's reads of its files over the measured window, by its own count
    (FILE_READS); None when it reports none. RocksDB leaves a ticker that did not move
    out of its statistics: no SST read at all, where it missed no block either."""
    stats = result.get("engine_stats")
    statistics = (stats.get("statistics") if stats else None) or {}
    for prefix, key in FILE_READS.items():
        if any(k.startswith(prefix) for k in statistics):
            if key in statistics:
                return float(statistics[key])
            if prefix == "rocksdb." and not statistics.get("rocksdb.block.cache.miss"):
                return 0.0
            return None
    return None


def _repeat(result: StepResultJson) -> _Repeat | str:
    """One step result's figures, or why it has none."""
    q = result.get("q")
    op = str(q.get("op", "")) if q else ""
    if op in WRITE_OPS:
        return f"its operations are writes ({op}): no reads to set against fio's"
    device = result.get("device")
    if not device:
        return "no device counters in its results (measured before they were recorded)"
    device_reads = device.get("reads")
    if device_reads is None:
        return str(device.get("note") or "no device counters")
    count, elapsed = int((q.get("count") if q else 0) or 0), float(result.get("elapsed_s") or 0)
    reads = int(device_reads)
    if not count or not elapsed:
        return "no operations in its measured window"
    if reads == 0:
        return "it read nothing from the device (every read came from a cache)"
    clients = int(device.get("clients") or 1)
    read_bytes = int(device.get("read_bytes") or 0)
    server = result.get("server")
    # a process tree some of whose /proc/PID/io could not be read undercounts its reads
    own = server.get("read_bytes") if server and server.get("io_complete") is not False else None
    per_op = result.get("per_op") or {}
    figures = (result.get("ops") or {}).get(op)
    latency = figures.get("latency_us") if figures else None
    mean = latency.get("mean") if latency else None
    files = file_reads(result)
    return _Repeat(
        clients=clients,
        reads_per_op=reads / count,
        read_kib=read_bytes / reads / 1024,
        read_iops=reads / elapsed,
        user_us_per_op=float(per_op.get("server_user_us") or 0.0),
        system_us_per_op=float(per_op.get("server_system_us") or 0.0),
        measured_us=clients * elapsed * 1e6 / count,
        timed_us=float(mean) if mean else None,
        own_share=own / read_bytes if own is not None and read_bytes else None,
        file_reads_per_op=None if files is None else files / count,
    )


def _median(values: Iterable[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else None


def others(own_share: float | None) -> str | None:
    """Why the device's reads in the window are not the engine's alone (None: they are,
    or its own reads are not known)."""
    if own_share is None or own_share >= OWN_SHARE_LOW:
        return None
    return (
        f"the engine's own processes read {own_share:.0%} of the device's read bytes in the "
        f"window: the rest were another process's reads, so its device reads per second "
        f"are not its own"
    )


def same_state(file_reads_per_op: float | None, reads_per_op: float, base: Baseline) -> str | None:
    """Why a buffered step's device reads may not be set against fio's (None: they may):
    fio's or the engine's page-cache state is not measured, or the engine's hit rate
    differs from fio's by more than the model lets pass (STATE_BAND)."""
    if base.direct:
        return None
    if base.device_flag is not None:
        return f"{base.device_flag}: the two page-cache states cannot be compared"
    fio_hit, cpu, device = base.page_cache_hit_rate, base.cpu_us, base.device_us
    if fio_hit is None or cpu is None or device is None:
        return "fio's page-cache state is not measured"
    if file_reads_per_op is None:
        return (
            "the engine reads through the page cache and reported no count of its file "
            "reads (RocksDB: rocksdb.sst.read.micros; PostgreSQL: its backends' read calls; "
            "InnoDB: Innodb_buffer_pool_reads), so its page-cache hit rate is unknown and "
            "its device reads cannot be set against fio's"
        )
    if file_reads_per_op <= 0:
        return (
            f"the engine read none of its files in the window (by its own count), yet the "
            f"device served {reads_per_op:.3f} reads per operation: another process's reads"
        )
    engine_hit = 1 - reads_per_op / file_reads_per_op
    moved = state_moves(engine_hit, fio_hit, cpu, device)
    if abs(moved) <= STATE_BAND:
        return None
    how = f"{moved:.0%} more" if moved > 0 else f"{-moved:.0%} less"
    return (
        f"not fio's page-cache state: the engine's reads hit the page cache {engine_hit:.1%} "
        f"of the time, fio's {fio_hit:.1%}; at the engine's rate a reader like fio would "
        f"read the device {how} often per second (beyond ±{STATE_BAND:.0%})"
    )


def _row(
    label: str, step: str, reps: list[_Repeat], base: Baseline, direct: bool | None
) -> IoRow | str:
    """The row of a column that reads with O_DIRECT or not (`direct`; None: unknown)."""
    clients = reps[0].clients
    if base.numjobs != clients:
        return f"fio ran {base.numjobs} job(s), the step {clients} client(s): not comparable"
    fio_iops = base.device_iops
    if fio_iops is None or fio_iops <= 0:
        return base.device_flag or "fio read nothing from the device"
    m = {k: _median(getattr(r, k) for r in reps) for k in _Repeat.__dataclass_fields__}
    reads, user, system = m["reads_per_op"], m["user_us_per_op"], m["system_us_per_op"]
    assert reads is not None and user is not None and system is not None
    read_iops, measured = m["read_iops"], m["measured_us"]
    assert read_iops is not None and measured is not None
    device = base.device_us
    files, own = m["file_reads_per_op"], m["own_share"]
    why = base.mismatch(direct) or others(own) or same_state(files, reads, base)
    buffered = not base.direct if direct is None else not direct
    return IoRow(
        label=label,
        step=step,
        repeats=len(reps),
        clients=clients,
        reads_per_op=reads,
        read_kib=m["read_kib"] or 0.0,
        read_iops=read_iops,
        fio_iops=fio_iops,
        efficiency=io_efficiency(read_iops, fio_iops) if why is None else None,
        user_us_per_read=user / reads,
        system_us_per_read=system / reads,
        user_us_per_op=user,
        system_us_per_op=system,
        device_us=device,
        predicted_us=None if device is None else predicted_latency_us(user, system, reads, device),
        measured_us=measured,
        timed_us=m["timed_us"],
        own_share=own,
        buffered=buffered,
        file_reads_per_op=files if buffered else None,
        page_cache_hit_rate=1 - reads / files if files and buffered else None,
        fio_page_cache_hit_rate=base.page_cache_hit_rate if buffered else None,
        no_efficiency=why,
        device_flag=base.device_flag,
    )


def sections(record: RunJson, steps: Mapping[str, list[StepResultJson]]) -> list[IoSection]:
    """The IO-efficiency section of every comparison that has a device baseline (an
    IO-bound one: io_baseline.py), in the run's order."""
    found = baselines(record)
    from_jobs = column_modes(record.get("jobs") or {})
    by_cell: dict[tuple[str, str], list[StepResultJson]] = {}
    order: list[str] = []
    for job, results in steps.items():
        jid = JobId.of(job)
        if jid is None or jid.warmup:
            continue
        for r in results:
            if r.get("status") != "ok" or r.get("reported") is False:
                continue
            by_cell.setdefault((jid.label, r["step"]), []).append(r)
            if r["step"] not in order:
                order.append(r["step"])
    out = []
    for comp in record.get("comparisons", []):
        labels = list(comp["labels"])
        if not any(lb in found for lb in labels):
            continue
        base = found.get(labels[0]) or next(found[lb] for lb in labels if lb in found)
        if base.absent is not None:
            out.append(IoSection(comp["name"], labels, base, why_not=base.absent))
            continue
        # a failed drop: the rows are still judged by their measured state (same_state)
        warm = (record.get("page_cache") or {}).get("failed")
        section = IoSection(comp["name"], labels, base, cache_not_dropped=warm)
        for step in order:
            for label in labels:
                cell = by_cell.get((label, step))
                own = found.get(label)
                if cell and own is None:
                    section.absent.append(Absent(step, label, "its run has no device baseline"))
                elif cell and own is not None:
                    direct = column_direct(record, label, own, from_jobs)
                    _add(section, label, step, cell, own, direct)
        out.append(_collapse(section))
    return out


def _add(
    section: IoSection,
    label: str,
    step: str,
    results: list[StepResultJson],
    base: Baseline,
    direct: bool | None,
) -> None:
    reps: list[_Repeat] = []
    whys: list[str] = []
    for r in results:
        got = _repeat(r)
        if isinstance(got, str):
            whys.append(got)
        else:
            reps.append(got)
    if not reps:
        section.absent.append(Absent(step, label, whys[0]))
        return
    if base.absent is not None:
        section.absent.append(Absent(step, label, base.absent))
        return
    row = _row(label, step, reps, base, direct)
    if isinstance(row, str):
        section.absent.append(Absent(step, label, row))
    else:
        section.rows.append(row)


def _collapse(section: IoSection) -> IoSection:
    """A step absent for the same reason in every column is named once."""
    by_step: dict[str, list[Absent]] = {}
    for a in section.absent:
        by_step.setdefault(a.step, []).append(a)
    absent = []
    for step, items in by_step.items():
        whys = {a.why for a in items}
        has_rows = any(r.step == step for r in section.rows)
        if len(whys) == 1 and not has_rows:
            absent.append(Absent(step, None, items[0].why))
        else:
            absent += items
    why_not = None
    if not section.rows:
        why_not = "no step read from the device" if absent else "no step has finished yet"
    return replace(section, absent=absent, why_not=why_not)
