"""IO efficiency and the read-latency model of an IO-bound step (docs/metrics.md).

A random-read step that misses the engine's cache spends each operation's time in three
places: its own userland CPU, the libc and kernel CPU of its reads, and the device. fio
reading the same device with the same block size and concurrency (collect/fio.py) shows
what a reader that does nothing else gets:

    fio's CPU per read      = (usr% + sys%) / 100 * fio's summed job time / reads
    device latency          = fio's mean completion latency - fio's CPU per read
    IO efficiency           = the engine's device reads per second / fio's reads per second
    predicted time per op   = user CPU per op + system CPU per op
                              + device reads per op * device latency

The prediction stands beside the measured time per operation of a closed-loop client
(clients / QPS: what the reads per second follow from), with the difference in µs and
in percent. Everything here is pure: stored step results and run.json in, rows out.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, cast

from dbregress.records import JobId
from dbregress.shapes.run import RunJson
from dbregress.shapes.step_result import StepResultJson

# A step whose main operation writes has no reads to set against fio's.
WRITE_OPS = frozenset(
    {"insert", "put", "delete", "update", "create_index", "flush", "compact", "cleanup"}
)
# More of the device's reads than this share come from other processes: named in the row.
OWN_SHARE_LOW = 0.8


# -- the model's arithmetic --------------------------------------------------------------


def fio_cpu_us_per_io(
    usr_cpu_pct: float, sys_cpu_pct: float, job_runtime_ms: float, ios: float
) -> tuple[float, float]:
    """fio's own (user, system) CPU µs per read: its CPU percentages are of the jobs'
    summed run time (group reporting)."""
    if ios <= 0:
        raise ValueError("fio completed no reads")
    scale = job_runtime_ms * 1000 / 100 / ios
    return usr_cpu_pct * scale, sys_cpu_pct * scale


def device_latency_us(fio_latency_us: float, fio_cpu_us: float) -> float:
    """The device's share of a read: fio's mean latency less fio's own CPU per read."""
    return fio_latency_us - fio_cpu_us


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


# -- the device baseline -----------------------------------------------------------------


@dataclass(frozen=True)
class FioFigures:
    """One fio run, as the model uses it."""

    iops: float
    latency_us: float  # mean completion latency
    user_us: float  # fio's own CPU per read
    system_us: float

    @property
    def cpu_us(self) -> float:
        return self.user_us + self.system_us

    @property
    def device_us(self) -> float:
        return device_latency_us(self.latency_us, self.cpu_us)

    @classmethod
    def of(cls, figures: Mapping[str, float]) -> FioFigures:
        """From collect/fio.read_figures' dict, as run.json stores it."""
        user, system = fio_cpu_us_per_io(
            figures["usr_cpu_pct"],
            figures["sys_cpu_pct"],
            figures["job_runtime_ms"],
            figures["ios"],
        )
        return cls(figures["iops"], figures["clat_mean_us"], user, system)


@dataclass(frozen=True)
class Baseline:
    """A comparison's device baseline: fio before and after its jobs."""

    numjobs: int
    block_size: int
    direct: bool
    device: str | None
    fio_version: str | None
    command: list[str]
    before: FioFigures | None
    after: FioFigures | None
    files: list[str] = field(default_factory=list)  # fio's JSON in the run folder
    errors: list[str] = field(default_factory=list)  # a run after that failed
    absent: str | None = None  # why there is no baseline

    @property
    def runs(self) -> list[FioFigures]:
        return [f for f in (self.before, self.after) if f is not None]

    def _mean(self, of: Callable[[FioFigures], float]) -> float | None:
        """The mean over fio's runs (before and after) of one figure."""
        runs = self.runs
        return statistics.fmean(of(f) for f in runs) if runs else None

    @property
    def iops(self) -> float | None:
        return self._mean(lambda f: f.iops)

    @property
    def device_us(self) -> float | None:
        return self._mean(lambda f: f.device_us)

    @property
    def latency_us(self) -> float | None:
        return self._mean(lambda f: f.latency_us)

    @property
    def cpu_us(self) -> float | None:
        return self._mean(lambda f: f.cpu_us)

    @property
    def drift(self) -> float | None:
        """after / before - 1 of fio's reads per second: the device moving under the run."""
        if self.before is None or self.after is None or not self.before.iops:
            return None
        return self.after.iops / self.before.iops - 1


def baseline_of(stored: Mapping[str, Any]) -> Baseline:
    """A comparison's entry of run.json's `device_baseline` (io_baseline.py writes it)."""
    runs: dict[str, FioFigures | None] = {}
    files, errors = [], []
    command: list[str] = []
    for when in ("before", "after"):
        run = stored.get(when) or {}
        if run.get("error"):
            errors.append(f"fio {when}: {run['error']}")
        figures = run.get("figures")
        runs[when] = FioFigures.of(figures) if figures else None
        if run.get("file"):
            files.append(str(run["file"]))
        command = command or list(run.get("command") or [])
    absent = stored.get("absent")
    if absent is None and not any(runs.values()):
        absent = "fio has not run yet (the comparison's jobs are not finished)"
    return Baseline(
        numjobs=int(stored.get("numjobs") or 0),
        block_size=int(stored.get("block_size") or 0),
        direct=bool(stored.get("direct")),
        device=stored.get("device"),
        fio_version=stored.get("fio_version"),
        command=command,
        before=runs["before"],
        after=runs["after"],
        files=files,
        errors=errors,
        absent=absent,
    )


def baselines(record: RunJson) -> dict[str, Baseline]:
    """column label -> its comparison's baseline, for every IO-bound comparison. A merged
    run (`dbregress compare`) names each column's own in `device_baseline_by_column`, a
    key of the merged record only, not of a stored run.json."""
    by_column = cast(
        Mapping[str, Mapping[str, Any] | None] | None, record.get("device_baseline_by_column")
    )
    if by_column is not None:
        return {label: baseline_of(b) for label, b in by_column.items() if b is not None}
    stored = record.get("device_baseline") or {}
    out: dict[str, Baseline] = {}
    for comp in record.get("comparisons", []):
        if comp["name"] in stored:
            found = baseline_of(stored[comp["name"]])
            out |= dict.fromkeys(comp["labels"], found)
    return out


# -- per step and column -----------------------------------------------------------------


@dataclass(frozen=True)
class IoRow:
    """One step of one column: medians over its measured repeats."""

    label: str
    step: str
    repeats: int
    clients: int
    reads_per_op: float
    read_kib: float  # mean request size
    read_iops: float
    fio_iops: float
    efficiency: float
    user_us_per_read: float
    system_us_per_read: float
    user_us_per_op: float
    system_us_per_op: float
    device_us: float
    predicted_us: float
    measured_us: float  # clients / QPS: a closed-loop client's time per operation
    timed_us: float | None  # the loadgen's mean latency of the operation (inside the call)
    own_share: float | None  # the engine's read bytes / the device's read bytes

    @property
    def diff_us(self) -> float:
        return self.predicted_us - self.measured_us

    @property
    def diff_pct(self) -> float:
        return 100 * self.diff_us / self.measured_us if self.measured_us else 0.0

    @property
    def predicted_efficiency(self) -> float:
        """The efficiency the model predicts from the predicted time per operation."""
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
    own = server.get("read_bytes") if server else None
    per_op = result.get("per_op") or {}
    figures = (result.get("ops") or {}).get(op)
    latency = figures.get("latency_us") if figures else None
    mean = latency.get("mean") if latency else None
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
    )


def _median(values: Iterable[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else None


def _row(label: str, step: str, reps: list[_Repeat], base: Baseline) -> IoRow | str:
    clients = reps[0].clients
    if base.numjobs != clients:
        return f"fio ran {base.numjobs} job(s), the step {clients} client(s): not comparable"
    fio_iops, device = base.iops, base.device_us
    assert fio_iops is not None and device is not None
    m = {k: _median(getattr(r, k) for r in reps) for k in _Repeat.__dataclass_fields__}
    reads, user, system = m["reads_per_op"], m["user_us_per_op"], m["system_us_per_op"]
    assert reads is not None and user is not None and system is not None
    read_iops, measured = m["read_iops"], m["measured_us"]
    assert read_iops is not None and measured is not None
    return IoRow(
        label=label,
        step=step,
        repeats=len(reps),
        clients=clients,
        reads_per_op=reads,
        read_kib=m["read_kib"] or 0.0,
        read_iops=read_iops,
        fio_iops=fio_iops,
        efficiency=io_efficiency(read_iops, fio_iops),
        user_us_per_read=user / reads,
        system_us_per_read=system / reads,
        user_us_per_op=user,
        system_us_per_op=system,
        device_us=device,
        predicted_us=predicted_latency_us(user, system, reads, device),
        measured_us=measured,
        timed_us=m["timed_us"],
        own_share=m["own_share"],
    )


def sections(record: RunJson, steps: Mapping[str, list[StepResultJson]]) -> list[IoSection]:
    """The IO-efficiency section of every comparison that has a device baseline (an
    IO-bound one: io_baseline.py), in the run's order."""
    found = baselines(record)
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
        section = IoSection(comp["name"], labels, base)
        for step in order:
            for label in labels:
                cell = by_cell.get((label, step))
                own = found.get(label)
                if cell and own is None:
                    section.absent.append(Absent(step, label, "its run has no device baseline"))
                elif cell and own is not None:
                    _add(section, label, step, cell, own)
        out.append(_collapse(section))
    return out


def _add(
    section: IoSection, label: str, step: str, results: list[StepResultJson], base: Baseline
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
    row = _row(label, step, reps, base)
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
    return IoSection(
        section.comparison, section.labels, section.baseline, section.rows, absent, why_not
    )
