"""The block device under a directory and its read counters, from /proc/diskstats.

A step's device reads are the difference of two readings of the line of the device that
holds the engine's data directory (found from the directory's st_dev through
/sys/dev/block): requests completed, sectors read and the milliseconds reads spent in
the device. The counters are the device's, not the engine's: another process reading
the same device in the window is counted too (the process tree's own `read_bytes`,
collect/proc.py, is stored beside them to check against). A directory on tmpfs, overlay
or another filesystem with no block device has no line: `find_device` says why.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

DISKSTATS = Path("/proc/diskstats")
SYS_DEV_BLOCK = Path("/sys/dev/block")
SECTOR_BYTES = 512  # /proc/diskstats counts 512-byte sectors whatever the device's own


@dataclass(frozen=True)
class Device:
    """The block device a directory lives on, or why there is none."""

    name: str | None  # as /proc/diskstats names it (vda, nvme0n1p2); None: no device
    note: str | None = None  # why there is no device

    def to_json(self) -> dict[str, str | None]:
        return {"name": self.name, "note": self.note}


@dataclass(frozen=True)
class DiskSample:
    """One reading of a device's read counters."""

    reads: int  # read requests completed
    sectors: int  # 512-byte sectors read
    read_ms: int  # milliseconds reads spent in the device (queued or served)

    def delta(self, later: DiskSample) -> DiskSample:
        return DiskSample(
            max(0, later.reads - self.reads),
            max(0, later.sectors - self.sectors),
            max(0, later.read_ms - self.read_ms),
        )


def _existing(path: Path) -> Path:
    """The directory itself, or its nearest existing parent (a data directory not
    created yet lives on its parent's filesystem)."""
    for candidate in (path, *path.parents):
        if candidate.exists():
            return candidate
    return Path("/")


def find_device(path: Path, diskstats: Path = DISKSTATS, sys_block: Path = SYS_DEV_BLOCK) -> Device:
    """The block device holding `path`, as /proc/diskstats names it."""
    where = _existing(path)
    dev = os.stat(where).st_dev
    major, minor = os.major(dev), os.minor(dev)
    link = sys_block / f"{major}:{minor}"
    if major == 0 or not link.exists():
        fs = _fs_type(where)
        return Device(
            None,
            f"{where} is on {fs or 'a filesystem'} with no block device "
            f"(device {major}:{minor}); put DBREGRESS_WORKDIR on a disk",
        )
    name = link.resolve().name
    if read_device(name, diskstats) is None:
        return Device(None, f"{name} (device {major}:{minor}) has no line in {diskstats}")
    return Device(name)


def _fs_type(path: Path) -> str | None:
    """The filesystem type of the mount holding `path` (tmpfs, overlay...)."""
    try:
        lines = Path("/proc/self/mounts").read_text().splitlines()
    except OSError:
        return None
    best, fs = "", None
    resolved = str(path.resolve())
    for line in lines:
        parts = line.split()
        if len(parts) < 3:
            continue
        mount = parts[1].replace("\\040", " ")
        inside = resolved == mount or resolved.startswith(mount.rstrip("/") + "/")
        if inside and len(mount) >= len(best):
            best, fs = mount, parts[2]
    return fs


def parse_line(line: str) -> tuple[str, DiskSample] | None:
    """(device name, its read counters) from one line of /proc/diskstats."""
    parts = line.split()
    if len(parts) < 14:
        return None
    # major minor name reads merged sectors read_ms writes ...
    return parts[2], DiskSample(int(parts[3]), int(parts[5]), int(parts[6]))


def read_device(name: str, diskstats: Path = DISKSTATS) -> DiskSample | None:
    """The device's read counters now; None where it or the file cannot be read."""
    try:
        text = diskstats.read_text()
    except OSError:
        return None
    for line in text.splitlines():
        found = parse_line(line)
        if found is not None and found[0] == name:
            return found[1]
    return None
