"""Relative values, marks, and the Markdown report against a golden file."""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

import pytest

from dbregress.analysis.relative import change, relative
from dbregress.analysis.summary import matrices
from dbregress.errors import StoreError
from dbregress.lab import load_lab
from dbregress.report import markdown
from dbregress.store.run import RunWriter, read_run, resolve_run

GOLDEN = Path(__file__).parents[1] / "golden" / "report-basic.md"
LAB = """\
name = "fixture"
placement = { server = "0", client = "0" }
[[column]]
label = "pg12"
build = "postgres@12.20.0"
[[column]]
label = "pg17"
build = "postgres@17.2.0"
[insert]
load_rows = 1000
write_rows = 100
query_seconds = 1
"""


def test_relative_rules() -> None:
    assert relative(90.0, 100.0) == pytest.approx(0.9)
    assert relative(5.0, 0.0) == math.inf
    assert relative(0.0, 0.0) == 1.0
    assert relative(None, 1.0) is None


@pytest.mark.parametrize(
    ("rel", "better", "mark"),
    [
        (0.95, "higher", "regression"),
        (0.951, "higher", ""),
        (1.05, "higher", "improvement"),
        (1.06, "lower", "regression"),
        (0.9, "lower", "improvement"),
        (1.02, "lower", ""),
        (math.inf, "lower", "regression"),
        (math.inf, "higher", "improvement"),
    ],
)
def test_marks_follow_the_metric_direction(rel: float, better: Any, mark: str) -> None:
    assert change(rel, better) == mark


def step(
    label: str, name: str, q: float, unit: str, cpu: float, sla: dict[str, Any] | None = None
) -> dict[str, Any]:
    return {
        "kind": "step",
        "column": label,
        "repeat": 1,
        "step": name,
        "status": "ok",
        "reported": True,
        "elapsed_s": 10.0,
        "q": {
            "op": "insert" if unit == "rows" else "point_query",
            "unit": unit,
            "count": int(q * 10),
            "value": q,
        },
        "ops": {
            "insert": {
                "ops": 10,
                "rows": int(q * 10),
                "errors": 0,
                "target_rows_per_s": None,
                "latency_us": {
                    "p50": 100,
                    "p99": 900,
                    "p999": 1500,
                    "p9999": 2000,
                    "max": 4000,
                    "mean": 120.5,
                },
            }
        },
        "per_op": {
            "server_cpu_us": cpu,
            "client_cpu_us": 2.5,
            "cs": 0.0,
            "rkb": 0.0,
            "wkb": 1.5,
            "ops_per_s": q,
        },
        "sla": sla,
        "checks": {},
    }


def fixture_run(tmp_path: Path) -> Path:
    lab_path = tmp_path / "lab.toml"
    lab_path.write_text(LAB)
    lab = load_lab(lab_path)
    writer = RunWriter(
        tmp_path / "results", lab, {"cpu_model": "Test CPU", "cores": 2, "kernel": "6.1"}
    )
    writer.record.update(run_id="fixture-run", status="ok")
    for job in lab.jobs():
        new = job.column.label == "pg17"
        writer.set_job(job, {})
        writer.set_build(job.column.label, {"version_string": f"postgres {job.column.label}"})
        writer.write_step(
            job,
            1,
            step(job.column.label, "l.i0", 90000 if new else 100000, "rows", 11.0 if new else 10.0),
            [],
            "",
        )
        writer.write_step(job, 2, step(job.column.label, "l.i1", 30000, "rows", 20.0), [], "")
        sla = {
            "target_rows_per_s": 100.0,
            "achieved_rows_per_s": 80.0 if new else 99.9,
            "ok": not new,
        }
        writer.write_step(
            job,
            3,
            step(
                job.column.label,
                "qp100",
                20000 if new else 18000,
                "ops",
                0.0 if not new else 3.0,
                sla,
            ),
            [],
            "",
        )
    writer.add_failure("pg17/r1 qr500", RuntimeError("server crashed\nlog tail"))
    return writer.path


def test_report_matches_golden(tmp_path: Path) -> None:
    data = read_run(fixture_run(tmp_path))
    text = markdown.render(data.record, matrices(data.record, data.steps))
    if os.environ.get("UPDATE_GOLDEN"):
        GOLDEN.write_text(text)
    assert text == GOLDEN.read_text()


def test_report_marks(tmp_path: Path) -> None:
    data = read_run(fixture_run(tmp_path))
    text = markdown.render(data.record, matrices(data.record, data.steps))
    assert "| l.i0 | 0.90 (-) |" in text  # a regression
    assert "| qp100 | 1.11 (+) † |" in text  # improvement, but the SLA failed
    assert "| qp100 | pg17 | 100 | 80.0 | **failed** |" in text
    assert "| pg17/pg12 | inf (-) |" in text  # base 0, value not: inf, and worse


def test_store_refuses_other_schema_versions(tmp_path: Path) -> None:
    path = fixture_run(tmp_path)
    run_json = path / "run.json"
    run_json.write_text(run_json.read_text().replace('"schema_version": 1', '"schema_version": 9'))
    with pytest.raises(StoreError, match="schema version 9; this dbregress reads version 1"):
        read_run(path)


def test_resolve_run(tmp_path: Path) -> None:
    path = fixture_run(tmp_path)
    assert resolve_run("latest", tmp_path / "results") == path
    assert resolve_run(path.name, tmp_path / "results") == path
    with pytest.raises(StoreError, match="not a run folder"):
        resolve_run("nope", tmp_path / "results")


def test_engine_statistics_section(tmp_path: Path) -> None:
    path = fixture_run(tmp_path)
    data = read_run(path)
    for results in data.steps.values():
        for r in results:
            r["engine_stats"] = {
                "write_amp": 3.5,
                "stall_pct": 0.0,
                "lsm_bytes": 1048576,
                "statistics": {},
            }
    text = markdown.render(data.record, matrices(data.record, data.steps))
    assert "### Engine statistics" in text
    assert "| l.i0 | pg12 | 3.50 | 0.00 | 1,048,576 |" in text
