"""What the counting replays changed: recorded in cost/lane.json from the code that
prepares them (explain/replay_changes.py), read back by report/disclosure.py and shown
in every format: Markdown, HTML, verdicts.json, TSV and CSV. A lane.json that is missing
or was written by an earlier dbregress is disclosed as such, not filled in."""

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
from dbregress.analysis.compare import compare_run
from dbregress.analysis.cost import cost_verdicts
from dbregress.analysis.summary import matrices
from dbregress.cost.planning import LANE_SIZING
from dbregress.cost.replay import TEST_SETTINGS_ENV, replay_column
from dbregress.explain.jobs import Choice
from dbregress.explain.replay_changes import HELD, HELD_WHERE, NOT_HELD, replay_changes
from dbregress.lab.file import Lab, load_lab
from dbregress.method import identity as method
from dbregress.provision import Build
from dbregress.report import disclosure, exports, html, json_report, markdown
from dbregress.store.replays import load_lane, load_replays, save_lane, save_replay
from dbregress.store.run import RunWriter, read_run
from tests.step_records import native
from tests.unit.test_cost_lane_retry import lane as retry_lane
from tests.unit.test_history import replay
from tests.unit.test_report import step

SCHEMA = Path(__file__).parents[2] / "schema" / "verdicts.schema.json"

LAB = """\
name = "disclosed"
repeats = 3
count = false
[[comparison]]
name = "pg"
benchmark = "insert"
[[comparison.column]]
label = "main"
build = "postgres@17.2.0"
[[comparison.column]]
label = "av"
build = "postgres@17.2.0"
settings = { autovacuum = "on" }
[comparison.insert]
load_rows = 1000
write_rows = 100
query_seconds = 1
[[comparison]]
name = "maria"
benchmark = "insert"
[[comparison.column]]
label = "m11"
build = "mariadb@11.4.5"
[comparison.insert]
load_rows = 1000
write_rows = 100
query_seconds = 1
[[comparison]]
name = "rocks"
benchmark = "kv"
[[comparison.column]]
label = "r7"
build = "rocksdb@7.10.2"
[[comparison.column]]
label = "r10"
build = "rocksdb@10.2.1"
[comparison.kv]
keys = 10000
threads = 1
seconds = 2
"""


def _lab(tmp_path: Path) -> Lab:
    path = tmp_path / "lab.toml"
    path.write_text(LAB)
    return load_lab(path)


def _choices(lab: Lab) -> dict[str, dict[str, Choice]]:
    """The lane's windows of some steps: readrandom opening early at a 98% hit rate."""
    out: dict[str, dict[str, Choice]] = {}
    for comp in lab.comparisons:
        plans = {p.name: (i, p) for i, p in enumerate(benchmarks.plans(comp), start=1)}
        wanted = ("l.i1", "qr100", "l.i0") if comp.benchmark == "insert" else ("readrandom",)
        wanted += ("overwritesome",) if comp.benchmark == "kv" else ()
        for column in comp.columns:
            out[column.label] = {
                name: Choice(
                    plans[name][0],
                    plans[name][1],
                    skip_ops=4000,
                    ops=500,
                    q_per_s=2000.0,
                    warm_ops=250,
                    until_hit_rate=0.98 if name == "readrandom" else 0.0,
                )
                for name in wanted
            }
    return out


def _changes(tmp_path: Path) -> dict[str, Any]:
    lab = _lab(tmp_path)
    return dict(replay_changes(lab, LANE_SIZING, _choices(lab), {}))


def test_lane_json_records_each_columns_settings_over_its_own(tmp_path: Path) -> None:
    found = _changes(tmp_path)
    assert found["profile"] == method.COUNTING_PROFILE
    assert found["sizing"]["budget_s"] == LANE_SIZING.budget_s
    pg = found["comparisons"]["pg"]
    assert pg["settings"]["main"]["autovacuum"] == "off"
    assert pg["settings"]["main"]["checkpoint_timeout"] == "1d"
    assert "autovacuum" not in pg["settings"]["av"]  # the column's own setting wins
    maria = found["comparisons"]["maria"]["settings"]["m11"]
    assert maria["loose_innodb_buffer_pool_size_max"] == "8M"  # the buffer pool cap
    assert maria["innodb_use_native_aio"] == "OFF"
    assert found["comparisons"]["rocks"]["settings"] == {"r7": {}, "r10": {}}


def test_lane_json_records_each_counted_steps_adjustments_and_windows(tmp_path: Path) -> None:
    found = _changes(tmp_path)
    pg = found["comparisons"]["pg"]["steps"]
    assert pg["l.i1"]["adjustments"] == ["lockstep"]
    assert pg["qr100"]["adjustments"] == ["paced_on_query_thread"]
    assert pg["l.i0"]["adjustments"] == []
    assert pg["l.i0"]["windows"]["main"] == {
        "skip_ops": 4000,
        "ops": 500,
        "warm_ops": 250,
        "q_per_s": 2000.0,
        "until_hit_rate": None,
    }
    rocks = found["comparisons"]["rocks"]["steps"]
    assert rocks["overwritesome"]["adjustments"] == ["settled"]
    # the early window: a single-client step opens at the base's timed hit rate
    assert rocks["readrandom"]["windows"]["r10"]["until_hit_rate"] == 0.98


def test_lane_json_records_that_purge_is_held_where_the_build_has_a_client(
    tmp_path: Path,
) -> None:
    lab = _lab(tmp_path)
    (maria,) = [c for c in lab.columns if c.label == "m11"]
    with_client, without = tmp_path / "with", tmp_path / "without"
    (with_client / "bin").mkdir(parents=True)
    (with_client / "bin" / "mariadb").write_text("#!/bin/sh\n")
    (with_client / "bin" / "mariadb").chmod(0o755)
    (without / "bin").mkdir(parents=True)
    for basedir, held in ((with_client, HELD), (without, NOT_HELD)):
        builds = {"m11": Build(maria.build, basedir, "mariadbd 11.4.5")}
        found = replay_changes(lab, LANE_SIZING, _choices(lab), builds)
        assert found["comparisons"]["maria"]["held"] == {"m11": held}
        assert found["comparisons"]["pg"]["held"] == {}  # not a MySQL-family column
    # a fleet's lane sees no build (its workers fetch them): what holds where
    found = replay_changes(lab, LANE_SIZING, _choices(lab), {})
    assert found["comparisons"]["maria"]["held"] == {"m11": HELD_WHERE}


def test_an_uncounted_step_of_an_added_replay_is_not_disclosed(tmp_path: Path) -> None:
    lab = _lab(tmp_path)
    choices = _choices(lab)
    choices["r7"]["overwritesome"] = dataclasses.replace(
        choices["r7"]["overwritesome"], counted=False
    )
    choices["r10"]["overwritesome"] = dataclasses.replace(
        choices["r10"]["overwritesome"], counted=False
    )
    found = replay_changes(lab, LANE_SIZING, choices, {})
    assert "overwritesome" not in found["comparisons"]["rocks"]["steps"]


def test_a_hooks_settings_are_disclosed_as_the_replays_ran_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The cost lane's test hook (DBREGRESS_TEST_REPLAY_SETTINGS) sets settings in every
    counting replay (replay_column): lane.json discloses them with the engine's own
    counting settings, from what the replays ran, not from the lab's columns."""
    monkeypatch.setenv(TEST_SETTINGS_ENV, "shared_buffers=1MB, autovacuum=on")
    lab = _lab(tmp_path)
    found = replay_changes(lab, LANE_SIZING, _choices(lab), {}, replay_column)
    pg = found["comparisons"]["pg"]["settings"]
    assert pg["main"]["shared_buffers"] == "1MB"
    assert pg["main"]["autovacuum"] == "on"  # the hook's, over the engine's "off"
    assert pg["main"]["checkpoint_timeout"] == "1d"
    assert pg["av"]["shared_buffers"] == "1MB"
    assert "autovacuum" not in pg["av"]  # the column's own value: no change
    assert found["comparisons"]["rocks"]["settings"]["r7"] == {
        "shared_buffers": "1MB",
        "autovacuum": "on",
    }
    # and the lane records it so in cost/lane.json
    (tmp_path / "lane").mkdir()
    ln = retry_lane(tmp_path / "lane")
    ln.choices = {}  # every replay there is: nothing to run
    monkeypatch.setattr(ln, "_require", lambda: None)
    monkeypatch.setattr(ln, "_plan", lambda: None)
    ln.run_lane()
    lane = load_lane(ln.run)
    assert lane is not None
    settings = lane["replay_changes"]["comparisons"]
    assert [c["settings"] for c in settings.values()] == [
        {label: {"shared_buffers": "1MB", "autovacuum": "on"} for label in ("a", "b")}
    ]


def test_the_disclosure_says_it_in_words(tmp_path: Path) -> None:
    lane: Any = {"kind": "cost-lane", "replay_changes": _changes(tmp_path)}
    record: Any = {"columns": []}
    lines = disclosure.disclosure(lane, record, "maria").lines()
    text = "\n".join(lines)
    assert "engine settings of m11: " in text
    assert "loose_innodb_buffer_pool_size_max = 8M" in text
    assert "l.i1: the inserter and the deleter take turns (lockstep)" in text
    assert "qr100: the paced writers run on the query thread" in text
    rocks = "\n".join(disclosure.disclosure(lane, record, "rocks").lines())
    assert "engine settings of r7, r10: no engine setting changed" in rocks
    assert "readrandom 500 after 4,000, or earlier once the block cache hits 98.0%" in rocks
    assert "overwritesome: the step starts from a settled engine" in rocks
    pg = "\n".join(disclosure.disclosure(lane, record, "pg").lines())
    assert "engine settings of main: autovacuum = off" in pg
    assert "engine settings of av: checkpoint_timeout = 1d" in pg
    assert "not complete" not in pg


def test_a_missing_lane_json_is_disclosed_as_not_recorded() -> None:
    d = disclosure.disclosure(None, {"columns": []}, "pg")  # type: ignore[typeddict-item]
    assert not d.recorded and d.lines() == [f"not complete: {disclosure.MISSING}"]


def test_an_earlier_lane_json_gives_what_it_has_and_says_what_it_lacks() -> None:
    lane: Any = {
        "replay_settings": {"postgres": {"autovacuum": "off"}, "mysql": {"x": "1"}},
        "lockstep_steps": ["l.i1", "l.i2"],
    }
    record: Any = {"columns": [{"label": "m", "comparison": "c", "build": "mariadb@11.4.5"}]}
    d = disclosure.disclosure(lane, record, "c")
    assert not d.recorded and d.settings == {"m": {"x": "1"}}
    assert d.note == disclosure.EARLIER
    assert "l.i1, l.i2: the inserter and the deleter take turns (lockstep)" in d.lines()


# -- every format -------------------------------------------------------------------------

RUN_LAB = """\
name = "band"
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


@pytest.fixture
def run(tmp_path: Path) -> Path:
    """A run with both lanes on l.i0 and a lane.json whose replays changed PostgreSQL's
    settings and counted l.i0 in a window of 500 calls."""
    lab_path = tmp_path / "lab.toml"
    lab_path.write_text(RUN_LAB)
    lab = load_lab(lab_path)
    writer = RunWriter(tmp_path / "results", lab, {"cpu_model": "x", "cores": 2})
    rng = random.Random(5)
    for job in lab.jobs():
        if job.warmup:
            continue
        writer.set_job(job, {})
        q = 100000.0 * (1 + rng.gauss(0, 0.01))
        result = step(job.column.label, "l.i0", q, "rows", 5.0, repeat=job.repeat)
        writer.write_step(job, 1, native(result), [], "")
    writer.finish("ok")
    for label in ("main", "pr"):
        for n in (1, 2, 3):
            cycles = {"l.i0": 10000.0 * (1 + rng.gauss(0, 0.001))}
            save_replay(writer.path, label, n, {**replay(label, n, cycles), "comparison": "insert"})
    (comp,) = lab.comparisons
    plan = benchmarks.plans(comp)[0]
    choices = {
        lb: {"l.i0": Choice(1, plan, skip_ops=25, ops=500, q_per_s=2e4)} for lb in ("main", "pr")
    }
    lane = {
        "kind": "cost-lane",
        "replays_per_column": 3,
        "replays_max": 5,
        "replay_changes": replay_changes(lab, LANE_SIZING, choices, {}),
    }
    save_lane(writer.path, lane)  # type: ignore[arg-type]
    return writer.path


def _verdicts(run: Path) -> Any:
    data = read_run(run)
    v = compare_run(data.record, data.steps)
    cost = cost_verdicts(data.record, load_replays(run), planned=3)
    return data, dataclasses.replace(v, cost=cost)


def test_every_format_discloses_it(run: Path) -> None:
    data, v = _verdicts(run)
    lane = load_lane(run)
    ms = matrices(data.record, data.steps)
    said = "engine settings of main, pr: autovacuum = off, checkpoint_timeout = 1d"
    window = "l.i0 500 after 25"
    md = markdown.render(data.record, ms, v, [], lane=lane)
    assert said in md and window in md
    assert said in markdown.summary_tables(data.record, ms, v, lane)
    page = html.render(data, ms, v, lane=lane)
    assert said in page and window in page
    verdicts = json_report.render(data.record, v, lane)
    jsonschema.validate(verdicts, json.loads(SCHEMA.read_text()))
    found = verdicts["comparisons"][0]["counting_replays"]
    assert found is not None and found["recorded"] and said in found["lines"][0]
    assert found["settings"]["pr"]["autovacuum"] == "off"
    assert found["steps"]["l.i0"]["windows"]["pr"]["ops"] == 500
    tsv = exports.tsv(data.record, ms, v, lane)
    assert "insert: what the counting replays changed" in tsv and said in tsv
    rows = list(csv.DictReader(io.StringIO(exports.csv_text(data.record, ms, v, lane))))
    cell = next(r for r in rows if r["column"] == "pr")["cost_counting_changes"]
    assert "autovacuum = off" in cell and "window 500 after 25" in cell


def test_a_run_without_its_lane_json_says_so_in_every_format(run: Path) -> None:
    data, v = _verdicts(run)
    ms = matrices(data.record, data.steps)
    assert disclosure.MISSING in markdown.render(data.record, ms, v, [], lane=None)
    found = json_report.render(data.record, v, None)["comparisons"][0]["counting_replays"]
    assert found is not None and not found["recorded"] and found["note"] == disclosure.MISSING
    rows = list(csv.DictReader(io.StringIO(exports.csv_text(data.record, ms, v, None))))
    assert all(disclosure.MISSING in r["cost_counting_changes"] for r in rows)


def test_a_run_without_counting_replays_discloses_nothing(run: Path) -> None:
    data = read_run(run)
    v = compare_run(data.record, data.steps)  # no cost lane
    ms = matrices(data.record, data.steps)
    verdicts = json_report.render(data.record, v, load_lane(run))
    assert verdicts["comparisons"][0]["counting_replays"] is None
    assert "counting replays ran adjusted" not in markdown.render(data.record, ms, v, [])
    rows = list(csv.DictReader(io.StringIO(exports.csv_text(data.record, ms, v, None))))
    assert all(r["cost_counting_changes"] == "" for r in rows)
