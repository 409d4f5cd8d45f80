"""The measured noise floor, wired: a lab's A/A calibration and the history of the same
counts floor each step's noise in every report, verdicts.json says per step which floor
was used and what each source held (with its runs), and the history floor is keyed by
what counts depend on, not by dbregress's version (run folders written as the runner
and the cost lane write them; the history is a real SQLite file)."""

from __future__ import annotations

import json
import math
import random
from pathlib import Path
from typing import Any

import jsonschema

from dbregress.analysis.cost import cost_verdicts
from dbregress.analysis.cost_floors import Floors
from dbregress.cli.report import write_report
from dbregress.method import identity as method
from dbregress.report import history_moves
from dbregress.report.history_moves import (
    against_history,
    floor_cells,
    history_floor,
    measured_floors,
)
from dbregress.store.calibration import calibration_floor
from dbregress.store.files import write_json
from dbregress.store.history import History, reindex
from dbregress.store.replays import load_replays, save_replay
from dbregress.store.run import read_record
from tests.unit.test_history import make_run

SCHEMA = json.loads((Path(__file__).parents[2] / "schema" / "verdicts.schema.json").read_text())
SPEC = "spec-l.i0"  # method.step_key of the step as counted, as the replay records it
BUILDS = {
    "base": {"source": "maven", "sha256": "aa" * 8, "spec": "postgres@12.20.0"},
    "head": {"source": "maven", "sha256": "bb" * 8, "spec": "postgres@17.2.0"},
}


# The counted window met the timed one's state (analysis/state.py): a PostgreSQL replay
# whose state was not measured gets no cost verdict.
_WINDOW = {"kind": "postgres", "hits": None, "misses": 0.0, "ops": 1000}
MET = {
    "engine_state": {"counted": _WINDOW, "timed": _WINDOW, "tolerance_misses_per_op": None},
    "state_mismatch": None,
}


def counted(
    column: str,
    number: int,
    cycles: float,
    identity: dict[str, Any] | None = None,
    scope: str = "sessions",
    spec: str = SPEC,
) -> dict[str, Any]:
    """A counting replay of step l.i0 as cost/lane.py stores it."""
    per_op = {
        "instructions": cycles / 2,
        "estimated_cycles": cycles,
        "i1_misses": 1.0,
        "d1_read_misses": 2.0,
        "d1_write_misses": 3.0,
        "ll_read_misses": 0.5,
        "ll_write_misses": 0.25,
        "branch_mispredictions": 7.0,
        "system_calls": 0.1,
    }
    return {
        "comparison": "insert",
        "column": column,
        "replay": number,
        "build": BUILDS[column.removesuffix("-aa")]["spec"],
        "method_identity": identity or method.identity(),
        "status": "ok",
        "steps": {"l.i0": {"index": 1, "scope": scope, "spec": spec, "per_op": per_op, **MET}},
        "took_s": 1.0,
    }


def a_run(
    root: Path,
    tmp: Path,
    run_id: str,
    day: int,
    cycles: dict[str, list[float]],
    identity: dict[str, Any] | None = None,
    builds: dict[str, dict[str, str]] | None = None,
) -> Path:
    """A finished run of test_history's lab with counting replays of l.i0."""
    made = make_run(root, tmp, run_id, f"2026-02-{day:02d}T03:00:00+0000", {"base": 1, "head": 1})
    run = made.rename(root / run_id)  # the folder named as its run (calibrate names it)
    record = read_record(run)
    record["builds"] = builds or BUILDS
    if identity is not None:
        record["method_identity"] = identity  # type: ignore[typeddict-item]
    write_json(run / "run.json", record)
    for label, values in cycles.items():
        for n, v in enumerate(values, start=1):
            save_replay(run, label, n, counted(label, n, v, identity))  # type: ignore[arg-type]
    return run


def two_states(rng: random.Random, gap: float = 0.02) -> list[float]:
    """Five replays of a count that takes one of two states `gap` apart."""
    return [10000.0 * (1 + gap * (rng.random() < 0.5)) for _ in range(5)]


def l_i0(verdicts: dict[str, Any]) -> dict[str, Any]:
    """Step l.i0 of column head in verdicts.json."""
    steps = verdicts["comparisons"][0]["columns"][0]["steps"]
    found: dict[str, Any] = next(s for s in steps if s["step"] == "l.i0")
    return found


def test_the_calibration_floor_reaches_the_report_and_verdicts_json(tmp_path: Path) -> None:
    root = tmp_path / "results"
    # The lab's A/A calibration: the base build against its copy, its count in two states.
    rng = random.Random(3)
    cal = a_run(root, tmp_path, "cal-aa", 1, {"base": two_states(rng), "base-aa": []})
    cal_record = read_record(cal)
    cal_record["comparisons"][0]["labels"] = ["base", "base-aa"]
    write_json(cal / "run.json", cal_record)
    for n, v in enumerate(two_states(rng), start=1):
        save_replay(cal, "base-aa", n, counted("base-aa", n, v))  # type: ignore[arg-type]
    write_json(
        root / "calibration" / "box1.json",
        {
            "schema_version": 1,
            "kind": "calibration",
            "lab": "nightly",
            "change": 0.05,
            "placements": {"same": {"run_id": "cal-aa", "median_cv": 0.01, "steps": []}},
        },
    )
    # Tonight: three replays a side, each side in one state, 1.5% apart.
    run = a_run(
        root, tmp_path, "tonight", 2, {"base": [10000.0] * 3, "head": [10150.0, 10150.2, 10149.9]}
    )
    _, verdicts = write_report(run)
    c = verdicts.cost.headline()[("insert", "head", "l.i0")]  # type: ignore[union-attr]
    assert c.noise_from == "the A/A calibration" and c.noise is not None and c.noise > 0.005
    assert c.verdict == "undecided"  # 1.5% against a measured 1% spread: not a change
    written = json.loads((run / "verdicts.json").read_text())
    jsonschema.validate(written, SCHEMA)
    noise = l_i0(written)["cost"]["noise"]
    assert noise["from"] == "the A/A calibration" and noise["sd"] == c.noise
    assert noise["calibration"]["runs"] == ["cal-aa"] and noise["calibration"]["sd"] == c.noise
    assert noise["history"]["sd"] is None and "keeps no run history" in noise["history"]["note"]
    assert noise["left_out"] is None
    assert (
        "0.02%" in written["cost_lane"]["method"] and "0.1%" not in written["cost_lane"]["method"]
    )

    # Without the calibration the same replays are judged on their own spread.
    (root / "calibration" / "box1.json").unlink()
    _, alone = write_report(run)
    c = alone.cost.headline()[("insert", "head", "l.i0")]  # type: ignore[union-attr]
    assert c.verdict == "slower" and c.noise_from != "the A/A calibration"
    written = json.loads((run / "verdicts.json").read_text())
    note = l_i0(written)["cost"]["noise"]["calibration"]["note"]
    assert note.startswith("none: no `dbregress calibrate` of lab nightly")


def test_a_calibration_counted_another_way_gives_no_floor(tmp_path: Path) -> None:
    root = tmp_path / "results"
    rng = random.Random(5)
    other = {**method.identity(), "cpu_features": "skylake family 6 model 85, cpuid 00"}
    a_run(root, tmp_path, "cal-aa", 1, {"base": two_states(rng)}, identity=other)
    write_json(
        root / "calibration" / "box1.json",
        {
            "schema_version": 1,
            "lab": "nightly",
            "change": 0.05,
            "placements": {"same": {"run_id": "cal-aa", "median_cv": 0.01, "steps": []}},
        },
    )
    run = a_run(root, tmp_path, "tonight", 2, {"base": [1e4] * 3, "head": [1e4] * 3})
    record, replays = read_record(run), load_replays(run)
    floor = calibration_floor(root, record, replays)
    assert floor.noise == {} and "another method, scope or step spec" in floor.note
    # A calibration whose runs counted nothing (calibrate measured the time lane only).
    for f in (root / "cal-aa" / "cost").rglob("*.json"):
        f.unlink()
    assert "no counting replays" in calibration_floor(root, record, replays).note


def nights(
    root: Path, tmp: Path, identity: dict[str, Any], first: int, sd: float, n: int = 3
) -> None:
    rng = random.Random(first)
    for i in range(first, first + n):
        cycles = {
            label: [10000.0 * math.exp(rng.gauss(0, sd)) for _ in range(3)]
            for label in ("base", "head")
        }
        a_run(root, tmp, f"night-{i}", i, cycles, identity=identity)


def test_the_history_floor_survives_a_commit_of_dbregress(tmp_path: Path) -> None:
    """Earlier nights counted by the same counting method under another dbregress
    version give tonight's floor; nights on another CPU (as valgrind presents it) do
    not; and the floor is per build."""
    root = tmp_path / "results"
    before = {**method.identity(), "dbregress": "0.1.0+v0.1-7-g1234567"}
    nights(root, tmp_path, before, 1, 0.01)  # a 1% spread, another dbregress
    other_cpu = {**method.identity(), "cpu_features": "skylake family 6 model 85, cpuid 00"}
    nights(root, tmp_path, other_cpu, 10, 0.0001)  # a tiny one, another presented CPU
    assert reindex(root) == []
    run = a_run(root, tmp_path, "tonight", 20, {"base": [1e4] * 3, "head": [1e4 * 1.012] * 3})
    with History(root) as h:
        h.index_run(run)
    record, replays = read_record(run), load_replays(run)
    assert method.key(record["method_identity"]) != method.key(before)  # another version
    floor = history_floor(run, record, replays)
    base_key = method.build_key(BUILDS["base"])
    sd = floor.noise["estimated_cycles"][f"insert/l.i0@{base_key}"]
    assert 0.005 < sd < 0.02  # the 1% nights, not the 0.01% ones
    assert floor.runs[f"insert/l.i0@{base_key}"] == ("night-1", "night-2", "night-3")
    c = cost_verdicts(record, replays, history=floor).headline()[("insert", "head", "l.i0")]  # type: ignore[union-attr]
    assert c.noise_from == "history" and c.verdict == "undecided"  # 1.2% in a 1% spread
    (seen,) = [s for s in c.floors if s.source == "history"]
    head_sd = floor.noise["estimated_cycles"][f"insert/l.i0@{method.build_key(BUILDS['head'])}"]
    assert seen.sd == max(sd, head_sd)  # the wider of the two builds' spreads
    assert seen.runs == ("night-1", "night-2", "night-3")

    # Another build of the column (a new nightly build): only the base's history.
    cells = floor_cells(record, replays)
    assert {c.build_key for c in cells} == {base_key, method.build_key(BUILDS["head"])}


def test_no_history_floor_across_steps_or_builds_or_from_unkeyed_counts(tmp_path: Path) -> None:
    root = tmp_path / "results"
    nights(root, tmp_path, method.identity(), 1, 0.01)
    assert reindex(root) == []
    rebuilt = {**BUILDS, "base": {**BUILDS["base"], "sha256": "ee" * 8}}
    run = a_run(root, tmp_path, "tonight", 20, {"base": [1e4] * 3}, builds=rebuilt)
    floor = history_floor(run, read_record(run), load_replays(run))
    assert floor.noise == {} and "no earlier run" in floor.note
    # Replays that did not record the step as counted (counted before it was recorded).
    replays = load_replays(run)
    for r in replays:
        r["steps"]["l.i0"].pop("spec")
    assert "do not record" in history_floor(run, read_record(run), replays).note


def test_a_history_that_cannot_be_read_is_said(tmp_path: Path) -> None:
    root = tmp_path / "results"
    run = a_run(root, tmp_path, "tonight", 2, {"base": [1e4] * 3, "head": [1e4] * 3})
    (root / "history.sqlite").write_bytes(b"not a database at all " * 100)
    told: list[str] = []
    floors = measured_floors(run, read_record(run), load_replays(run), notify=told.append)
    assert floors["history"].note.startswith("not read: ") and floors["history"].noise == {}
    assert len(told) == 1 and "history floor was not read" in told[0]
    assert isinstance(floors["calibration"], Floors)


def test_a_history_that_cannot_be_read_is_named_in_the_report(tmp_path: Path) -> None:
    root = tmp_path / "results"
    run = a_run(root, tmp_path, "tonight", 2, {"base": [1e4] * 3, "head": [1e4] * 3})
    (root / "history.sqlite").write_bytes(b"not a database at all " * 100)
    told: list[str] = []
    moves = against_history(run, read_record(run), notify=told.append)
    assert moves is not None and "not a readable run history" in moves.error
    assert len(told) == 1 and "not set against its lab's history" in told[0]
    section = history_moves.markdown(moves)
    assert section[0] == "## Against this lab's history"
    assert section[2].startswith("Not read: ") and "--reindex" in section[2]
