"""IO efficiency through the command line with a real RocksDB: fio beside an iodir
comparison, its JSON kept in the run folder, readrandom's row in every report; and a
data directory on tmpfs, where the section says why it is empty and nothing fails."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from tests.e2e.conftest import dbregress, run_record

pytestmark = pytest.mark.engine

TMPFS = Path("/dev/shm")


def io_lab(tmp_path: Path, config: str) -> Path:
    path = tmp_path / "lab.toml"
    path.write_text(
        'name = "io"\nbenchmark = "kv"\nwarmup_job = false\ncount = false\n'
        "io_baseline = true\nio_baseline_s = 1\n"
        f'[[column]]\nlabel = "r10"\nbuild = "rocksdb@10.2.1"\nconfig = "{config}"\n'
        # about 80 MB of data against a block cache of a tenth of it: readrandom misses
        '[kv]\nkeys = 200000\nseconds = 2\nwarmup_s = 0.5\nsteps = ["fillseq", "readrandom"]\n'
    )
    return path


def test_an_iodir_run_has_its_device_baseline_and_io_efficiency(
    tmp_path: Path, workdir: Path
) -> None:
    out = dbregress("run", str(io_lab(tmp_path, "iodir")), cwd=tmp_path, workdir=workdir)
    assert out.returncode == 0, out.stderr
    run, record = run_record(tmp_path)
    baseline = next(iter(record["device_baseline"].values()))
    assert baseline["absent"] is None and baseline["direct"] is True
    assert baseline["block_size"] == 8192 and baseline["fio_version"].startswith("fio-")
    for when in ("before", "after"):
        fio_json = json.loads((run / baseline[when]["file"]).read_text())
        assert fio_json["jobs"][0]["read"]["iops"] > 0
    verdicts = json.loads((run / "verdicts.json").read_text())
    (section,) = verdicts["io_efficiency"]
    (row,) = section["rows"]
    assert row["step"] == "readrandom" and row["reads_per_op"] > 0
    assert row["predicted_us_per_op"] > 0
    # on a shared host another process may read the device in the window: then the row
    # gives no efficiency and names the engine's own share (analysis/io_efficiency.py)
    assert row["io_efficiency"] > 0 if row["no_efficiency"] is None else row["own_read_share"] < 0.8
    assert [a["step"] for a in section["absent"]] == ["fillseq"]
    assert "### IO efficiency" in (run / "report.md").read_text()
    assert "IO efficiency" in (run / "report.html").read_text()


@pytest.mark.skipif(not TMPFS.is_dir(), reason="no tmpfs at /dev/shm")
def test_a_data_directory_on_tmpfs_says_why_and_nothing_fails(tmp_path: Path) -> None:
    workdir = TMPFS / f"dbregress-test-io-{os.getpid()}-{time.monotonic_ns()}"
    workdir.mkdir(mode=0o755)
    try:
        out = dbregress("run", str(io_lab(tmp_path, "iobuf")), cwd=tmp_path, workdir=workdir)
    finally:
        subprocess.run(["rm", "-rf", str(workdir)], check=False)
    assert out.returncode == 0, out.stderr
    run, record = run_record(tmp_path)
    assert record["status"] == "ok"
    why = next(iter(record["device_baseline"].values()))["absent"]
    assert "tmpfs" in why
    report = (run / "report.md").read_text()
    assert f"No IO-efficiency table: {why}." in report
