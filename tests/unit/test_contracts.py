"""The step specs the Python side writes validate against the loadgen's schema."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema

from dbregress.benchmarks.insert import engine_sizes, plan, step_spec
from dbregress.lab import InsertSizes
from dbregress.loadgen import SPEC_VERSION

SCHEMA = json.loads((Path(__file__).parents[2] / "schema/step-spec.schema.json").read_text())
CONN = {
    "driver": "postgres",
    "socket_dir": "/tmp/x",
    "port": 5432,
    "user": "postgres",
    "database": "postgres",
}


def test_every_insert_step_spec_is_valid() -> None:
    plans = plan(InsertSizes(clients=3, load_rows=1000, write_rows=100, query_seconds=2))
    assert [p.name for p in plans][:5] == ["l.i0", "l.x", "l.i1", "l.i2", "cleanup"]
    for p in plans:
        spec = {**step_spec(CONN, p, 3, 7), "spec_version": SPEC_VERSION, "wait_before_close": True}
        jsonschema.validate(spec, SCHEMA)
    q = {p.name: p for p in plans}["qp500"]
    assert q.step == "qp" and q.section["insert_rate"] == 500


def test_engine_sizes_fit_the_data_and_the_host() -> None:
    small = engine_sizes(InsertSizes(load_rows=1000, write_rows=100), 24 * 2**30)
    assert small.cache_mb == 128 and small.wal_mb == 1024
    big = engine_sizes(InsertSizes(clients=8, load_rows=10_000_000), 24 * 2**30)
    assert big.cache_mb == 6 * 1024  # capped at a quarter of memory


def test_every_micro_step_spec_is_valid() -> None:
    from dbregress.benchmarks import micro
    from dbregress.lab import MicroSizes

    mysql = {"driver": "mysql", "socket": "/tmp/s", "user": "root", "database": "test"}
    for p in micro.plan(MicroSizes(tables=2, rows=1000, seconds=1)):
        for conn in (CONN, mysql):
            spec = {**micro.step_spec(conn, p, 2, 7), "spec_version": SPEC_VERSION}
            jsonschema.validate(spec, SCHEMA)
