"""A run's report says which steps moved against the earlier runs of its lab in the run
history (no engines: runs written the way the runner writes them, then indexed)."""

from __future__ import annotations

import math
import random
from pathlib import Path

from dbregress.cli.report import write_report
from dbregress.lab.file import load_lab
from dbregress.report.history_moves import against_history
from dbregress.store.history import History
from dbregress.store.run import RunWriter
from tests.step_records import native
from tests.unit.test_report import step

LAB = """\
name = "nightly"
repeats = 5
order = "fixed"
placement = { server = "0", client = "0" }
[[column]]
label = "main"
build = "postgres@17.2.0"
[[column]]
label = "pr"
build = "postgres@17.2.0"
[insert]
load_rows = 1000
write_rows = 100
query_seconds = 1
"""


def nightly(
    tmp_path: Path, night: int, l_i0: float, host: str = "Test CPU", loadgen: str | None = None
) -> Path:
    lab_path = tmp_path / "lab.toml"
    lab_path.write_text(LAB)
    lab = load_lab(lab_path)
    writer = RunWriter(tmp_path / "results", lab, {"cpu_model": host, "cores": 2})
    writer.record.update(status="ok", started_at=f"2026-11-{10 + night:02d}T02:00:00+0000")
    if loadgen is not None:  # another loadgen binary measured this night
        writer.record["method_identity"]["loadgen_sha256"] = loadgen
    rng = random.Random(night)
    for job in lab.jobs():
        if job.warmup:
            continue
        writer.set_job(job, {})
        for index, name, q in ((1, "l.i0", l_i0), (2, "qp100", 20000.0)):
            value = q * math.exp(rng.gauss(0, 0.02))
            unit = "rows" if name == "l.i0" else "ops"
            result = step(job.column.label, name, value, unit, 5.0, repeat=job.repeat)
            writer.write_step(job, index, native(result), [], "")
    writer.finish("ok")
    with History(tmp_path / "results") as h:
        h.index_run(writer.path)
    return writer.path


def test_a_step_that_moved_tonight_is_named(tmp_path: Path) -> None:
    for night in range(4):
        nightly(tmp_path, night, 100000.0)
    tonight = nightly(tmp_path, 4, 80000.0)
    write_report(tonight)
    text = (tonight / "report.md").read_text()
    assert "## Against this lab's history" in text
    rows = [line for line in text.splitlines() if line.startswith("| l.i0 |") and "▼" in line]
    assert {r.split("|")[2].strip() for r in rows} == {"main", "pr"}
    assert all("| time |" in r and "0.8" in r for r in rows)
    assert not any(line.startswith("| qp100 |") and "▼" in line for line in text.splitlines())


def test_a_quiet_night_and_too_few_runs_say_so(tmp_path: Path) -> None:
    first = nightly(tmp_path, 0, 100000.0)
    moves = against_history(
        first,
        {"run_id": first.name, "lab": "nightly", "host": {"cpu_model": "Test CPU", "cores": 2}},
    )
    assert moves is not None and moves.series == 0  # nothing earlier to judge against
    for night in range(1, 4):
        last = nightly(tmp_path, night, 100000.0)
    write_report(last)
    assert "No step moved against the earlier runs." in (last / "report.md").read_text()


def test_another_host_class_is_not_the_time_lanes_history(tmp_path: Path) -> None:
    for night in range(4):
        nightly(tmp_path, night, 100000.0)
    elsewhere = nightly(tmp_path, 4, 80000.0, host="Other CPU")
    write_report(elsewhere)
    assert "## Against this lab's history" not in (elsewhere / "report.md").read_text()


def test_a_new_method_is_named_instead_of_moves(tmp_path: Path) -> None:
    for night in range(4):
        nightly(tmp_path, night, 100000.0)
    tonight = nightly(tmp_path, 4, 80000.0, loadgen="0123456789abcdef")
    write_report(tonight)
    text = (tonight / "report.md").read_text()
    assert "The method differs from the lab's previous run: loadgen binary " in text
    assert "-> 0123456789abcdef" in text and "too few earlier runs of this method" in text
    assert not any("▼" in line for line in text.splitlines() if line.startswith("| l.i0 |"))
