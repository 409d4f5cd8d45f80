"""IO efficiency and the read-latency model (analysis/io_efficiency.py): the seed report's
figures reproduce through the model's arithmetic, and a section says why it is absent
when fio, the block device or the reads are missing."""

from __future__ import annotations

import math
import statistics
from typing import Any

import pytest

from dbregress.analysis import fio_baseline as fb
from dbregress.analysis import io_efficiency as io

# The seed report ("How efficient is RocksDB for IO-bound, point-query workloads?"):
# fio randread, 8 KiB, O_DIRECT, psync, iodepth 1, 600 s: iops, user and system CPU µs
# per read, mean latency µs, numjobs.
SEED_FIO = {1: (9884, 1.351, 9.565, 101.61), 6: (43782, 1.379, 10.642, 136.35)}
# db_bench readrandom, readrandom2, readrandom3 with block_align: storage read IOPS and
# user, system CPU µs per read, per number of users.
SEED_ROCKSDB = {
    1: [(8350, 11.643, 7.602), (8327, 9.997, 8.525), (8400, 8.732, 8.718)],
    6: [(38628, 14.645, 7.291), (38623, 10.449, 9.346), (38874, 9.459, 9.850)],
}
SEED_EFFICIENCY = {1: [0.844, 0.842, 0.849], 6: [0.882, 0.882, 0.887]}
SEED_PREDICTED_IOPS = [9063, 9124, 9214]  # 1 user: the model's IOPS at 91 µs of device
RUNTIME_MS = 600_000


def _fio_json_figures(numjobs: int) -> dict[str, float]:
    """fio's JSON figures as fio would print them for the seed's run: CPU as percent of
    the jobs' summed run time."""
    iops, user_us, sys_us, lat_us = SEED_FIO[numjobs]
    runtime_ms = RUNTIME_MS * numjobs
    ios = iops * RUNTIME_MS / 1000
    return {
        "iops": iops,
        "ios": ios,
        "clat_mean_us": lat_us,
        "lat_mean_us": lat_us,
        "usr_cpu_pct": user_us * ios / (runtime_ms * 10),
        "sys_cpu_pct": sys_us * ios / (runtime_ms * 10),
        "job_runtime_ms": runtime_ms,
    }


def test_the_seeds_device_latency_is_102_us_of_which_11_are_cpu_and_91_the_device() -> None:
    fio = fb.FioFigures.of(_fio_json_figures(1))
    assert fio.user_us == pytest.approx(1.351)
    assert fio.system_us == pytest.approx(9.565)
    assert round(fio.latency_us) == 102
    assert round(fio.cpu_us) == 11
    assert round(fio.device_us) == 91


@pytest.mark.parametrize("clients", [1, 6])
def test_the_seeds_io_efficiency_reproduces(clients: int) -> None:
    fio = fb.FioFigures.of(_fio_json_figures(clients))
    found = [io.io_efficiency(iops, fio.iops) for iops, _, _ in SEED_ROCKSDB[clients]]
    # the seed's table cuts its ratios to three decimals
    assert [math.floor(f * 1000) / 1000 for f in found] == SEED_EFFICIENCY[clients]
    # its summary: about 0.85 at 1 client and 0.88 at 6 (the three steps' mean)
    assert round(statistics.fmean(found), 2) == {1: 0.85, 6: 0.88}[clients]


def test_the_seeds_model_predicts_its_iops_from_cpu_per_read_and_device_latency() -> None:
    device = fb.device_latency_us(102, 11)  # as the seed rounds them
    assert device == 91
    for (_, user, system), want in zip(SEED_ROCKSDB[1], SEED_PREDICTED_IOPS, strict=True):
        latency = io.predicted_latency_us(user, system, 1.0, device)
        assert io.predicted_read_iops(1, 1.0, latency) == pytest.approx(want, rel=0.002)


def test_more_cpu_per_read_predicts_lower_efficiency() -> None:
    fio = fb.FioFigures.of(_fio_json_figures(1))
    lean = io.predicted_latency_us(8.0, 8.0, 1.0, fio.device_us)
    fat = io.predicted_latency_us(16.0, 8.0, 1.0, fio.device_us)
    assert io.predicted_read_iops(1, 1.0, fat) < io.predicted_read_iops(1, 1.0, lean)


# -- sections from stored results ---------------------------------------------------------


def _fio_run() -> dict[str, Any]:
    return {"figures": _fio_json_figures(1), "file": "device/c-before.json", "command": ["fio"]}


def _baseline(**over: Any) -> dict[str, Any]:
    return {
        "numjobs": 1,
        "block_size": 8192,
        "direct": True,
        "device": "vda",
        "fio_version": "fio-3.33",
        "before": _fio_run(),
        "after": _fio_run(),
        "absent": None,
    } | over


def _record(baseline: dict[str, Any] | None) -> dict[str, Any]:
    record: dict[str, Any] = {
        "comparisons": [{"name": "c", "benchmark": "kv", "labels": ["a", "b"]}],
    }
    if baseline is not None:
        record["device_baseline"] = {"c": baseline}
        # each column's server read as fio did (its kind of read: fio_baseline.reads_direct)
        direct = "true" if baseline.get("direct") else "false"
        job = {"build": "rocksdb@10.2.1", "settings": {"direct_io": direct}}
        record["jobs"] = {f"{label}/r1": job for label in ("a", "b")}
    return record


def _result(
    step: str, op: str, reads: int | None, note: str | None = None, count: int = 8000
) -> dict[str, Any]:
    elapsed = 1.0
    return {
        "step": step,
        "status": "ok",
        "reported": True,
        "elapsed_s": elapsed,
        "q": {"op": op, "unit": "ops", "count": count, "value": count / elapsed},
        "ops": {op: {"latency_us": {"mean": 120.0}}},
        "server": {"read_bytes": (reads or 0) * 8192},
        "per_op": {"server_user_us": 11.0, "server_system_us": 8.0},
        "device": {
            "name": None if note else "vda",
            "note": note,
            "clients": 1,
            "reads": reads,
            "read_bytes": None if reads is None else reads * 8192,
            "read_ms": None if reads is None else reads // 10,
        },
    }


def _steps(*results: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    return {f"{label}/r{r}": list(results) for label in ("a", "b") for r in (0, 1, 2)}


def test_a_read_step_gets_a_row_and_a_write_step_is_named_absent() -> None:
    steps = _steps(_result("fillseq", "put", 0), _result("readrandom", "get", 8000))
    (section,) = io.sections(_record(_baseline()), steps)
    assert section.why_not is None
    row = section.row("a", "readrandom")
    assert row is not None and row.repeats == 2
    assert row.reads_per_op == pytest.approx(1.0)
    assert row.efficiency == pytest.approx(8000 / 9884)
    assert row.predicted_us == pytest.approx(19.0 + row.device_us)
    assert row.measured_us == pytest.approx(125.0)
    assert row.read_kib == pytest.approx(8.0)
    (absent,) = section.absent
    assert absent.step == "fillseq" and absent.label is None and "writes" in absent.why


def test_a_comparison_without_a_baseline_has_no_section() -> None:
    assert io.sections(_record(None), _steps(_result("readrandom", "get", 8000))) == []


def test_missing_fio_says_why() -> None:
    why = "fio not found on PATH (install Debian's `fio` package)"
    baseline = _baseline(before=None, after=None, absent=why)
    (section,) = io.sections(_record(baseline), _steps(_result("readrandom", "get", 8000)))
    assert section.why_not == why and section.rows == []


def test_a_data_directory_on_tmpfs_says_why() -> None:
    why = "/dev/shm/x is on tmpfs with no block device (device 0:25)"
    baseline = _baseline(before=None, after=None, absent=why, device=None)
    steps = _steps(_result("readrandom", "get", None, note=why))
    (section,) = io.sections(_record(baseline), steps)
    assert section.why_not == why


def test_a_step_without_device_counters_says_why_per_step() -> None:
    why = "/dev/shm/x is on tmpfs with no block device"
    steps = _steps(_result("readrandom", "get", None, note=why))
    (section,) = io.sections(_record(_baseline()), steps)
    assert section.rows == []
    assert section.why_not == "no step read from the device"
    assert section.absent[0].why == why


def test_a_step_served_from_cache_says_it_read_nothing() -> None:
    (section,) = io.sections(_record(_baseline()), _steps(_result("readrandom", "get", 0)))
    assert "read nothing from the device" in section.absent[0].why


def test_fio_at_another_concurrency_is_not_compared() -> None:
    steps = _steps(_result("readrandom", "get", 8000))
    (section,) = io.sections(_record(_baseline(numjobs=4)), steps)
    assert section.rows == [] and "not comparable" in section.absent[0].why


def test_drift_is_after_over_before() -> None:
    after = _fio_run()
    after["figures"] = after["figures"] | {"iops": 9884 * 0.9}
    base = fb.baseline_of(_baseline(after=after))
    assert base.drift == pytest.approx(-0.1)


def test_fio_reports_no_reads_is_an_error() -> None:
    with pytest.raises(ValueError, match="no reads"):
        fb.fio_cpu_us_per_io(1.0, 1.0, 1000.0, 0)
