"""Every report format says which counting replays its cost verdicts used were taken
from the count store (cost/reuse.py writes them into the run folder with `reused`) and
from which runs, with what cost/lane.json `store` says of the lane's use of the store;
a run folder written before the store existed renders as it did."""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import random
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from dbregress import benchmarks
from dbregress.analysis.compare import RunVerdicts, compare_run
from dbregress.analysis.cost import cost_verdicts
from dbregress.analysis.summary import Matrix, matrices
from dbregress.cost.planning import LANE_SIZING
from dbregress.explain.jobs import Choice
from dbregress.explain.replay_changes import replay_changes
from dbregress.lab.file import load_lab
from dbregress.report import count_store, exports, html, json_report, markdown
from dbregress.shapes.replay import CostLaneRecord, ReplayRecord
from dbregress.store.replays import load_lane, load_replays, replay_path, save_lane, save_replay
from dbregress.store.run import RunData, RunWriter, read_run
from tests.step_records import native
from tests.unit.test_history import replay
from tests.unit.test_report import step

SCHEMA = json.loads((Path(__file__).parents[2] / "schema" / "verdicts.schema.json").read_text())
LAB = """\
name = "stored"
repeats = 3
count = false
count_replays = 3
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
STEPS = ("l.i0", "l.i1")
OLD, OLDER = "20261128-043823-store-ab", "20261127-101010-store-cd"
STORE = {
    "path": "results/count-store",
    "recount": False,
    "adopted": {"insert": 5},
    "refused": {"pr": "engine state: l.i1: counted windows missed the timed state"},
}


@pytest.fixture
def run(tmp_path: Path) -> Path:
    """A run as written before the count store: both lanes on l.i0 and l.i1, three
    replays per column, and a lane.json with no `store`."""
    (tmp_path / "lab.toml").write_text(LAB)
    lab = load_lab(tmp_path / "lab.toml")
    writer = RunWriter(tmp_path / "results", lab, {"cpu_model": "x", "cores": 2})
    rng = random.Random(7)
    for job in lab.jobs():
        if job.warmup:
            continue
        writer.set_job(job, {})
        for index, name in enumerate(STEPS, start=1):
            q = 100000.0 * (1 + rng.gauss(0, 0.01))
            result = step(job.column.label, name, q, "rows", 5.0, repeat=job.repeat)
            writer.write_step(job, index, native(result), [], "")
    writer.finish("ok")
    for label in ("main", "pr"):
        for n in (1, 2, 3):
            cycles = {s: 10000.0 * (1 + rng.gauss(0, 0.001)) for s in STEPS}
            save_replay(writer.path, label, n, {**replay(label, n, cycles), "comparison": "insert"})
    (comp,) = lab.comparisons
    plans = {p.name: (i, p) for i, p in enumerate(benchmarks.plans(comp), start=1)}
    choices = {
        lb: {s: Choice(*plans[s], skip_ops=25, ops=500, q_per_s=2e4) for s in STEPS}
        for lb in ("main", "pr")
    }
    lane = {
        "kind": "cost-lane",
        "replays_per_column": 3,
        "replays_max": 5,
        "replay_changes": replay_changes(lab, LANE_SIZING, choices, {}),
    }
    save_lane(writer.path, lane)  # type: ignore[arg-type]
    return writer.path


def _reused(run: Path, label: str, number: int, origin: str) -> None:
    """Replay `number` of `label` as the lane writes one it took from the store."""
    path = replay_path(run, label, number)
    record = json.loads(path.read_text())
    record["reused"] = {
        "entry": f"{'ab' * 12}/{origin}.{label}.r{number}",
        "run": origin,
        "column": label,
        "replay": number,
        "stored_at": 1.8e9,
    }
    path.write_text(json.dumps(record))


def _added(run: Path, label: str, number: int, step_name: str, **extra: Any) -> None:
    """An added replay of the column that counts one step only."""
    record = {**replay(label, number, {step_name: 10000.0}), "comparison": "insert"}
    save_replay(run, label, number, {**record, "counts_only": [step_name], **extra})


def _use_store(run: Path, store: dict[str, Any] | None = STORE) -> None:
    """main's r1 and r2 and pr's r1 taken from OLD, pr's added r4 (l.i0 only) from OLDER;
    lane.json's `store` as given."""
    for label, number in (("main", 1), ("main", 2), ("pr", 1)):
        _reused(run, label, number, OLD)
    _added(run, "pr", 4, "l.i0")
    _reused(run, "pr", 4, OLDER)
    if store is not None:
        lane = json.loads((run / "cost" / "lane.json").read_text())
        (run / "cost" / "lane.json").write_text(json.dumps({**lane, "store": store}))


@dataclasses.dataclass
class Read:
    data: RunData
    ms: list[Matrix]
    v: RunVerdicts
    lane: CostLaneRecord | None
    replays: list[ReplayRecord]


def _read(run: Path, cost: bool = True) -> Read:
    data = read_run(run)
    v = compare_run(data.record, data.steps)
    replays = load_replays(run)
    if cost:
        v = dataclasses.replace(v, cost=cost_verdicts(data.record, replays, planned=3))
    return Read(data, matrices(data.record, data.steps), v, load_lane(run), replays)


def _every_format(r: Read, replays: list[ReplayRecord] | None) -> dict[str, str]:
    record = r.data.record
    return {
        "md": markdown.render(record, r.ms, r.v, [], lane=r.lane, replays=replays),
        "summary": markdown.summary_tables(record, r.ms, r.v, r.lane, replays),
        "html": html.render(r.data, r.ms, r.v, lane=r.lane, replays=replays),
        "json": json.dumps(json_report.render(record, r.v, r.lane, replays), indent=1),
        "csv": exports.csv_text(record, r.ms, r.v, r.lane, replays),
    }


def _cost(verdicts: dict[str, Any], label: str, step_name: str) -> dict[str, Any]:
    (comp,) = verdicts["comparisons"]
    (column,) = [c for c in comp["columns"] if c["label"] == label]
    (found,) = [s for s in column["steps"] if s["step"] == step_name]
    cost: dict[str, Any] = found["cost"]
    return cost


def test_markdown_names_the_replays_taken_and_their_runs(run: Path) -> None:
    _use_store(run)
    r = _read(run)
    md = markdown.render(r.data.record, r.ms, r.v, [], lane=r.lane, replays=r.replays)
    lines = md.splitlines()
    head = (
        "Counted before: 4 of 7 counting replays the cost verdicts used were taken from the "
        f"count store, counted in earlier runs ({count_store.DOC}):"
    )
    assert head in lines
    at = lines.index(head)
    assert lines[at + 1 : at + 7] == [
        "",
        f"- main: 2 of 3 from {OLD}",
        f"- pr: l.i0 2 of 4, l.i1 1 of 3 from {OLDER}, {OLD}",
        "- windows adopted: where 5 stored replay(s) counted each step",
        f"- not taken (pr): {STORE['refused']['pr']}",
        "",
    ]
    # after the disclosure of what the replays changed, before the verdicts' tables
    assert md.index("The counting replays ran adjusted") < md.index(head)
    # the replays column agrees, with how many of each side this run counted
    assert "| l.i0 | pr | " in md and "| 3/4 (fresh 1/2) |" in md
    assert "(fresh base/column) of them counted in this run" in md
    summary = markdown.summary_tables(r.data.record, r.ms, r.v, r.lane, r.replays)
    assert head in summary and f"- main: 2 of 3 from {OLD}" in summary


def test_the_counts_are_those_of_the_replays_each_verdict_used(run: Path) -> None:
    """A replay counted by another scope is left out of the verdict (analysis/cost.py):
    it is not counted among the replays used, taken from the store or not."""
    _use_store(run)
    _added(run, "pr", 5, "l.i0")
    path = replay_path(run, "pr", 5)
    record = json.loads(path.read_text())
    record["steps"]["l.i0"]["scope"] = "engine"
    path.write_text(json.dumps(record))
    _reused(run, "pr", 5, "20261101-000000-other")
    r = _read(run)
    stored = count_store.summarize(r.data.record, r.v, r.lane, r.replays)
    assert stored is not None
    assert r.v.cost is not None
    for key, head in r.v.cost.headline().items():
        sides = stored.sides(key)
        assert sides is not None and (sides[0].used, sides[1].used) == head.replays
    sides = stored.sides(("insert", "pr", "l.i0"))
    assert sides is not None and sides[1] == count_store.Side(4, 2, (OLDER, OLD))
    assert "20261101-000000-other" not in "\n".join(stored.lines("insert"))


def test_json_carries_the_counts_and_runs_and_fits_the_schema(run: Path) -> None:
    _use_store(run)
    r = _read(run)
    verdicts: Any = json_report.render(r.data.record, r.v, r.lane, r.replays)
    jsonschema.validate(verdicts, SCHEMA)
    i0 = _cost(verdicts, "pr", "l.i0")
    assert i0["replays"] == {"base": 3, "column": 4}
    assert i0["reused"] == {"base": 2, "column": 2}
    assert i0["reused_from"] == {"base": [OLD], "column": [OLDER, OLD]}
    assert i0["fresh"] == {"base": 1, "column": 2}  # counted in this run
    i1 = _cost(verdicts, "pr", "l.i1")
    assert i1["reused"] == {"base": 2, "column": 1}
    assert i1["reused_from"] == {"base": [OLD], "column": [OLD]}
    assert verdicts["cost_lane"]["count_store"] == STORE


def test_html_says_the_same_in_the_cost_lanes_section(run: Path) -> None:
    _use_store(run)
    r = _read(run)
    page = html.render(r.data, r.ms, r.v, lane=r.lane, replays=r.replays)
    lanes = page.index("<h3>Both lanes")
    said = page.index("Counted before: 4 of 7 counting replays")
    assert lanes < said < page.index('<table class="t lanes">')
    assert f"<li>main: 2 of 3 from {OLD}</li>" in page
    assert f"<li>pr: l.i0 2 of 4, l.i1 1 of 3 from {OLDER}, {OLD}</li>" in page
    assert "<li>not taken (pr): engine state: l.i1: counted windows missed" in page


def test_csv_ends_with_the_reused_counts(run: Path) -> None:
    _use_store(run)
    r = _read(run)
    text = exports.csv_text(r.data.record, r.ms, r.v, r.lane, r.replays)
    header = text.splitlines()[0].split(",")
    assert header == exports.CSV_HEADER + exports.CSV_REUSED
    rows = {(row["column"], row["step"]): row for row in csv.DictReader(io.StringIO(text))}
    pr = rows[("pr", "l.i0")]
    assert (pr["cost_reused_base"], pr["cost_reused_column"]) == ("2", "2")
    assert pr["cost_reused_from"] == f"{OLDER}; {OLD}"
    assert rows[("main", "l.i0")]["cost_reused_base"] == ""  # the base's row: none


def test_a_recount_says_the_store_was_not_used(run: Path) -> None:
    lane = json.loads((run / "cost" / "lane.json").read_text())
    store = {"path": "results/count-store", "recount": True, "adopted": {}, "refused": {}}
    (run / "cost" / "lane.json").write_text(json.dumps({**lane, "store": store}))
    r = _read(run)
    md = markdown.render(r.data.record, r.ms, r.v, [], lane=r.lane, replays=r.replays)
    assert (
        "Counted before: every replay was counted in this run, none was taken from the "
        f"count store ({count_store.DOC}):\n\n- recount: the store was not used\n"
    ) in md
    verdicts: Any = json_report.render(r.data.record, r.v, r.lane, r.replays)
    jsonschema.validate(verdicts, SCHEMA)
    assert _cost(verdicts, "pr", "l.i0")["reused"] == {"base": 0, "column": 0}
    assert verdicts["cost_lane"]["count_store"]["recount"] is True


def test_a_store_that_gave_nothing_says_every_replay_was_counted_here(run: Path) -> None:
    lane = json.loads((run / "cost" / "lane.json").read_text())
    store = {"path": "results/count-store", "recount": False, "adopted": {}, "refused": {}}
    (run / "cost" / "lane.json").write_text(json.dumps({**lane, "store": store}))
    r = _read(run)
    md = markdown.render(r.data.record, r.ms, r.v, [], lane=r.lane, replays=r.replays)
    assert (
        "Counted before: every replay was counted in this run, none was taken from the "
        f"count store ({count_store.DOC}).\n\n"
    ) in md


def test_replays_taken_before_an_interrupted_lane_are_still_named(run: Path) -> None:
    """No lane.json (the lane did not finish): the replays say what was taken; JSON has
    no `count_store`, which only lane.json records."""
    _use_store(run, store=None)
    (run / "cost" / "lane.json").unlink()
    r = _read(run)
    formats = _every_format(r, r.replays)
    assert f"- main: 2 of 3 from {OLD}" in formats["md"]
    verdicts: Any = json_report.render(r.data.record, r.v, r.lane, r.replays)
    jsonschema.validate(verdicts, SCHEMA)
    assert "count_store" not in verdicts["cost_lane"]
    assert _cost(verdicts, "pr", "l.i1")["reused"] == {"base": 2, "column": 1}


def test_a_run_written_before_the_store_renders_as_before(run: Path) -> None:
    """No `reused` and no `store`: every format is what it was without the replays
    given, which is what it was before the count store existed."""
    r = _read(run)
    assert count_store.summarize(r.data.record, r.v, r.lane, r.replays) is None
    given, before = _every_format(r, r.replays), _every_format(r, None)
    assert given == before
    for text in given.values():
        assert "Counted before" not in text and "reused" not in text
    assert given["csv"].splitlines()[0].split(",") == exports.CSV_HEADER


def test_a_run_without_a_cost_lane_says_nothing_of_the_store(run: Path) -> None:
    _use_store(run)
    r = _read(run, cost=False)
    assert count_store.summarize(r.data.record, r.v, r.lane, r.replays) is None
    assert _every_format(r, r.replays) == _every_format(r, None)
