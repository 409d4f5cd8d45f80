"""RocksDB through the command line: three builds across the C API's changes, every
step, and the faults issue 3 names. Each keeps finished steps and leaves no process."""

from __future__ import annotations

import contextlib
import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from dbregress.execution.step_figures import SLA_FRACTION
from dbregress.lab.file import KV_STEPS
from tests.e2e.conftest import (
    assert_no_process_mentions,
    dbregress,
    processes_mentioning,
    run_record,
    start_dbregress,
    step_results,
    wait_for,
)

pytestmark = pytest.mark.engine


def kv_lab(tmp_path: Path, columns: list[tuple[str, str, str]], kv: str) -> Path:
    text = 'name = "k"\nplacement = "same"\nwarmup_job = false\nbenchmark = "kv"\n'
    for label, build, extra in columns:
        text += f'[[column]]\nlabel = "{label}"\nbuild = "{build}"\n{extra}\n'
    path = tmp_path / "lab.toml"
    path.write_text(text + "[kv]\n" + kv)
    return path


def test_three_versions_every_step(tmp_path: Path, workdir: Path) -> None:
    builds = [
        ("r6.22", "rocksdb@6.22.1", ""),
        ("r8.11", "rocksdb@8.11.4", ""),
        ("r10.2", "rocksdb@10.2.1", 'settings = { cache_type = "auto_hyper_clock" }'),
    ]
    path = kv_lab(tmp_path, builds, "keys = 20000\nseconds = 0.5\nshort_seconds = 0.5\n")
    out = dbregress("run", str(path), cwd=tmp_path, workdir=workdir)
    assert out.returncode == 0, out.stderr
    run, record = run_record(tmp_path)
    assert record["status"] == "ok"
    for label, _, _ in builds:
        by_step = step_results(run, f"{label}/r1")
        assert list(by_step) == list(KV_STEPS)
        for name, r in by_step.items():
            assert r["status"] == "ok", (label, name)
            assert r["q"]["value"] > 0 and r["client"] is None
            assert r["engine_stats"]["lsm_bytes"] > 0, (label, name)
        assert by_step["readrandom"]["checks"]["point_rows_found"] > 0
        # the background writer ran, held to the lab's 2 MB/s of 20 + 400-byte entries;
        # whether a shared host let it keep up is not asserted, only that `ok` says so
        sla = by_step["readwhilewriting"]["sla"]
        assert sla["op"] == "put" and sla["achieved_rows_per_s"] > 0
        assert sla["target_rows_per_s"] == pytest.approx(2 * 2**20 / (20 + 400))
        assert sla["ok"] == (sla["achieved_rows_per_s"] >= SLA_FRACTION * sla["target_rows_per_s"])
    assert "### Engine statistics" in (run / "report.md").read_text()


def test_option_the_build_lacks(tmp_path: Path, workdir: Path) -> None:
    path = kv_lab(
        tmp_path,
        [("r7", "rocksdb@7.10.2", 'settings = { cache_type = "hyper_clock" }')],
        "keys = 1000\nseconds = 0.5\n",
    )
    out = dbregress("run", str(path), cwd=tmp_path, workdir=workdir)
    assert out.returncode == 2
    assert "hyper_clock" in out.stderr and "7.10" in out.stderr, out.stderr


def test_corrupted_database(tmp_path: Path, workdir: Path, launched: Any) -> None:
    path = kv_lab(
        tmp_path,
        [("r10", "rocksdb@10.2.1", "")],
        "keys = 20000\nseconds = 5\nshort_seconds = 5\n",
    )
    proc = start_dbregress(launched, "run", str(path), cwd=tmp_path, workdir=workdir)
    wait_for(
        lambda: list((tmp_path / "results").glob("*/r10/r1/steps/01-fillseq.json")),
        120,
        "fillseq to finish",
    )
    # The next step to open the database finds no manifest. Written again until the run
    # ends: a step that was opening the database as it was first written writes a new
    # CURRENT of its own (RocksDB starts a manifest at every open), and the step after
    # it must then meet the damage.
    deadline = time.monotonic() + 120
    while proc.poll() is None and time.monotonic() < deadline:
        for current in workdir.glob("**/CURRENT"):
            with contextlib.suppress(OSError):
                current.write_text("MANIFEST-999999\n")
        time.sleep(0.2)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 2, err
    run, _ = run_record(tmp_path)
    by_step = step_results(run, "r10/r1")
    assert by_step["fillseq"]["status"] == "ok"
    failed = [r for r in by_step.values() if r["status"] == "failed"]
    assert len(failed) == 1 and failed[0]["step"] in ("revrange", "overwritesome"), by_step
    assert "MANIFEST" in failed[0]["error"]["message"]
    assert_no_process_mentions(str(tmp_path))


def test_loadgen_killed_mid_step(tmp_path: Path, workdir: Path, launched: Any) -> None:
    path = kv_lab(
        tmp_path,
        [("r10", "rocksdb@10.2.1", "")],
        "keys = 20000\nseconds = 60\nshort_seconds = 60\n",
    )
    proc = start_dbregress(launched, "run", str(path), cwd=tmp_path, workdir=workdir)
    wait_for(
        lambda: list((tmp_path / "results").glob("*/r10/r1/steps/02-revrange.spec.json")),
        120,
        "revrange to start",
    )
    time.sleep(1)
    (pid,) = [p for p in processes_mentioning("02-revrange.spec.json") if p != proc.pid]
    os.kill(pid, signal.SIGKILL)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 2 and "killed by signal SIGKILL" in err, err
    run, record = run_record(tmp_path)
    assert step_results(run, "r10/r1")["fillseq"]["status"] == "ok"
    assert step_results(run, "r10/r1")["revrange"]["error"]["type"] == "LoadgenError"
    assert record["status"] == "failed"
    assert_no_process_mentions(str(tmp_path))


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to mount a read-only tmpfs")
def test_read_only_filesystem(tmp_path: Path, workdir: Path) -> None:
    os.system(f"mount -t tmpfs -o ro,size=1m tmpfs {workdir}")
    try:
        path = kv_lab(tmp_path, [("r10", "rocksdb@10.2.1", "")], "keys = 1000\n")
        out = dbregress("run", str(path), cwd=tmp_path, workdir=workdir)
    finally:
        os.system(f"umount {workdir}")
    assert out.returncode == 2
    assert "read-only" in out.stderr.lower() or "writable" in out.stderr.lower(), out.stderr
    run, _ = run_record(tmp_path)
    assert step_results(run, "r10/r1")["start"]["status"] == "failed"
