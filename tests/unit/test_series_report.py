"""A run whose comparison has four columns is a series: the reports show it relative to
col-1 with the change points marked, and a chart per step (no engines: step results are
written the way the runner writes them)."""

from __future__ import annotations

import math
import random
from pathlib import Path

from dbregress.analysis.series import run_changes
from dbregress.cli.report import write_report
from dbregress.lab.file import load_lab
from dbregress.store.run import RunWriter, read_run
from tests.step_records import native
from tests.unit.test_report import step

LAB = """\
name = "series"
repeats = 5
order = "fixed"
placement = { server = "0", client = "0" }
[[column]]
label = "v1"
build = "postgres@12.20.0"
[[column]]
label = "v2"
build = "postgres@13.16.0"
[[column]]
label = "v3"
build = "postgres@14.13.0"
[[column]]
label = "v4"
build = "postgres@15.8.0"
[insert]
load_rows = 1000
write_rows = 100
query_seconds = 1
"""


def series_run(tmp_path: Path) -> Path:
    """l.i0 drops 25% from v3 on; qp100 stays flat; 2% noise per repeat."""
    lab_path = tmp_path / "lab.toml"
    lab_path.write_text(LAB)
    lab = load_lab(lab_path)
    writer = RunWriter(tmp_path / "results", lab, {"cpu_model": "Test", "cores": 2})
    writer.record.update(run_id="series-run", status="ok")
    rng = random.Random(5)
    for job in lab.jobs():
        if job.warmup:
            continue
        writer.set_job(job, {})
        late = job.column.label in ("v3", "v4")
        for index, name, q in ((1, "l.i0", 75000 if late else 100000), (2, "qp100", 20000)):
            value = q * math.exp(rng.gauss(0, 0.02))
            unit = "rows" if name == "l.i0" else "ops"
            writer.write_step(
                job,
                index,
                native(step(job.column.label, name, value, unit, 5.0, repeat=job.repeat)),
                [],
                "",
            )
    return writer.path


def test_change_points_of_a_run(tmp_path: Path) -> None:
    data = read_run(series_run(tmp_path))
    changes = run_changes(data.record, data.steps, [])
    assert changes is not None
    (comparison,) = {c for c, _ in changes.time}
    found = changes.time[(comparison, "l.i0")].decided()
    assert [(c.index, c.verdict) for c in found] == [(2, "slower")]
    assert 0.70 < found[0].ratio < 0.80
    assert changes.time[(comparison, "qp100")].decided() == []
    assert changes.cost == {}


def test_reports_show_the_series_with_marks_and_charts(tmp_path: Path) -> None:
    path = series_run(tmp_path)
    write_report(path)
    md = (path / "report.md").read_text()
    assert "### Series and change points" in md
    assert "col-3 : v3" in md
    row = next(line for line in md.splitlines() if line.endswith("| l.i0 |") and "▼" in line)
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[0] == "1.00" and cells[2].startswith("▼0.7") and not cells[3].startswith("▼")
    flat = next(
        line
        for line in md.splitlines()
        if line.endswith("| qp100 |") and "col" not in line and line.startswith("| 1.00")
    )
    assert "▼" not in flat and "▲" not in flat
    page = (path / "report.html").read_text()
    assert "Series and change points" in page
    assert 'stroke-dasharray="5 3"' in page and "time lane: slower from col-3" in page


def test_two_columns_are_no_series() -> None:
    record = {"comparisons": [{"name": "c", "labels": ["a", "b"]}]}
    assert run_changes(record, {}, []) is None
