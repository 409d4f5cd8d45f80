"""perf stat over every step's measured window, as on a host with a PMU. This host may
have none, so software events stand in for cycles and instructions
(DBREGRESS_PERF_EVENTS): the attach at ready, the switch at the window's edges and the
counts per side are the same code either way."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from tests.e2e.conftest import dbregress, processes_mentioning, run_record, step_results

pytestmark = pytest.mark.engine


def test_every_step_is_counted_over_its_window(
    tmp_path: Path, workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DBREGRESS_PERF_EVENTS", "task-clock,context-switches")
    path = tmp_path / "lab.toml"
    path.write_text(
        'name = "c"\nplacement = "same"\nwarmup_job = false\n'
        '[[column]]\nlabel = "pg17"\nbuild = "postgres@17.2.0"\nconfig = "ci"\n'
        "[insert]\nclients = 1\nload_rows = 3000\nquery_seconds = 2\nwarmup_s = 0.5\n"
        'steps = ["l.i0", "qp100"]\n'
    )
    out = dbregress("run", str(path), cwd=tmp_path, workdir=workdir)
    assert out.returncode == 0, out.stderr
    run, record = run_record(tmp_path)
    assert "DBREGRESS_PERF_EVENTS" in record["host"]["perf_counters"]
    steps = step_results(run, "pg17/r1")
    assert list(steps) == ["l.i0", "qp100"]
    schema = json.loads(
        (Path(__file__).parents[2] / "schema" / "step-result.schema.json").read_text()
    )
    for name, r in steps.items():
        jsonschema.validate(r, schema)
        counters = r["counters"]
        assert counters["events"] == ["task-clock", "context-switches"], name
        assert counters["note"] is None, counters
        for side in ("server", "client"):
            assert counters[side]["task-clock"] > 0, (name, counters)
        # cycles and instructions were not counted: no per-op figure is made up
        assert r["per_op"]["server_instructions"] is None
    # Two measures of the server's CPU over the same window: perf's task-clock of the
    # process tree and /proc's ticks. A 2 s step is long enough for the ticks.
    qp = steps["qp100"]
    proc_ms = (qp["server"]["user_s"] + qp["server"]["system_s"]) * 1000
    perf_ms = qp["counters"]["server"]["task-clock"]
    assert 0.5 < perf_ms / proc_ms < 2, (perf_ms, proc_ms)
    client_ms = (qp["client"]["user_s"] + qp["client"]["system_s"]) * 1000
    assert 0.5 < qp["counters"]["client"]["task-clock"] / client_ms < 2, qp["counters"]
    assert not processes_mentioning("dbregress-perf-"), "perf is left running"
    report = (run / "report.md").read_text()
    assert "srv instr/o" not in report  # counted nowhere: the column is left out
