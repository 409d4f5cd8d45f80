"""The device beside an IO-bound comparison: fio before and after its jobs.

For a comparison marked IO-bound (a column of the iobuf or iodir config, or the lab's
`io_baseline = true`), fio reads a file on the same filesystem as the engines' data
directories with the engines' read pattern (the base column's: engines/*.py
`read_pattern`): random reads of its block size, O_DIRECT when it reads so, the psync
engine at queue depth 1 per client, as many jobs as the comparison has clients
(collect/fio.py). It runs once before the comparison's first job and once after its
last, so a device that drifts over the run shows. fio's whole JSON goes to
`device/<comparison>-<when>.fio.json` in the run folder; run.json's `device_baseline`
keeps, per comparison, the read pattern, fio's version and command, the figures the model
needs (analysis/io_efficiency.py), the files' names, or why there is no baseline (fio
missing, no block device, fio failing). A buffered run also keeps the device's read
counters over it (`device_reads`): which of fio's reads reached the device, the rest
being page-cache hits that fio's reads per second count alike. Each entry also keeps
each column's own kind of read (`columns`: label -> O_DIRECT, from the settings its jobs'
servers ran with; analysis/fio_baseline.py column_modes), so that a column that does not
read as the base does is not set against fio's reads. Nothing here fails the run: a
baseline that cannot be measured is recorded as absent, and the report says why.
"""

from __future__ import annotations

import os
import re
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Literal

from dbregress.analysis.fio_baseline import column_modes
from dbregress.collect import fio
from dbregress.collect.diskstats import find_device
from dbregress.engines.base import Engine
from dbregress.execution import prepare
from dbregress.lab.file import Comparison, Lab
from dbregress.model.errors import DbregressError
from dbregress.shapes.device import DeviceBaseline, FioRun
from dbregress.store.run import RunWriter

When = Literal["before", "after"]
WHEN: tuple[When, When] = ("before", "after")
MIN_FILE_MB = 256  # fio's file: about the engines' data, at least this
FREE_SHARE = 0.5  # and at most this share of the filesystem's free space


def clients_of(comparison: Comparison) -> int:
    """The concurrency of the comparison's read steps: fio's jobs."""
    sizes = comparison.sizes
    found = getattr(sizes, "threads", None) or getattr(sizes, "clients", None)
    return int(found) if found else 1


def file_mb(comparison: Comparison, directory: Path) -> int:
    """fio's file: about the engines' data (so a device or host cache holds as much of
    it as of theirs), within the free space."""
    stat = os.statvfs(directory)
    free_mb = stat.f_bavail * stat.f_frsize // 2**20
    want = max(MIN_FILE_MB, prepare.engine_sizes(comparison).data_mb)
    return max(1, min(want, int(free_mb * FREE_SHARE)))


def _stem(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "_", name)


def measure(
    lab: Lab,
    comparison: Comparison,
    engine: Engine,
    directory: Path,
    writer: RunWriter,
    when: When,
    notify: Callable[[str], None],
) -> None:
    """fio `when` (before or after) the comparison's jobs, into the run folder; a run
    resumed after it ran keeps what it found."""
    assert when in WHEN
    stored = writer.record.setdefault("device_baseline", {})
    entry = stored.get(comparison.name)
    if entry is not None and (entry.get(when) is not None or entry.get("absent")):
        return
    if entry is None:
        entry = _entry(comparison, engine, directory)
        stored[comparison.name] = entry
    if entry.get("absent") is None:
        entry[when] = found = _run(lab, comparison, entry, directory, writer, when, notify)
        if "error" in found and when == "before":
            entry["absent"] = found["error"]  # an error after keeps the run before
    # each column's own kind of read, once its jobs have run (after: all of them)
    modes = column_modes(writer.record.get("jobs") or {})
    entry["columns"] = {c.label: modes.get(c.label) for c in comparison.columns}
    writer.set_record("device_baseline", stored)


def _entry(comparison: Comparison, engine: Engine, directory: Path) -> DeviceBaseline:
    """The read pattern and the device, or why there is none."""
    entry: DeviceBaseline = {
        "numjobs": clients_of(comparison),
        "block_size": None,
        "direct": None,
        "source": None,
        "device": None,
        "fio_version": None,
        "before": None,
        "after": None,
        "absent": None,
    }
    try:
        pattern = engine.read_pattern()
    except DbregressError as e:
        return _absent(entry, f"the base column's read pattern: {e}")
    if pattern is None:
        return _absent(entry, f"{engine.build.spec} reads no storage")
    entry["block_size"], entry["direct"] = pattern.block_size, pattern.direct
    entry["source"] = pattern.source
    device = find_device(directory)
    if device.name is None:
        return _absent(entry, device.note)
    entry["device"] = device.name
    try:
        entry["fio_version"] = fio.version(fio.find_fio())
    except fio.FioError as e:
        return _absent(entry, str(e))
    return entry


def _absent(entry: DeviceBaseline, why: str | None) -> DeviceBaseline:
    absent = entry.copy()
    absent["absent"] = why
    return absent


def _run(
    lab: Lab,
    comparison: Comparison,
    entry: DeviceBaseline,
    directory: Path,
    writer: RunWriter,
    when: When,
    notify: Callable[[str], None],
) -> FioRun:
    """One fio run: its figures, command and file, or the error that stopped it."""
    block_size = entry["block_size"]
    assert block_size is not None  # an entry with no read pattern is absent
    try:
        directory.mkdir(parents=True, exist_ok=True)
        job = fio.FioJob(
            directory,
            int(block_size),
            bool(entry["direct"]),
            int(entry["numjobs"]),
            lab.io_baseline_s,
            file_mb(comparison, directory),
        )
        notify(
            f"{comparison.name}: fio {when} the comparison: {job.block_size} B random reads"
            f"{', O_DIRECT' if job.direct else ''}, {job.numjobs} job(s), {job.size_mb} MB "
            f"file on {entry['device']}, {job.runtime_s} s"
        )
        device = entry["device"]
        assert device is not None  # an entry with no device is absent
        command, output, device_reads = fio.run_counted(job, device)
        figures = fio.read_figures(output)
    except (fio.FioError, OSError) as e:
        notify(f"{comparison.name}: no device baseline {when} the comparison: {e}")
        return {"error": str(e)}
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    rel = f"device/{_stem(comparison.name)}-{when}.fio.json"
    writer.write_file(rel, output)
    found: FioRun = {
        "at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "file": rel,
        "command": command,
        "size_mb": job.size_mb,
        "runtime_s": job.runtime_s,
        "figures": figures,
    }
    if device_reads is not None:
        found["device_reads"] = device_reads
    return found
