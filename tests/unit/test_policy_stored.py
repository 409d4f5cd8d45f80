"""The whole verdict policy travels with the run: a lab's cost_band (and the replay and
repeat rules) is written into run.json once, and every report format judges with it."""

from __future__ import annotations

import json
import random
from pathlib import Path

import jsonschema

from dbregress.cli.report import write_report
from dbregress.lab.file import VerdictPolicy, load_lab
from dbregress.store.replays import save_lane, save_replay
from dbregress.store.run import RunWriter, read_record
from tests.step_records import native
from tests.unit.test_history import replay
from tests.unit.test_report import step

LAB = """\
name = "band"
repeats = 3
count = false
count_replays = 3
count_replays_max = 4
placement = { server = "0", client = "0" }
[verdict]
cost_band = 0.03
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


def test_a_labs_cost_band_judges_every_report(tmp_path: Path) -> None:
    lab_path = tmp_path / "lab.toml"
    lab_path.write_text(LAB)
    lab = load_lab(lab_path)
    writer = RunWriter(tmp_path / "results", lab, {"cpu_model": "x", "cores": 2})
    rng = random.Random(5)
    for job in lab.jobs():  # the time lane: l.i0 at the same rate in both columns
        if job.warmup:
            continue
        writer.set_job(job, {})
        q = 100000.0 * (1 + rng.gauss(0, 0.01))
        result = step(job.column.label, "l.i0", q, "rows", 5.0, repeat=job.repeat)
        writer.write_step(job, 1, native(result), [], "")
    writer.finish("ok")
    run = writer.path
    policy = read_record(run)["verdict_policy"]
    assert policy["cost_band"] == 0.03 and policy["count_replays_max"] == 4
    assert policy["repeats"] == {"min": 3, "max": 3}
    assert VerdictPolicy.of_record(read_record(run)).cost_band == 0.03
    for label, level in (("main", 10000.0), ("pr", 10200.0)):  # 2% more: inside ±3%
        for n in (1, 2, 3):
            cycles = {"l.i0": level * (1 + rng.gauss(0, 0.001))}
            save_replay(run, label, n, {**replay(label, n, cycles), "comparison": "insert"})
    save_lane(run, {"kind": "cost-lane", "replays_per_column": 3, "replays_max": 4})
    write_report(run)
    md = (run / "report.md").read_text()
    assert "`same` within ±3%" in md
    row = next(line for line in md.splitlines() if line.startswith("| l.i0 | pr | instr/op"))
    assert "| same |" in row, row
    verdicts = json.loads((run / "verdicts.json").read_text())
    assert verdicts["policy"]["cost_band"] == 0.03
    assert verdicts["cost_lane"]["band"] == 0.03
    (found,) = verdicts["comparisons"][0]["columns"][0]["steps"]
    html = (run / "report.html").read_text()
    assert "the same within ±3%" in html
    assert found["step"] == "l.i0" and found["cost"]["verdict"] == "same", found["cost"]
    assert found["cost"]["noise"]["sd"] > 0 and found["cost"]["noise"]["from"]
    for side in ("base", "column"):  # the replays' windows met the timed state
        state = found["cost"]["state"][side]
        assert state["kind"] == "postgres" and state["mismatch"] is None, state
    schema = json.loads((Path(__file__).parents[2] / "schema/verdicts.schema.json").read_text())
    jsonschema.validate(verdicts, schema)
