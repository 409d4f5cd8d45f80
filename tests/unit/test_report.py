"""Relative values, marks, and the Markdown report against a golden file."""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

import pytest

from dbregress.analysis.compare import compare_run
from dbregress.analysis.relative import relative
from dbregress.analysis.summary import matrices
from dbregress.lab.file import load_lab
from dbregress.model.errors import StoreError
from dbregress.report import markdown
from dbregress.store.run import RunWriter, read_run, resolve_run
from tests.step_records import native

GOLDEN = Path(__file__).parents[1] / "golden" / "report-basic.md"
LAB = """\
name = "fixture"
repeats = 6
order = "fixed"
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


def step(
    label: str,
    name: str,
    q: float,
    unit: str,
    cpu: float,
    sla: dict[str, Any] | None = None,
    repeat: int = 1,
) -> dict[str, Any]:
    return {
        "kind": "step",
        "column": label,
        "repeat": repeat,
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
                "rows_per_s": q if unit == "rows" else None,
                "ops_per_s": q if unit != "rows" else None,
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


JITTER = (1.0, 0.99, 1.01, 0.995, 1.005, 1.002)  # between-repeat noise, CV well under 1%


def fixture_run(tmp_path: Path) -> Path:
    lab_path = tmp_path / "lab.toml"
    lab_path.write_text(LAB)
    lab = load_lab(lab_path)
    writer = RunWriter(
        tmp_path / "results", lab, {"cpu_model": "Test CPU", "cores": 2, "kernel": "6.1"}
    )
    writer.record.update(run_id="fixture-run", status="ok")
    for job in lab.jobs():
        if job.warmup:
            continue
        new = job.column.label == "pg17"
        # both columns get the same spread, in another order

        def put(
            index: int, name: str, q: float, unit: str, cpu: float, job: Any = job, **kw: Any
        ) -> None:
            factor = JITTER[job.repeat - 1] if job.column.label == "pg12" else JITTER[-job.repeat]
            result = step(job.column.label, name, q * factor, unit, cpu, repeat=job.repeat, **kw)
            writer.write_step(job, index, native(result), [], "")

        writer.set_job(job, {})
        writer.set_build(job.column.label, {"version_string": f"postgres {job.column.label}"})
        put(1, "l.i0", 90000 if new else 100000, "rows", 11.0 if new else 10.0)
        put(2, "l.i1", 30000, "rows", 20.0)
        sla = {
            "target_rows_per_s": 100.0,
            "achieved_rows_per_s": 80.0 if new else 99.9,
            "ok": not new,
        }
        put(3, "qp100", 20000 if new else 18000, "ops", 3.0 if new else 0.0, sla=sla)
    writer.add_failure("pg17/r1 qr500", RuntimeError("server crashed\nlog tail"))
    return writer.path


def render(path: Path) -> str:
    data = read_run(path)
    verdicts = compare_run(data.record, data.steps)
    results = [r for rs in data.steps.values() for r in rs]
    return markdown.render(data.record, matrices(data.record, data.steps), verdicts, results)


def test_report_matches_golden(tmp_path: Path) -> None:
    text = render(fixture_run(tmp_path))
    if os.environ.get("UPDATE_GOLDEN"):
        GOLDEN.write_text(text)
    assert text == GOLDEN.read_text()


def test_report_marks_come_from_verdicts(tmp_path: Path) -> None:
    text = render(fixture_run(tmp_path))
    assert "| l.i0 | 0.90 (-) [0.89, 0.91] |" in text  # slower, beyond chance
    assert "| l.i1 | 1.00 = [0.99, 1.01] |" in text  # the same within ±5%
    assert "| qp100 | 1.11 (+) [1.10, 1.12] |" in text  # faster
    assert "| qp100 | pg17 | 100 | 80.0 | **failed** |" in text  # ... but it failed its SLA
    assert "Verdicts: 1 slower, 1 faster, 1 same, 0 undecided." in text


def test_one_repeat_decides_nothing(tmp_path: Path) -> None:
    path = fixture_run(tmp_path)
    for job in path.glob("*/r[2-6]"):
        for f in job.glob("steps/*"):
            f.unlink()
    text = render(path)
    assert "| l.i0 | 0.90 ? |" in text and "only 1 repeat" in text


def test_store_refuses_other_schema_versions(tmp_path: Path) -> None:
    path = fixture_run(tmp_path)
    run_json = path / "run.json"
    run_json.write_text(run_json.read_text().replace('"schema_version": 1', '"schema_version": 9'))
    with pytest.raises(StoreError, match="schema version 9; this dbregress reads version 1"):
        read_run(path)


def test_a_damaged_step_file_is_named_and_left_out(tmp_path: Path) -> None:
    path = fixture_run(tmp_path)
    damaged = path / "pg17" / "r2" / "steps" / "01-l.i0.json"
    damaged.write_text(damaged.read_text()[:40])  # truncated mid-write by hand
    data = read_run(path)
    assert len(data.damaged) == 1 and str(damaged) in data.damaged[0]
    assert [r["step"] for r in data.steps["pg17/r2"]] == ["l.i1", "qp100"]
    text = markdown.render(
        data.record,
        matrices(data.record, data.steps),
        compare_run(data.record, data.steps),
        [r for rs in data.steps.values() for r in rs],
        damaged=data.damaged,
    )
    assert "## Damaged files" in text and "01-l.i0.json is not valid JSON" in text


def test_a_step_file_of_a_newer_version_is_refused(tmp_path: Path) -> None:
    path = fixture_run(tmp_path)
    f = path / "pg12" / "r1" / "steps" / "02-l.i1.json"
    f.write_text(f.read_text().replace('"schema_version": 1', '"schema_version": 2'))
    with pytest.raises(StoreError, match=r"02-l\.i1\.json has results schema version 2"):
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
    verdicts = compare_run(data.record, data.steps)
    results = [r for rs in data.steps.values() for r in rs]
    text = markdown.render(data.record, matrices(data.record, data.steps), verdicts, results)
    assert "### Engine statistics" in text
    assert "| l.i0 | pg12 | 3.50 | 0.00 | 1,048,576 |" in text


def test_a_hosts_calibration_is_shown(tmp_path: Path) -> None:
    from dbregress.report.verdict_tables import calibration
    from dbregress.store.calibration import load_calibration, save_calibration

    step = {"min_change": 0.12}
    summary = {
        "lab": "quickstart",
        "placements": {
            "same": {"run_id": "r1", "median_cv": 0.05, "steps": [step]},
            "separate": {"run_id": "r2", "median_cv": 0.09, "steps": [step]},
        },
        "steadiest": "same",
    }
    path = save_calibration(tmp_path, summary)
    cal = load_calibration(tmp_path, path.stem)
    text = "\n".join(calibration(cal))
    assert "| same | 5.0% | 12.0% | r1 |" in text and "Steadiest placement: same." in text
    assert load_calibration(tmp_path, "another-host") is None
    assert calibration(None) == []


def test_the_host_probes_run_and_show_with_the_calibration(tmp_path: Path) -> None:
    from dbregress.collect.hostprobe import probe_host
    from dbregress.report.verdict_tables import calibration

    probe = probe_host(seconds=1.0, block_s=0.1)
    for name in ("cpu", "memory"):
        p = probe[name]
        assert len(p["rates"]) >= 2 and all(r > 0 for r in p["rates"]), p
        assert p["cv"] >= 0 and p["low"] <= 1 <= p["high"], p
    text = "\n".join(calibration({"lab": "q", "placements": {}, "host_probe": {"before": probe}}))
    assert "Host probe before the A/A runs, no engine running: CPU loop CV" in text
    assert "random reads in 8 MB CV" in text


def test_a_slowed_column_says_so(tmp_path: Path) -> None:
    path = fixture_run(tmp_path)
    data = read_run(path)
    data.record["inject_slowdown"] = {"pg17": 0.1}
    verdicts = compare_run(data.record, data.steps)
    text = markdown.render(data.record, matrices(data.record, data.steps), verdicts, [])
    assert "| insert | pg17 (injected slowdown 0.1) |" in text


def test_hardware_counts_show_where_a_host_counted_them(tmp_path: Path) -> None:
    path = fixture_run(tmp_path)
    assert "srv instr/o" not in render(path)  # no PMU: no column of dashes
    data = read_run(path)
    for results in data.steps.values():
        for r in results:
            more = 1.2 if r["column"] == "pg17" else 1.0  # pg17: 20% more instructions
            r["per_op"] |= {"server_instructions": 50_000 * more, "server_cycles": 80_000.0}
    verdicts = compare_run(data.record, data.steps)
    results = [r for rs in data.steps.values() for r in rs]
    text = markdown.render(data.record, matrices(data.record, data.steps), verdicts, results)
    assert "srv instr/o (instructions)" in text and "srv cyc/o (cycles)" in text
    c = verdicts.metrics["server_instructions"][("insert", "pg17", "l.i0")]
    assert c.verdict == "higher" and c.ratio == pytest.approx(1.2, rel=0.02)
