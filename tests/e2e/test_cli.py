"""The command line end to end, with real PostgreSQL builds: every step of two
versions, clear messages for bad input, a rejected setting recorded while the lab goes
on. Faults mid-run are in test_faults.py."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from dbregress.lab.file import INSERT_STEPS
from tests.e2e.conftest import (
    dbregress,
    run_record,
    step_results,
)

pytestmark = pytest.mark.engine
SCHEMA = Path(__file__).parents[2] / "schema"
ALL_STEPS = list(INSERT_STEPS)  # the lab default: every step


def lab(tmp_path: Path, columns: list[tuple[str, str]], insert: str, extra: str = "") -> Path:
    text = f'name = "t"\nplacement = "same"\nwarmup_job = false\n{extra}\n'
    for label, build in columns:
        text += f'[[column]]\nlabel = "{label}"\nbuild = "{build}"\nconfig = "ci"\n'
    path = tmp_path / "lab.toml"
    path.write_text(text + "[insert]\n" + insert)
    return path


def test_two_versions_every_step(tmp_path: Path, workdir: Path) -> None:
    path = lab(
        tmp_path,
        [("pg12", "postgres@12.20.0"), ("pg17", "postgres@17.2.0")],
        "clients = 2\nload_rows = 3000\nwrite_rows = 800\nquery_seconds = 1\ncleanup_wait_s = 0\n",
    )
    out = dbregress("run", str(path), cwd=tmp_path, workdir=workdir)
    assert out.returncode == 0, out.stderr
    run, record = run_record(tmp_path)
    assert record["status"] == "ok" and not record["failures"]
    assert "12.20" in record["builds"]["pg12"]["version_string"]
    assert "17.2" in record["builds"]["pg17"]["version_string"]
    schema = json.loads((SCHEMA / "step-result.schema.json").read_text())
    for job in ("pg12/r1", "pg17/r1"):
        steps = step_results(run, job)
        assert list(steps) == ALL_STEPS
        for name, r in steps.items():
            jsonschema.validate(r, schema)
            assert r["status"] == "ok", r
            assert r["q"]["value"] > 0 and r["per_op"]["client_cpu_us"] > 0, name
            if name.startswith("q"):  # long enough for /proc's 10 ms ticks
                assert r["server"]["user_s"] + r["server"]["system_s"] > 0, name
            assert r["db_size_bytes"] > 0
            assert r["placement"]["mode"] == "same"
        assert steps["l.i0"]["checks"]["rows_found"] == 2 * 3000
        assert steps["l.i1"]["checks"]["rows_found"] == 2 * 3000  # a FIFO queue
        assert steps["qp100"]["checks"]["point_rows_found"] > 0
        assert steps["qr100"]["sla"]["target_rows_per_s"] == 200
        csv = (run / job / "steps" / "06-qr100.csv").read_text().splitlines()
        assert csv[0] == "t_s,op,ops,rows,max_us,errors" and len(csv) > 1
        assert (run / job / "server.log").stat().st_size > 0
    report = (run / "report.md").read_text()
    assert "## Relative QPS (vs pg12)" in report and "| qp1000 |" in report
    assert "CPU per operation: server / loadgen" in out.stdout
    assert f"Report: results/{run.name}/report.md" in out.stdout
    again = dbregress("report", run.name, cwd=tmp_path, workdir=workdir)
    assert again.returncode == 0 and "## Latency" in again.stdout


def test_unknown_version_lists_the_closest(tmp_path: Path, workdir: Path) -> None:
    path = lab(tmp_path, [("a", "postgres@17.99.0")], "load_rows = 100\n")
    out = dbregress("run", str(path), cwd=tmp_path, workdir=workdir)
    assert out.returncode == 2
    assert "17.99.0" in out.stderr and "17.2.0" in out.stderr, out.stderr


def test_malformed_lab_names_the_line(tmp_path: Path, workdir: Path) -> None:
    path = lab(tmp_path, [("a", "postgres@17.2.0")], "load_rows = -5\n")
    out = dbregress("run", str(path), cwd=tmp_path, workdir=workdir)
    assert out.returncode == 2
    assert "lab.toml:10: insert.load_rows: must be greater than 0" in out.stderr
    assert not (tmp_path / "results").exists()


def test_rejected_setting_is_recorded_and_the_next_column_runs(
    tmp_path: Path, workdir: Path
) -> None:
    path = lab(
        tmp_path,
        [("bad", "postgres@17.2.0"), ("good", "postgres@17.2.0")],
        'load_rows = 500\nwrite_rows = 100\nsteps = ["l.i0"]\n',
    )
    text = path.read_text().replace(
        'config = "ci"\n', 'config = "ci"\nsettings = { shared_bufers = "64MB" }\n', 1
    )
    path.write_text(text)
    out = dbregress("run", str(path), cwd=tmp_path, workdir=workdir)
    assert out.returncode == 2
    assert "shared_bufers" in out.stderr and "'ci'" in out.stderr, out.stderr
    run, record = run_record(tmp_path)
    assert record["failures"][0]["type"] == "ConfigRejected"
    failed = step_results(run, "bad/r1")["start"]
    assert failed["status"] == "failed" and "shared_bufers" in failed["error"]["message"]
    assert step_results(run, "good/r1")["l.i0"]["status"] == "ok"


# Faults mid-run (server killed or stopped, loadgen killed, Ctrl-C, ...) are in
# test_faults.py, at random points.
