"""The cost lane end to end on a real engine: an A/A lab's counting replays give no
slower/faster cost verdict and mostly `same`; every report format carries both lanes;
the JSON follows its schema; Ctrl-C in the lane keeps the finished replays, leaves no
process, and --resume finishes the lane."""

from __future__ import annotations

import csv
import io
import json
import signal
from pathlib import Path

import jsonschema
import pytest

from tests.e2e.conftest import (
    assert_no_process_mentions,
    dbregress,
    run_record,
    start_dbregress,
    step_results,
    wait_for,
)

pytestmark = pytest.mark.engine

SCHEMA = Path(__file__).parents[2] / "schema" / "verdicts.schema.json"


FOUR = ("fillseq", "overwritesome", "readrandom", "fwdrange")
TWO = ("fillseq", "readrandom")  # where a test is about the lane's workflow, not its steps


def aa_lab(
    tmp_path: Path,
    replays: int = 3,
    most: int = 5,
    extra: str = "",
    steps: tuple[str, ...] = FOUR,
) -> Path:
    """RocksDB 10.2 against itself, one repeat each in the time lane, and a cost lane
    (three replays a column, five for a step whose replays split or leave it undecided)."""
    text = f"""\
name = "cost-aa"
placement = "same"
benchmark = "kv"
repeats = 1
warmup_job = false
count = true
count_replays = {replays}
count_replays_max = {most}
{extra}
[[column]]
label = "a"
build = "rocksdb@10.2.1"
[[column]]
label = "b"
build = "rocksdb@10.2.1"
[kv]
keys = 10000
seconds = 0.3
warmup_s = 0.1
steps = [{", ".join(f'"{s}"' for s in steps)}]
"""
    path = tmp_path / "lab.toml"
    path.write_text(text)
    return path


def test_aa_cost_lane_is_same_and_in_every_report(tmp_path: Path, workdir: Path) -> None:
    out = dbregress(
        "run", str(aa_lab(tmp_path)), "--fail-on", "slower:cost", cwd=tmp_path, workdir=workdir
    )
    assert out.returncode == 0, out.stderr
    assert "cost lane: 6 counting replay(s)" in out.stderr
    assert "fail-on slower:cost: passed" in out.stderr and "cost lane " in out.stderr
    # one repeat decides nothing in the time lane: a gate that names it cannot pass
    run, _ = run_record(tmp_path)
    both = dbregress("report", str(run), "--fail-on", "slower", cwd=tmp_path, workdir=workdir)
    assert both.returncode == 2, both.stderr
    assert "NOT JUDGED, time lane: every step is undecided" in both.stderr
    # the gate names every step it could not judge, with why
    for step in FOUR:
        assert f"kv/{step} (b, time): undecided: " in both.stderr, both.stderr
    time = dbregress("report", str(run), "--fail-on", "slower:time", cwd=tmp_path, workdir=workdir)
    assert time.returncode == 2, time.stderr
    assert "fail-on slower:time: NOT JUDGED" in time.stderr
    assert all(f"kv/{step} (b, time): undecided: " in time.stderr for step in FOUR)
    run, _ = run_record(tmp_path)
    for label in ("a", "b"):
        for n in (1, 2, 3):
            replay = json.loads((run / "cost" / label / f"r{n}.json").read_text())
            assert replay["status"] == "ok", replay
            for step in ("fillseq", "readrandom", "fwdrange", "overwritesome"):
                per_op = replay["steps"][step]["per_op"]
                assert per_op["instructions"] > 0 and per_op["estimated_cycles"] > 0
                assert per_op["estimated_cycles"] >= per_op["instructions"]
                assert "system_calls" in per_op
                # RocksDB's work for the client threads (their calls into the library)
                # apart from its flush and compaction threads
                assert replay["steps"][step]["scope"] == "engine-calls"
                client = replay["steps"][step]["client_per_op"]
                assert client["instructions"] > per_op["instructions"]
    lane = json.loads((run / "cost" / "lane.json").read_text())
    assert lane["caches"] == ["--I1=32768,8,64", "--D1=32768,8,64", "--LL=8388608,16,64"]

    report = dbregress("report", str(run), "--format", "json", cwd=tmp_path, workdir=workdir)
    assert report.returncode == 0, report.stderr
    verdicts = json.loads(report.stdout)
    jsonschema.validate(verdicts, json.loads(SCHEMA.read_text()))
    steps = verdicts["comparisons"][0]["columns"][0]["steps"]
    costs = [s["cost"] for s in steps]
    assert len(costs) == 4 and all(c is not None for c in costs)
    found = [c["verdict"] for c in costs]
    assert "slower" not in found and "faster" not in found, costs
    # an undecided step got two more replays a side (glibc malloc's state moves
    # fwdrange's count by up to 0.9% between replays), and then decided
    assert found.count("same") == len(found), costs
    for c in costs:
        assert c["metric"] == "estimated_cycles"
        assert c["replays"]["base"] == c["replays"]["column"] in (3, 5), c
        assert 0.99 <= c["ratio"] <= 1.01, c
        assert set(c["counts"]) >= {"instructions", "l1_misses", "ll_misses", "system_calls"}

    text = (run / "report.md").read_text()
    assert "### Both lanes (vs a)" in text and "cost lane (estimated cycles/op): 0 slower" in text
    assert "### Cost lane: counts per operation (vs a)" in text
    tsv = dbregress("report", str(run), "--format", "tsv", cwd=tmp_path, workdir=workdir)
    assert "relative estimated cycles per operation (cost lane)" in tsv.stdout
    table = dbregress("report", str(run), "--format", "csv", cwd=tmp_path, workdir=workdir)
    rows = list(csv.DictReader(io.StringIO(table.stdout)))
    b = [r for r in rows if r["column"] == "b"]
    assert b and all(r["cost_estimated_cycles_verdict"] in ("same", "undecided") for r in b)
    assert all(r["cost_replays_column"] in ("3", "5") for r in b)
    html = (run / "report.html").read_text()
    assert "Both lanes (vs a)" in html and "cost: est. cycles/op" in html


def test_ctrl_c_in_the_cost_lane_keeps_finished_replays(
    tmp_path: Path, workdir: Path, launched: list
) -> None:
    lab = aa_lab(tmp_path, replays=2, most=2, steps=TWO)
    proc = start_dbregress(launched, "run", str(lab), cwd=tmp_path, workdir=workdir)
    results = tmp_path / "results"

    def a_replay_finished() -> bool:
        return any(results.glob("*/cost/*/r*.json"))

    wait_for(a_replay_finished, 600, "a finished counting replay")
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert "in the cost lane" in err and "--resume" in err
    assert_no_process_mentions(str(workdir))
    run, _ = run_record(tmp_path)
    kept = sorted(p.name for p in (run / "cost").glob("*/r*.json"))
    assert kept
    # a gate on the interrupted lane fails closed: exit 2, not a pass on what it counted
    gate = dbregress("report", str(run), "--fail-on", "slower:cost", cwd=tmp_path, workdir=workdir)
    assert gate.returncode == 2, gate.stderr
    assert "fail-on slower:cost: NOT JUDGED" in gate.stderr
    assert "cost lane: the cost lane did not finish" in gate.stderr, gate.stderr
    again = dbregress("run", "--resume", str(run), cwd=tmp_path, workdir=workdir)
    assert again.returncode == 0, again.stderr
    assert (run / "cost" / "lane.json").is_file()
    assert len(list((run / "cost").glob("*/r*.json"))) >= 4


def test_replays_that_disagree_get_more_that_count_only_their_steps(
    tmp_path: Path, workdir: Path
) -> None:
    """A band so narrow that any two replays disagree: after count_replays (2) the lane
    adds one replay per column (count_replays_max 3) counting only the loose steps."""
    lab = aa_lab(tmp_path, replays=2, most=3, extra="[verdict]\ncost_band = 0.000001", steps=TWO)
    out = dbregress("run", str(lab), cwd=tmp_path, workdir=workdir)
    assert out.returncode == 0, out.stderr
    assert "cost lane: 2 more replay(s) of a, b" in out.stderr, out.stderr
    run, _ = run_record(tmp_path)
    for label in ("a", "b"):
        added = json.loads((run / "cost" / label / "r3.json").read_text())
        assert added["status"] == "ok", added
        assert added["counts_only"] and set(added["steps"]) == set(added["counts_only"])
    verdicts = json.loads(
        dbregress("report", str(run), "--format", "json", cwd=tmp_path, workdir=workdir).stdout
    )
    steps = verdicts["comparisons"][0]["columns"][0]["steps"]
    counted = set(json.loads((run / "cost" / "b" / "r3.json").read_text())["counts_only"])
    for s in steps:
        want = 3 if s["step"] in counted else 2
        assert s["cost"]["replays"]["column"] == want, s


def test_the_counted_window_meets_the_timed_windows_block_cache(
    tmp_path: Path, workdir: Path
) -> None:
    """RocksDB readrandom on 50,000 keys (about 2,600 data blocks): the time lane
    measures after a warm-up that filled the block cache; the counting replay's window
    opens at the middle of that measured window, so its gets hit the block cache as
    often as the timed ones did (a window after 500 gets, as before, missed on most).
    Both rates are stored in each replay and shown in the report."""
    text = """\
name = "cost-state"
placement = "same"
benchmark = "kv"
repeats = 1
warmup_job = false
count = true
count_replays = 2
count_replays_max = 2
count_steps = ["readrandom"]
[[column]]
label = "r7"
build = "rocksdb@7.10.2"
[[column]]
label = "r10"
build = "rocksdb@10.2.1"
[kv]
keys = 50000
seconds = 0.5
warmup_s = 0.3
steps = ["fillseq", "flush_mt_l0", "readrandom"]
"""
    lab = tmp_path / "lab.toml"
    lab.write_text(text)
    out = dbregress("run", str(lab), cwd=tmp_path, workdir=workdir)
    assert out.returncode == 0, out.stderr
    run, _ = run_record(tmp_path)
    for label in ("r7", "r10"):
        timed = step_results(run, f"{label}/r1")["readrandom"]
        stats = timed["engine_stats"]["statistics"]  # counters that did not move are left out
        hits = stats["rocksdb.block.cache.data.hit"]
        timed_rate = hits / (hits + stats.get("rocksdb.block.cache.data.miss", 0))
        for n in (1, 2):
            replay = json.loads((run / "cost" / label / f"r{n}.json").read_text())
            assert replay["status"] == "ok", replay
            step = replay["steps"]["readrandom"]
            assert step["skip_ops"] > 10 * step["ops"], step  # past the warm-up
            state = step["engine_state"]
            assert state["timed"]["hit_rate"] == pytest.approx(timed_rate, abs=1e-4)
            counted = state["counted"]
            assert counted["kind"] == "rocksdb" and counted["ops"] == step["ops"]
            assert counted["hits"] + counted["misses"] > 0
            # within the tolerance its count gives (analysis/state.py)
            tolerance = state["tolerance_misses_per_op"]
            assert 0 < tolerance < 0.01, state
            timed_misses = state["timed"]["misses_per_op"]
            assert abs(counted["misses_per_op"] - timed_misses) <= tolerance, state
            assert step["state_mismatch"] is None
    report = (run / "report.md").read_text()
    assert "RocksDB block-cache data blocks: misses/op (hit rate), counted / timed" in report
    assert "the counted windows met the timed window's state" in report
