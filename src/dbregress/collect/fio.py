"""fio's random reads on the engine's filesystem: what the device gives a reader that
does nothing but read, at the engine's block size and concurrency.

One run is `fio --rw=randread --ioengine=psync --iodepth=1 --numjobs=N --bs=B
[--direct=1]` over a file of `size_mb` in the directory given (on the same filesystem as
the engine's data), time-based, with `--output-format=json`. The whole JSON fio prints is
kept; `read_figures` takes from it the figures the IO-efficiency model needs
(analysis/io_efficiency.py). fio is Debian's `fio` package; a host without it gets
`FioMissing`, naming the package.

An O_DIRECT run reads the device on every read and starts after a one-second ramp. A
buffered run's reads may come from the page cache instead (its jobs share one file, so
one job's read can serve another's), and fio's reads per second count those hits: so
`run_counted` also reads the device's counters (/proc/diskstats) just before and after
the run, and a buffered run has no ramp, so that fio's reads and the device's cover the
same stretch (fio lays out its file with writes and invalidates its pages before it
reads: neither reads the device).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dbregress.collect.diskstats import SECTOR_BYTES, read_device
from dbregress.model.errors import DbregressError
from dbregress.shapes.device import DeviceReadsJson, FioFiguresJson

RAMP_S = 1  # an O_DIRECT run's --ramp_time: the first second's reads are not counted
FILE_NAME = "dbregress-fio.dat"


class FioError(DbregressError):
    """fio could not run or said something we cannot read."""


class FioMissing(FioError):
    """No fio on PATH."""


@dataclass(frozen=True)
class FioJob:
    """The read pattern to measure and where."""

    directory: Path  # on the engine's filesystem
    block_size: int  # bytes per read
    direct: bool  # O_DIRECT, as the engine reads
    numjobs: int  # one reader per client, each at queue depth 1
    runtime_s: int
    size_mb: int  # the file read; about the engine's data size

    @property
    def ramp_s(self) -> int:
        """fio's --ramp_time: none for a buffered run, whose device reads are counted
        over the whole run (run_counted)."""
        return RAMP_S if self.direct else 0

    def command(self, fio: str = "fio") -> list[str]:
        return [
            fio,
            "--name=dbregress-baseline",
            f"--filename={self.directory / FILE_NAME}",
            f"--size={self.size_mb}m",
            "--rw=randread",
            f"--bs={self.block_size}",
            "--ioengine=psync",
            "--iodepth=1",
            f"--numjobs={self.numjobs}",
            f"--direct={1 if self.direct else 0}",
            "--invalidate=1",
            "--randrepeat=0",
            "--time_based",
            f"--runtime={self.runtime_s}",
            f"--ramp_time={self.ramp_s}",
            "--group_reporting",
            "--output-format=json",
        ]


def find_fio() -> str:
    """fio's path; FioMissing when it is not installed."""
    found = shutil.which("fio")
    if found is None:
        raise FioMissing("fio not found on PATH (install Debian's `fio` package)")
    return found


def version(fio: str) -> str:
    """`fio --version`, e.g. fio-3.33."""
    try:
        out = subprocess.run(
            [fio, "--version"], capture_output=True, text=True, timeout=30, check=True
        )
    except (OSError, subprocess.SubprocessError) as e:
        raise FioError(f"{fio} --version failed: {e}") from e
    return out.stdout.strip()


def run(job: FioJob, timeout_s: float | None = None) -> tuple[list[str], dict[str, Any]]:
    """Runs fio (laying out its file first, which fio does itself) and returns the
    command and fio's JSON; the file is removed afterwards."""
    fio = find_fio()
    cmd = job.command(fio)
    limit = timeout_s or job.runtime_s * 4 + 600  # the file's layout takes a while
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=limit)
    except subprocess.TimeoutExpired as e:
        raise FioError(f"fio did not finish within {limit:.0f} s: {' '.join(cmd)}") from e
    except OSError as e:
        raise FioError(f"cannot run fio: {e}") from e
    finally:
        (job.directory / FILE_NAME).unlink(missing_ok=True)
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
        raise FioError(f"fio exited {done.returncode}: {' / '.join(tail)}")
    # fio may print notes before its JSON
    text = done.stdout[done.stdout.find("{") :]
    try:
        output = json.loads(text)
    except json.JSONDecodeError as e:
        raise FioError(f"fio's output is not JSON ({e}): {text[:200]!r}") from e
    if not isinstance(output, dict):
        raise FioError("fio's output is not a JSON object")
    return [Path(cmd[0]).name, *cmd[1:]], output


def run_counted(
    job: FioJob, device: str, timeout_s: float | None = None
) -> tuple[list[str], dict[str, Any], DeviceReadsJson | None]:
    """`run`, and for a buffered job the device's read counters over the run (None for
    an O_DIRECT job, whose every read is a device read). FioError when the device's
    counters cannot be read: without them a buffered run's reads per second would
    count page-cache hits as device reads."""
    before = None if job.direct else read_device(device)
    if not job.direct and before is None:
        raise FioError(f"cannot read {device}'s counters in /proc/diskstats")
    command, output = run(job, timeout_s)
    if before is None:
        return command, output, None
    after = read_device(device)
    if after is None:
        raise FioError(f"cannot read {device}'s counters in /proc/diskstats after fio")
    d = before.delta(after)
    return (
        command,
        output,
        {
            "reads": d.reads,
            "read_bytes": d.sectors * SECTOR_BYTES,
            "read_ms": d.read_ms,
        },
    )


def read_figures(output: dict[str, Any]) -> FioFiguresJson:
    """The reads' figures in fio's JSON (group reporting: one job entry): reads per
    second, completed reads, the mean completion latency (µs), fio's own user and
    system CPU (percent of the jobs' summed run time) and that run time (ms)."""
    try:
        job = output["jobs"][0]
        read = job["read"]
        runtime_ms = float(job.get("job_runtime") or read["runtime"])
        return {
            "iops": float(read["iops"]),
            "ios": float(read["total_ios"]),
            "clat_mean_us": float(read["clat_ns"]["mean"]) / 1000,
            "lat_mean_us": float(read["lat_ns"]["mean"]) / 1000,
            "usr_cpu_pct": float(job["usr_cpu"]),
            "sys_cpu_pct": float(job["sys_cpu"]),
            "job_runtime_ms": runtime_ms,
        }
    except (KeyError, IndexError, TypeError, ValueError) as e:
        raise FioError(f"fio's JSON lacks the read figures ({type(e).__name__}: {e})") from e
