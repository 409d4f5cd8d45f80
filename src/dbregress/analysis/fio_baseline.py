"""fio's figures beside an IO-bound comparison, as the IO-efficiency model uses them
(analysis/io_efficiency.py, docs/metrics.md): per fio run, its reads per second, its mean
latency, its own CPU per read and, for a buffered run, the share of its reads that
reached the device; per comparison, the mean of its runs before and after its jobs.

    fio's CPU per read   = (usr% + sys%) / 100 * fio's summed job time / reads
    device latency       = (fio's mean completion latency - fio's CPU per read)
                           / the share of fio's reads that reached the device

The share is 1 with O_DIRECT. A buffered run counts its device reads from the device's
counters over the run (collect/fio.py run_counted): its other reads were page-cache
hits, which took only CPU. A device latency at or below zero is flagged, never used.

fio reads with the base column's read pattern; each column's own kind of read (O_DIRECT
or buffered) comes from the settings its server ran with (run.json's jobs, or the
baseline's `columns` that io_baseline.py records from them), by the rule its engine's
read_pattern follows (engines/*.py): a column whose reads are not fio's kind is not set
against fio's. Pure: run.json's `device_baseline` in, figures out.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, cast

from dbregress.configs import family_of
from dbregress.model.records import JobId
from dbregress.shapes.run import JobEntry, RunJson

# A buffered run whose device served more read requests than fio read by more than this
# share had another reader beside it: its hit rate and device time are not fio's.
OTHERS_SHARE = 0.05

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


def device_reads_per_us(hit_rate: float, cpu_us: float, device_us: float) -> float:
    """Device reads per µs of one reader that spends `cpu_us` on every read and waits
    `device_us` for each that misses the page cache (a share 1 - hit_rate)."""
    miss = 1 - hit_rate
    return miss / (cpu_us + miss * device_us)


def state_moves(engine_hit: float, fio_hit: float, cpu_us: float, device_us: float) -> float:
    """How much more (or less) often a reader like fio would read the device at the
    engine's page-cache hit rate than at its own: rate there / rate here - 1."""
    here = device_reads_per_us(fio_hit, cpu_us, device_us)
    return device_reads_per_us(engine_hit, cpu_us, device_us) / here - 1


# -- the device baseline -----------------------------------------------------------------


@dataclass(frozen=True)
class FioFigures:
    """One fio run, as the model uses it. `device_reads`: the device's read requests
    over a buffered run (None: an O_DIRECT run, whose every read is one, or a buffered
    run stored before they were counted)."""

    iops: float
    latency_us: float  # mean completion latency
    user_us: float  # fio's own CPU per read
    system_us: float
    ios: float = 0.0
    direct: bool = True
    device_reads: float | None = None

    @property
    def cpu_us(self) -> float:
        return self.user_us + self.system_us

    @property
    def device_share(self) -> float | None:
        """The share of fio's reads that reached the device: 1 with O_DIRECT; None for a
        buffered run whose device reads were not counted."""
        if self.direct:
            return 1.0
        if self.device_reads is None or not self.ios:
            return None
        return self.device_reads / self.ios

    @property
    def page_cache_hit_rate(self) -> float | None:
        """A buffered run's share of reads served by the page cache (None: O_DIRECT, or
        not counted); below 0 when the device saw more requests than fio read."""
        share = self.device_share
        return None if self.direct or share is None else 1 - share

    @property
    def device_iops(self) -> float | None:
        """The device reads per second fio got (its reads per second with O_DIRECT)."""
        share = self.device_share
        return None if share is None else self.iops * share

    @property
    def device_us(self) -> float | None:
        """The device's time per device read: fio's mean latency less its CPU per read,
        over the share of its reads that reached the device (None: none did, or not
        counted). At or below zero it is flagged (device_flag), never used."""
        share = self.device_share
        if share is None or share <= 0:
            return None
        return device_latency_us(self.latency_us, self.cpu_us) / share

    @property
    def device_flag(self) -> str | None:
        """Why this run gives no usable device time (None: it does)."""
        device = self.device_us
        if self.device_share is None:
            return "fio's device reads were not counted (a run stored before they were)"
        if device is None:
            return "none of fio's reads reached the device (the page cache served them all)"
        if device <= 0:
            return (
                f"fio's mean latency {self.latency_us:.1f} µs is not above its own CPU per "
                f"read {self.cpu_us:.1f} µs: the device's time per read comes out "
                f"{device:+.1f} µs"
            )
        share = self.device_share
        if not self.direct and share is not None and share > 1 + OTHERS_SHARE:
            return (
                f"the device served {share - 1:.0%} more read requests than fio read: "
                f"another process read it during fio's run, so fio's page-cache hit rate "
                f"and device time are not measured"
            )
        return None

    @classmethod
    def of(
        cls,
        figures: Mapping[str, float],
        direct: bool = True,
        device_reads: Mapping[str, float] | None = None,
    ) -> FioFigures:
        """From collect/fio.read_figures' dict, as run.json stores it, with the run's
        `device_reads` (collect/fio.run_counted) for a buffered one."""
        user, system = fio_cpu_us_per_io(
            figures["usr_cpu_pct"],
            figures["sys_cpu_pct"],
            figures["job_runtime_ms"],
            figures["ios"],
        )
        reads = None if device_reads is None else float(device_reads["reads"])
        return cls(
            figures["iops"], figures["clat_mean_us"], user, system, figures["ios"], direct, reads
        )


# -- each column's kind of read ----------------------------------------------------------

TRUE = ("true", "1", "on", "yes")


def reads_direct(build: str, settings: Mapping[str, str]) -> bool | None:
    """Whether a column's engine reads with O_DIRECT, from the settings its server ran
    with (its engine's settings_applied, as run.json's jobs keep them) by the rule of its
    engine's read_pattern: RocksDB's `direct_io`, InnoDB's `innodb_flush_method` naming
    O_DIRECT, PostgreSQL never. None: an engine that reads no storage, or unknown."""
    engine = build.partition("@")[0]
    if engine == "postgres":
        return False
    if family_of(engine) == "mysql":
        return "o_direct" in settings.get("innodb_flush_method", "").lower()
    if engine == "rocksdb":
        return settings.get("direct_io", "false").strip().lower() in TRUE
    return None


def column_modes(jobs: Mapping[str, JobEntry]) -> dict[str, bool]:
    """column label -> whether its reads are O_DIRECT, from its jobs' recorded settings
    (a column whose jobs have none recorded yet, or whose engine reads no storage, is
    left out)."""
    out: dict[str, bool] = {}
    for key, job in jobs.items():
        jid = JobId.of(key)
        if jid is None or jid.label in out or "settings" not in job or "build" not in job:
            continue
        direct = reads_direct(job["build"], job["settings"])
        if direct is not None:
            out[jid.label] = direct
    return out


def kind(direct: bool) -> str:
    return "with O_DIRECT" if direct else "through the page cache (buffered)"


@dataclass(frozen=True)
class Baseline:
    """A comparison's device baseline: fio before and after its jobs. `columns`: each
    column's own kind of read (label -> O_DIRECT), as the run recorded it."""

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
    columns: dict[str, bool] = field(default_factory=dict)

    def mismatch(self, direct: bool | None) -> str | None:
        """Why a column that reads so (`direct`; None: not known) is not set against
        fio's reads (None: it reads as fio did)."""
        if direct is None:
            return (
                "the column's kind of read (O_DIRECT or buffered) is not recorded (no "
                "settings of its jobs): it cannot be set against fio's"
            )
        if direct == self.direct:
            return None
        return (
            f"the column reads {kind(direct)}, fio {kind(self.direct)} (the base column's "
            f"read pattern): not the same kind of read, so no efficiency against fio's"
        )

    @property
    def runs(self) -> list[FioFigures]:
        return [f for f in (self.before, self.after) if f is not None]

    def _mean(self, of: Callable[[FioFigures], float | None]) -> float | None:
        """The mean over fio's runs (before and after) of one figure; None when a run
        lacks it."""
        found = [of(f) for f in self.runs]
        present = [v for v in found if v is not None]
        return statistics.fmean(present) if present and len(present) == len(found) else None

    @property
    def iops(self) -> float | None:
        """fio's reads per second (page-cache hits included, for buffered runs)."""
        return self._mean(lambda f: f.iops)

    @property
    def device_iops(self) -> float | None:
        """fio's device reads per second: what the engine's are set against."""
        return self._mean(lambda f: f.device_iops)

    @property
    def page_cache_hit_rate(self) -> float | None:
        """fio's, the mean over its runs; None where a run's is not measured (flagged)."""
        if self.device_flag is not None:
            return None
        return self._mean(lambda f: f.page_cache_hit_rate)

    @property
    def device_flag(self) -> str | None:
        """Why the baseline gives no usable device time: the first run that does not
        (None: every run gives one above zero)."""
        for when, f in (("before", self.before), ("after", self.after)):
            if f is not None and f.device_flag is not None:
                return f"fio {when} the comparison: {f.device_flag}"
        return None

    @property
    def device_us(self) -> float | None:
        """The device's time per read, the mean over fio's runs; None when a run's is
        flagged (device_flag)."""
        return None if self.device_flag is not None else self._mean(lambda f: f.device_us)

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
    direct = bool(stored.get("direct"))
    for when in ("before", "after"):
        run = stored.get(when) or {}
        if run.get("error"):
            errors.append(f"fio {when}: {run['error']}")
        figures = run.get("figures")
        reads = run.get("device_reads")
        runs[when] = FioFigures.of(figures, direct, reads) if figures else None
        if run.get("file"):
            files.append(str(run["file"]))
        command = command or list(run.get("command") or [])
    absent = stored.get("absent")
    if absent is None and not any(runs.values()):
        absent = "fio has not run yet (the comparison's jobs are not finished)"
    columns = {str(k): bool(v) for k, v in (stored.get("columns") or {}).items() if v is not None}
    return Baseline(
        numjobs=int(stored.get("numjobs") or 0),
        block_size=int(stored.get("block_size") or 0),
        direct=direct,
        device=stored.get("device"),
        fio_version=stored.get("fio_version"),
        command=command,
        before=runs["before"],
        after=runs["after"],
        files=files,
        errors=errors,
        absent=absent,
        columns=columns,
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


def column_direct(
    record: RunJson, label: str, base: Baseline, from_jobs: Mapping[str, bool]
) -> bool | None:
    """Whether the column `label` reads with O_DIRECT: as its baseline recorded it, else
    as its jobs' settings say (`from_jobs`: column_modes of the record's jobs). A merged
    run's label "A:x" or "B:x" is x in its own run, whose jobs the merged record holds
    for run A only. None: not known."""
    merged = record.get("device_baseline_by_column") is not None
    own = label.split(":", 1)[1] if merged and ":" in label else label
    if own in base.columns:
        return base.columns[own]
    if merged and not label.startswith("A:"):
        return None
    return from_jobs.get(own)
