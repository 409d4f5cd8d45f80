"""One step prepared for every mode (prepare.step_spec): a timed job, an interleaved
turn, a counting replay and explain's profile differ only in the fields each mode names,
and every one is a spec the loadgen's schema accepts."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from dbregress import benchmarks
from dbregress.benchmarks import insert
from dbregress.engines.null import NullEngine
from dbregress.execution import prepare
from dbregress.execution.prepare import COUNT, INTERLEAVED, PROFILE, TIMED, Window
from dbregress.lab.file import Lab, load_lab
from dbregress.loadgen.client import SPEC_VERSION
from tests.unit.test_contracts import CONN

SCHEMA = json.loads((Path(__file__).parents[2] / "schema" / "step-spec.schema.json").read_text())
LABS = {
    "insert": "[insert]\nload_rows = 1000\nwrite_rows = 200\nquery_seconds = 2\nwarmup_s = 0.5\n",
    "kv": "[kv]\nkeys = 1000\nseconds = 2\nshort_seconds = 1\nwarmup_s = 0.5\n",
    "micro": "[micro]\nrows = 1000\nseconds = 1\n",
}
BUILDS = {"insert": "postgres@17.2.0", "kv": "rocksdb@10.2.1", "micro": "postgres@17.2.0"}


class Connected(NullEngine):
    def __init__(self, connection: dict[str, Any]) -> None:
        self._connection = connection

    def connection(self) -> dict[str, Any]:
        return self._connection


def lab_of(tmp_path: Path, family: str) -> Lab:
    path = tmp_path / f"{family}.toml"
    path.write_text(
        f'name = "modes"\nbenchmark = "{family}"\nslice_ms = 50\n'
        f'[[column]]\nlabel = "a"\nbuild = "{BUILDS[family]}"\n'
        f'[[column]]\nlabel = "b"\nbuild = "{BUILDS[family]}"\ninject_slowdown = 0.1\n'
        + LABS[family]
    )
    return load_lab(path)


def connection(family: str) -> dict[str, Any]:
    if family == "kv":
        return {
            "driver": "rocksdb",
            "library": "/x/librocksdb.so",
            "version": "10.2.1",
            "db_path": "/x/db",
            "options": {"cache_mb": 8, "cache_type": "lru", "bloom_bits": 10, "direct_io": False},
        }
    return CONN


def valid(spec: dict[str, Any]) -> None:
    jsonschema.validate(
        {**spec, "spec_version": SPEC_VERSION, "handshake": True, "wait_before_close": True},
        SCHEMA,
    )


@pytest.mark.parametrize("family", ["insert", "kv", "micro"])
def test_every_mode_of_every_step_differs_only_in_its_named_fields(
    tmp_path: Path, family: str
) -> None:
    lab = lab_of(tmp_path, family)
    comp = lab.comparisons[0]
    engine = Connected(connection(family))
    column = comp.columns[1]
    for index, plan in enumerate(benchmarks.plans(comp), start=1):
        timed = prepare.step_spec(lab, comp, column, engine, index, plan, TIMED)
        assert timed["inject_slowdown"] == 0.1 and timed["seed"] == lab.seed * 1000 + index
        valid(timed)
        assert prepare.step_spec(lab, comp, column, engine, index, plan, PROFILE) == timed
        turn = prepare.step_spec(lab, comp, column, engine, index, plan, INTERLEAVED)
        assert {k: v for k, v in turn.items() if k != "slices"} == timed
        assert turn["slices"] == ({"ms": 50} if plan.duration_s else turn["slices"])
        valid(turn)
        window = Window(skip_ops=10, ops=5, q_per_s=123.4567, warm_ops=5, until_hit_rate=0.9)
        counted = prepare.step_spec(lab, comp, column, engine, index, plan, COUNT, window)
        valid(counted)
        extra = {k for k in counted if counted[k] != timed.get(k)}
        assert extra <= {"window", "settle_first", "workload"}
        if counted["workload"] != timed["workload"]:  # only the lockstep flag
            assert {**timed["workload"], "lockstep": True} == counted["workload"]
            assert plan.step in insert.LOCKSTEP_STEPS
        assert counted["window"]["q_per_s"] == 123.457


def test_a_window_is_counted_only_in_the_count_mode(tmp_path: Path) -> None:
    lab = lab_of(tmp_path, "kv")
    comp = lab.comparisons[0]
    plan = benchmarks.plans(comp)[0]
    with pytest.raises(ValueError, match="count mode only"):
        prepare.step_spec(
            lab, comp, comp.columns[0], Connected(connection("kv")), 1, plan, TIMED, Window(1, 1, 1)
        )


def test_the_block_cache_probe_is_for_one_client_only() -> None:
    window = Window(skip_ops=100, ops=10, q_per_s=5.0, until_hit_rate=0.95)
    assert window.to_spec(1)["until_hit_rate"] == 0.95 and "probe_every" in window.to_spec(1)
    assert "until_hit_rate" not in window.to_spec(4)


def test_fixed_work_slices_use_the_loadgens_rows_per_commit() -> None:
    """The rows per Q call the interleaved slices assume are the loadgen's defaults, as
    its spec schema states them."""
    (workload,) = [
        w for w in SCHEMA["properties"]["workload"]["oneOf"] if "rows_per_commit" in w["properties"]
    ]
    props = workload["properties"]["rows_per_commit"]["description"]
    stated = {step: int(n) for n, step in re.findall(r"(\d+) \((l\.i\d)\)", props)}
    assert stated == insert.ROWS_PER_COMMIT
