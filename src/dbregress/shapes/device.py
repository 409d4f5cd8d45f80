"""run.json's `device_baseline` (io_baseline.py): per IO-bound comparison, fio's random
reads with the engines' read pattern before and after its jobs, or why there is none.
The run schema keeps each entry an open object; these say what io_baseline.py writes
and analysis/io_efficiency.py reads."""

from __future__ import annotations

from typing import NotRequired, TypedDict


class FioFiguresJson(TypedDict):
    """The reads' figures in fio's JSON (collect/fio.py read_figures)."""

    iops: float
    ios: float
    clat_mean_us: float
    lat_mean_us: float
    usr_cpu_pct: float
    sys_cpu_pct: float
    job_runtime_ms: float


class DeviceReadsJson(TypedDict):
    """The device's read counters over a buffered fio run, from /proc/diskstats taken
    just before and after it (collect/fio.py run_counted): what of fio's reads reached
    the device (the rest came from the page cache)."""

    reads: int  # read requests completed
    read_bytes: int
    read_ms: int  # milliseconds reads spent in the device (queued or served)


class FioRun(TypedDict):
    """One fio run: its figures, command and file, or (`error` alone) why it failed.
    `device_reads`: a buffered run's device counters over the run (absent for O_DIRECT
    runs, whose every read is a device read, and in runs stored before it existed)."""

    error: NotRequired[str]
    at: NotRequired[str]
    file: NotRequired[str]  # fio's whole JSON, relative to the run folder
    command: NotRequired[list[str]]
    size_mb: NotRequired[int]
    runtime_s: NotRequired[int]
    figures: NotRequired[FioFiguresJson]
    device_reads: NotRequired[DeviceReadsJson]


class DeviceBaseline(TypedDict):
    """A comparison's entry: the read pattern (the base column's), the device, and the
    runs before and after; `absent` says why there is no baseline. `columns`: each
    column's own kind of read (label -> O_DIRECT; None until its jobs have run), from the
    settings its servers ran with (absent in runs stored before it existed)."""

    numjobs: int
    block_size: int | None
    direct: bool | None
    source: str | None
    device: str | None
    fio_version: str | None
    before: FioRun | None
    after: FioRun | None
    absent: str | None
    columns: NotRequired[dict[str, bool | None]]
