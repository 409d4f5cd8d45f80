"""The cost verdict's history floor: a step's spread over the earlier counts of its build
and step by the same counting method widens its noise floor; counts of another method
do not take part, whatever the lab; and a version 2 history gains the keys it needs."""

from __future__ import annotations

import dataclasses
import json
import math
import random
import sqlite3
from pathlib import Path

from dbregress.method import identity as method
from dbregress.store import history as history_module
from dbregress.store.history import FloorCell, History, history_path, reindex
from tests.unit.test_noise_floor import BUILDS, SPEC, a_run


def _runs(root: Path, tmp: Path, sd: float, loadgen: str, first: int, lab: str = "") -> None:
    rng = random.Random(first)
    identity = {**method.identity(), "loadgen_sha256": loadgen}
    for i in range(first, first + 3):
        cycles = {
            label: [10000.0 * math.exp(rng.gauss(0, sd)) for _ in range(3)]
            for label in ("base", "head")
        }
        run = a_run(root, tmp, f"run-{i}", i + 1, cycles, identity=identity)
        if lab:  # another lab that counted the same builds and step
            record = json.loads((run / "run.json").read_text())
            record["lab"] = lab
            (run / "run.json").write_text(json.dumps(record))


def cell(loadgen: str, build: str = "base", scope: str = "sessions") -> FloorCell:
    identity = {**method.identity(), "loadgen_sha256": loadgen}
    return FloorCell(
        "insert", "l.i0", method.build_key(BUILDS[build]), method.count_key(identity), scope, SPEC
    )


def test_the_history_floor_is_the_earlier_counts_spread_of_this_method(tmp_path: Path) -> None:
    root = tmp_path / "results"
    _runs(root, tmp_path, 0.01, "aaaa", 0)  # 1% spread, one method
    _runs(root, tmp_path, 0.0001, "bbbb", 3, lab="bisect-point")  # 0.01%, another, elsewhere
    assert reindex(root) == []
    with History(root) as h:
        wide = h.cost_floors([cell("aaaa")], but="none")
        narrow = h.cost_floors([cell("bbbb")], but="run-5")
        name = cell("aaaa").name
        assert 0.005 < wide.noise["estimated_cycles"][name] < 0.02
        assert wide.runs[name] == ("run-0", "run-1", "run-2")
        # another lab's counts of the same builds and step serve (the lab is no key)
        assert narrow.noise["estimated_cycles"][name] < 0.0005
        assert narrow.runs[name] == ("run-3", "run-4")  # not the run it is for
        assert h.cost_floors([cell("cccc")], but="none").noise == {}
        assert h.cost_floors([cell("aaaa", scope="engine")], but="none").noise == {}
        unkeyed = dataclasses.replace(cell("aaaa"), spec_key=None)  # counted before it was kept
        assert "do not record" in h.cost_floors([unkeyed], but="none").note
        only = h.cost_floors([cell("aaaa")], but="none", last=2)
        assert only.runs[name] == ("run-1", "run-2")  # the latest two


def test_a_version_2_history_gains_the_host_and_count_columns(tmp_path: Path) -> None:
    root = tmp_path / "results"
    root.mkdir()
    lines = history_module._SCHEMA.splitlines()
    v2 = [
        line
        for line in lines
        if "v3:" not in line and "v4:" not in line and "cost_by_spec" not in line
    ]
    identity = method.identity()
    old_key = "0123456789ab"  # as version 2 computed it, before cpu_features
    with sqlite3.connect(history_path(root)) as db:
        for statement in "\n".join(v2).split(";\n"):
            if statement.strip():
                db.execute(statement)
        db.execute("INSERT INTO meta(key, value) VALUES ('schema_version', '2')")
        db.execute(
            "INSERT INTO runs(run_id, lab, status, kind, policy, path, host_fingerprint, "
            "hostname, method, method_key) VALUES ('old', 'l', 'ok', 'native', '{}', 'old', "
            "'fp1', 'box1', ?, ?)",
            (json.dumps(identity), old_key),
        )
        db.execute(
            "INSERT INTO time_samples(run_id, comparison, column, build, config, step, "
            "repeat, qps, method_key) VALUES ('old', 'c', 'a', 'b', 'd', 's', 1, 10.0, ?)",
            (old_key,),
        )
    db.close()
    with History(root) as h:
        (point,) = h.series("l", lane="time")[0].points
        assert point.host == "fp1" and point.hostname == "box1"  # the run's, filled in
        assert point.method == method.key(identity)  # keys computed as now
        assert h.runs("l")[0].method == identity
    with sqlite3.connect(history_path(root)) as db:
        assert db.execute("SELECT value FROM meta").fetchall() == [("4",)]
        columns = {r[1] for r in db.execute("PRAGMA table_info(cost_samples)")}
        assert {"count_key", "scope", "build_key", "spec_key"} <= columns
    db.close()


def test_a_replay_taken_from_the_count_store_is_pooled_once(tmp_path: Path) -> None:
    """A run whose replays were taken from the store holds the same counts as the run
    that counted them: the floor pools them where they were counted, once."""
    root = tmp_path / "results"
    _runs(root, tmp_path, 0.01, "aaaa", 0)
    for path in (root / "run-2" / "cost").glob("*/r*.json"):
        replay = json.loads(path.read_text())
        replay["reused"] = {"entry": "k/e", "run": "run-0", "column": None, "replay": 1}
        path.write_text(json.dumps(replay))
    assert reindex(root) == []
    with History(root) as h:
        floor = h.cost_floors([cell("aaaa")], but="none")
        assert floor.runs[cell("aaaa").name] == ("run-0", "run-1")
