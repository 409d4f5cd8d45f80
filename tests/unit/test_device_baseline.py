"""The device beside an IO-bound comparison: the block device under a directory
(collect/diskstats.py), fio's run and figures (collect/fio.py), and the baseline as a run
records it (io_baseline.py), including why it is absent: no fio, no block device."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from dbregress.collect import diskstats, fio
from dbregress.engines.base import ReadPattern
from dbregress.execution import io_baseline
from dbregress.lab.file import load_lab
from dbregress.store.run import RunWriter

TMPFS = Path("/dev/shm")
LAB = """
name = "io"
benchmark = "kv"
[[column]]
label = "a"
build = "rocksdb@10.2.1"
config = "iodir"
[kv]
keys = 1000
threads = 2
steps = ["fillseq", "readrandom"]
"""


def _on_tmpfs() -> bool:
    return TMPFS.is_dir() and diskstats.find_device(TMPFS).name is None


def test_a_line_of_diskstats_reads_its_read_counters() -> None:
    line = " 254 0 vda 2282552 159329 73154658 6069778 5545564 1206271 279800240 2148659 0 1 2"
    name, sample = diskstats.parse_line(line) or ("", None)
    assert name == "vda" and sample == diskstats.DiskSample(2282552, 73154658, 6069778)
    later = diskstats.DiskSample(2282652, 73156258, 6069878)
    assert sample.delta(later) == diskstats.DiskSample(100, 1600, 100)


def test_a_directory_on_a_disk_has_its_device(tmp_path: Path) -> None:
    found = diskstats.find_device(tmp_path)
    if found.name is None:
        pytest.skip(f"this host's temporary directory has no block device: {found.note}")
    assert diskstats.read_device(found.name) is not None


def test_a_directory_not_yet_created_is_on_its_parents_device(tmp_path: Path) -> None:
    assert diskstats.find_device(tmp_path / "a" / "b") == diskstats.find_device(tmp_path)


@pytest.mark.skipif(not _on_tmpfs(), reason="no tmpfs at /dev/shm")
def test_tmpfs_has_no_block_device_and_says_so() -> None:
    found = diskstats.find_device(TMPFS)
    assert found.name is None and found.note is not None
    assert "tmpfs" in found.note and "DBREGRESS_WORKDIR" in found.note


def test_fio_missing_names_the_package(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(fio.FioMissing, match="install Debian's `fio` package"):
        fio.find_fio()


def test_the_fio_command_has_the_engines_read_pattern(tmp_path: Path) -> None:
    cmd = fio.FioJob(tmp_path, 8192, True, 6, 10, 512).command()
    for arg in ("--rw=randread", "--bs=8192", "--ioengine=psync", "--iodepth=1"):
        assert arg in cmd
    assert "--numjobs=6" in cmd and "--direct=1" in cmd and "--output-format=json" in cmd


def test_fios_json_without_reads_is_named() -> None:
    with pytest.raises(fio.FioError, match="lacks the read figures"):
        fio.read_figures({"jobs": []})


@pytest.mark.skipif(shutil.which("fio") is None, reason="fio is not installed")
def test_fio_runs_and_its_figures_are_read(tmp_path: Path) -> None:
    command, output = fio.run(fio.FioJob(tmp_path, 4096, False, 1, 1, 8))
    figures = fio.read_figures(output)
    assert figures["iops"] > 0 and figures["ios"] > 0 and figures["clat_mean_us"] > 0
    assert command[0] == "fio" and not (tmp_path / fio.FILE_NAME).exists()


class _Engine:
    """What io_baseline asks of an engine."""

    class build:
        spec = "rocksdb@test"

    def __init__(self, pattern: ReadPattern | None) -> None:
        self.pattern = pattern

    def read_pattern(self) -> ReadPattern | None:
        return self.pattern


def _measure(tmp_path: Path, directory: Path, pattern: ReadPattern | None) -> dict[str, Any]:
    lab_file = tmp_path / "io.toml"
    lab_file.write_text(LAB)
    lab = load_lab(lab_file)
    writer = RunWriter(tmp_path / "results", lab, {})
    (comparison,) = lab.comparisons
    assert lab.io_bound(comparison)
    notes: list[str] = []
    engine: Any = _Engine(pattern)
    io_baseline.measure(lab, comparison, engine, directory, writer, "before", notes.append)
    io_baseline.measure(lab, comparison, engine, directory, writer, "after", notes.append)
    entry: dict[str, Any] = writer.record["device_baseline"][comparison.name]
    return entry


def test_missing_fio_leaves_the_baseline_absent_with_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if diskstats.find_device(tmp_path).name is None:
        pytest.skip("this host's temporary directory has no block device")
    monkeypatch.setenv("PATH", "/nonexistent")
    entry = _measure(tmp_path, tmp_path / "fio", ReadPattern(8192, True, "test"))
    assert entry["absent"] == "fio not found on PATH (install Debian's `fio` package)"
    assert entry["before"] is None and entry["after"] is None
    assert entry["numjobs"] == 2 and entry["block_size"] == 8192


@pytest.mark.skipif(not _on_tmpfs(), reason="no tmpfs at /dev/shm")
def test_a_data_directory_on_tmpfs_leaves_the_baseline_absent_with_why(tmp_path: Path) -> None:
    entry = _measure(tmp_path, TMPFS / "dbregress-test-fio", ReadPattern(8192, True, "test"))
    assert "tmpfs" in entry["absent"] and entry["device"] is None


def test_an_engine_reading_no_storage_has_no_baseline(tmp_path: Path) -> None:
    entry = _measure(tmp_path, tmp_path / "fio", None)
    assert entry["absent"] == "rocksdb@test reads no storage"


@pytest.mark.skipif(shutil.which("fio") is None, reason="fio is not installed")
def test_the_baseline_runs_fio_before_and_after_and_keeps_its_json(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(io_baseline, "MIN_FILE_MB", 8)  # the lab's data: a few kilobytes
    if diskstats.find_device(tmp_path).name is None:
        pytest.skip("this host's temporary directory has no block device")
    lab_text = LAB.replace('name = "io"', 'name = "io"\nio_baseline_s = 1')
    (tmp_path / "io.toml").write_text(lab_text)
    lab = load_lab(tmp_path / "io.toml")
    writer = RunWriter(tmp_path / "results", lab, {})
    (comparison,) = lab.comparisons
    engine: Any = _Engine(ReadPattern(4096, False, "test"))
    for when in io_baseline.WHEN:
        io_baseline.measure(lab, comparison, engine, tmp_path / "fio", writer, when, print)
    entry = writer.record["device_baseline"][comparison.name]
    assert entry["absent"] is None and entry["fio_version"].startswith("fio-")
    for when in io_baseline.WHEN:
        assert (writer.path / entry[when]["file"]).is_file()
        assert "--numjobs=2" in entry[when]["command"]
        assert entry[when]["figures"]["iops"] > 0
    assert not (tmp_path / "fio").exists()
