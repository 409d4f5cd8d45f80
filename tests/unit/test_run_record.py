"""run.json is built in one place and checked against schema/run.schema.json when it is
written and when it is read; a record of an earlier dbregress is upgraded on reading and
reports the same."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dbregress.analysis.compare import compare_run
from dbregress.analysis.summary import matrices
from dbregress.imports.common import Repeat, run_record
from dbregress.model.errors import StoreError
from dbregress.model.run_record import ADDED_LATER, NotARunRecord, RunRecord, check_run
from dbregress.report import markdown
from dbregress.store.run import read_record, read_run
from tests.unit.test_report import fixture_run, render


def test_a_written_run_record_fits_the_schema_and_reads_back(tmp_path: Path) -> None:
    path = fixture_run(tmp_path)
    record = json.loads((path / "run.json").read_text())
    check_run(record, "fixture")
    assert read_record(path) == record  # a current record is read as written
    # every field the lab's verdicts need travels with the run
    assert set(record["verdict_policy"]) >= {"alpha", "band", "cost_band", "count_replays"}


def test_an_imported_run_record_fits_the_schema() -> None:
    record = run_record("imp", "sysbench", "micro", ["a.txt"], [Repeat("a", (), "a.txt")])
    check_run(record, "imported")
    assert record["imported"]["kind"] == "sysbench" and "schedule" not in record


@pytest.mark.parametrize(
    ("edit", "named"),
    [
        (lambda r: r.update(status="done"), "status"),
        (lambda r: r.pop("comparisons"), "'comparisons' is a required property"),
        (lambda r: r["verdict_policy"].update(alpha=5), "verdict_policy.alpha"),
        (lambda r: r["columns"][0].update(base="yes"), "columns.0.base"),
        (lambda r: r["rounds"].append({"comparison": "c", "round": 0, "order": []}), "rounds.0"),
    ],
)
def test_a_run_json_that_does_not_fit_is_named(tmp_path: Path, edit, named: str) -> None:
    path = fixture_run(tmp_path)
    record = json.loads((path / "run.json").read_text())
    edit(record)
    (path / "run.json").write_text(json.dumps(record))
    with pytest.raises(NotARunRecord, match="not a run record") as caught:
        read_record(path)
    assert named in str(caught.value) and str(path / "run.json") in str(caught.value)


def test_a_record_that_does_not_fit_is_not_written() -> None:
    with pytest.raises(NotARunRecord, match="status"):
        RunRecord(
            run_id="x",
            lab="x",
            comparisons=[],
            columns=[],
            placement={"mode": "shared"},
            verdict_policy={"alpha": 0.05, "band": 0.05},
            cost_lane={"planned": False, "why_not": "test"},
            status="finished",
        ).to_json()


def test_a_record_of_an_earlier_dbregress_is_upgraded_and_reports_the_same(
    tmp_path: Path,
) -> None:
    path = fixture_run(tmp_path)
    record = json.loads((path / "run.json").read_text())
    for key in ADDED_LATER:  # fields run.json gained after its first version
        record.pop(key)
    (path / "run.json").write_text(json.dumps(record))
    upgraded = read_record(path)
    assert {k: upgraded[k] for k in ADDED_LATER} == ADDED_LATER
    assert json.loads((path / "run.json").read_text()) == record  # the file is left as is
    # what the readers make of a filled-in field is what they made of its absence
    data = read_run(path)
    verdicts = compare_run(record, data.steps)
    results = [r for rs in data.steps.values() for r in rs]
    as_old = markdown.render(record, matrices(record, data.steps), verdicts, results)
    assert render(path) == as_old


def test_store_errors_stay_store_errors() -> None:
    assert issubclass(NotARunRecord, StoreError)


def test_a_record_without_the_fields_added_over_time_is_still_read(tmp_path: Path) -> None:
    """Fields added after runs had comparisons may be absent from an older run.json:
    it is read, and reported as before (the readers take an absent field as unknown)."""
    path = fixture_run(tmp_path)
    record = json.loads((path / "run.json").read_text())
    for key in ("rounds", "page_cache", "inject_slowdown", "warmup_job", "order", "seed"):
        record.pop(key)
    for key in ("repeats", "verdict_policy", "started_at", "finished_at", *ADDED_LATER):
        record.pop(key)
    (path / "run.json").write_text(json.dumps(record))
    data = read_run(path)
    verdicts = compare_run(record, data.steps)
    results = [r for rs in data.steps.values() for r in rs]
    assert render(path) == markdown.render(record, matrices(record, data.steps), verdicts, results)
