"""The MySQL family and the microbenchmarks through the command line, with real builds:
two MariaDB versions on the Insert Benchmark and the microbenchmarks, PostgreSQL on the
microbenchmarks, and the faults issue 4 names."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from dbregress.benchmarks.micro import plan
from dbregress.lab.file import MicroSizes
from tests.e2e.conftest import (
    assert_no_process_mentions,
    dbregress,
    run_record,
    start_dbregress,
    step_results,
    wait_for,
)

pytestmark = pytest.mark.engine
MICRO = "tables = 2\nrows = 2000\nseconds = 0.15\ncleanup_wait_s = 0\n"
LAB = f"""name = "family"
placement = "same"
warmup_job = false

[[comparison]]
name = "maria-insert"
benchmark = "insert"
[[comparison.column]]
label = "ma10.2"
build = "mariadb@10.2.11"
config = "ci"
[[comparison.column]]
label = "ma11.4"
build = "mariadb@11.4.5"
config = "ci"
[comparison.insert]
load_rows = 3000
write_rows = 800
query_seconds = 0.3
cleanup_wait_s = 0

[[comparison]]
name = "maria-micro"
benchmark = "micro"
[[comparison.column]]
label = "ma10.2-micro"
build = "mariadb@10.2.11"
config = "ci"
[[comparison.column]]
label = "ma11.4-micro"
build = "mariadb@11.4.5"
config = "ci"
[comparison.micro]
{MICRO}
[[comparison]]
name = "pg-micro"
benchmark = "micro"
[[comparison.column]]
label = "pg17-micro"
build = "postgres@17.2.0"
config = "ci"
[comparison.micro]
{MICRO}"""


def test_mariadb_versions_and_postgres(tmp_path: Path, workdir: Path) -> None:
    (tmp_path / "lab.toml").write_text(LAB)
    out = dbregress("run", "lab.toml", cwd=tmp_path, workdir=workdir)
    assert out.returncode == 0, out.stderr
    run, record = run_record(tmp_path)
    assert "10.2.11" in record["builds"]["ma10.2"]["version_string"]
    assert "11.4.5" in record["builds"]["ma11.4"]["version_string"]
    for job in ("ma10.2/r1", "ma11.4/r1"):
        by_step = step_results(run, job)
        assert len(by_step) == 11 and all(r["status"] == "ok" for r in by_step.values())
        assert by_step["l.i1"]["checks"]["rows_found"] == 3000
    expected = [p.name for p in plan(MicroSizes(tables=2, rows=2000, seconds=0.15))]
    for job in ("ma10.2-micro/r1", "ma11.4-micro/r1", "pg17-micro/r1"):
        by_step = step_results(run, job)
        assert list(by_step) == expected, job
        for name, r in by_step.items():
            assert r["status"] == "ok", (job, name)
            assert r["q"]["value"] > 0, (job, name)
        assert by_step["point-query"]["checks"]["point_rows_found"] > 0
    report = (run / "report.md").read_text()
    assert "### Relative QPS per group (vs ma10.2-micro)" in report
    assert "| range with aggregation | ma11.4-micro |" in report


def test_not_a_mysql_build(tmp_path: Path, workdir: Path) -> None:
    fake = tmp_path / "notmysql"
    (fake / "bin").mkdir(parents=True)
    (tmp_path / "lab.toml").write_text(
        f'[[column]]\nlabel = "x"\nbuild = "mysql@{fake}"\n[insert]\nload_rows = 10\n'
    )
    out = dbregress("run", "lab.toml", cwd=tmp_path, workdir=workdir)
    assert out.returncode == 2
    assert "mysqld" in out.stderr and str(fake) in out.stderr, out.stderr


def test_rejected_mycnf_option(tmp_path: Path, workdir: Path) -> None:
    (tmp_path / "lab.toml").write_text(
        '[[column]]\nlabel = "m"\nbuild = "mariadb@11.4.5"\nconfig = "ci"\n'
        "settings = { innodb_bogus_option = 1 }\n[insert]\nload_rows = 10\n"
    )
    out = dbregress("run", "lab.toml", cwd=tmp_path, workdir=workdir)
    assert out.returncode == 2
    assert "innodb_bogus_option" in out.stderr and "'ci'" in out.stderr, out.stderr
    run, _ = run_record(tmp_path)
    assert step_results(run, "m/r1")["start"]["error"]["type"] == "ConfigRejected"


def _micro_run(tmp_path: Path, workdir: Path, launched: Any, extra: str = "") -> Any:
    (tmp_path / "lab.toml").write_text(
        f'placement = "same"\nwarmup_job = false\n{extra}\nbenchmark = "micro"\n'
        '[[column]]\nlabel = "m"\nbuild = "mariadb@11.4.5"\nconfig = "ci"\n'
        "[micro]\ntables = 1\nrows = 2000\nseconds = 60\nreads_before_writes = false\n"
    )
    proc = start_dbregress(launched, "run", "lab.toml", cwd=tmp_path, workdir=workdir)
    wait_for(
        lambda: list((tmp_path / "results").glob("*/m/r1/steps/02-*.spec.json")),
        120,
        "the first microbenchmark to start",
    )
    time.sleep(1.5)
    return proc


def _mysqld_pid(workdir: Path) -> int:
    (pidfile,) = [p for p in workdir.glob("**/*.pid") if p.read_text().strip().isdigit()]
    return int(pidfile.read_text())


def test_server_dies_mid_microbenchmark(tmp_path: Path, workdir: Path, launched: Any) -> None:
    proc = _micro_run(tmp_path, workdir, launched)
    os.kill(_mysqld_pid(workdir), signal.SIGKILL)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 2 and "EngineCrashed" in err, err
    run, _ = run_record(tmp_path)
    by_step = step_results(run, "m/r1")
    assert by_step["load"]["status"] == "ok"
    failed = [r for r in by_step.values() if r["status"] == "failed"]
    assert len(failed) == 1 and failed[0]["error"]["server_log_tail"]
    assert_no_process_mentions(str(tmp_path))


def test_server_hangs_mid_microbenchmark(tmp_path: Path, workdir: Path, launched: Any) -> None:
    proc = _micro_run(tmp_path, workdir, launched, extra="step_timeout_s = 8")
    os.kill(_mysqld_pid(workdir), signal.SIGSTOP)
    _, err = proc.communicate(timeout=180)
    assert proc.returncode == 2 and "still running after 8 s" in err, err
    run, _ = run_record(tmp_path)
    assert [
        r["error"]["type"] for r in step_results(run, "m/r1").values() if r["status"] == "failed"
    ] == ["StepTimeout"]
    assert_no_process_mentions(str(tmp_path))
