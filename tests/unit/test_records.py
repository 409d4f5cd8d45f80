"""Typed records: job ids parsed in one place, step results checked against the schema
where they are built and where they are read."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dbregress.imports.common import Measured, step_result
from dbregress.model.errors import StoreError
from dbregress.model.records import JobId, NotAStepResult, StepError, StepResult
from dbregress.store.run import read_run
from tests.step_records import QUIET, native
from tests.unit.test_report import fixture_run


def test_job_ids_round_trip_and_say_what_is_wrong() -> None:
    jid = JobId.parse("pg-17/rc/r12")  # a label may hold "/r"
    assert (jid.label, jid.repeat, str(jid)) == ("pg-17/rc", 12, "pg-17/rc/r12")
    assert JobId("a", 0).warmup and not JobId("a", 1).warmup
    assert JobId.of("no-repeat") is None
    with pytest.raises(StoreError, match="not a job id"):
        JobId.parse("a/rx")


def test_a_step_result_is_checked_where_it_is_built() -> None:
    ok = native({"column": "a", "repeat": 1, "step": "fillseq", "q": {**QUIET["q"], "value": 5.0}})
    assert ok.measured and ok.q == 5.0
    assert StepResult.from_json(ok.to_json(), "here") == ok
    figures = {k: v for k, v in QUIET.items() if k != "per_op"}
    with pytest.raises(NotAStepResult, match="per_op"):
        StepResult.ok(JobId("a", 1), "fillseq", figures)
    bad_q = {**QUIET, "q": {"op": "get", "unit": "furlongs", "count": 1, "value": 1.0}}
    with pytest.raises(NotAStepResult, match=r"q\.unit"):
        StepResult.ok(JobId("a", 1), "fillseq", bad_q)


def test_a_failed_step_and_an_imported_one_fit_the_schema() -> None:
    failed = StepResult.failed(JobId("a", 2), "l.x", StepError("Crash", "server died", "tail"))
    assert failed.to_json()["error"] == {
        "type": "Crash",
        "message": "server died",
        "server_log_tail": "tail",
    }
    assert not failed.measured
    m = Measured(step="point-query", op="op", unit="ops", qps=123.0, count=None)
    imported = step_result(m, "col", 1, "tsv", "t.tsv")
    assert imported.figures["imported"]["kind"] == "tsv" and imported.q == 123.0


def test_a_step_file_that_does_not_fit_is_named_and_left_out(tmp_path: Path) -> None:
    run = fixture_run(tmp_path)
    (victim,) = [p for p in run.glob("pg17/r2/steps/01-*.json") if ".spec." not in p.name]
    data = json.loads(victim.read_text())
    data["q"]["unit"] = "furlongs"
    victim.write_text(json.dumps(data))
    read = read_run(run)
    assert len(read.damaged) == 1 and "q.unit" in read.damaged[0] and victim.name in read.damaged[0]
    assert all(r["step"] != "l.i0" for r in read.steps["pg17/r2"])
