"""kv step plans and specs (valid against the loadgen's schema) and db_bench's flags."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from dbregress.benchmarks import kv
from dbregress.lab.file import KV_STEPS, KvSizes
from dbregress.loadgen.client import SPEC_VERSION
from dbregress.model import spec_schema

SCHEMA = json.loads((Path(__file__).parents[2] / "schema/step-spec.schema.json").read_text())
CONN: dict[str, Any] = {
    "driver": "rocksdb",
    "library": "/cache/rocksdb/10.2.1/librocksdbjni-linux64.so",
    "version": "10.2.1",
    "db_path": "/var/tmp/dbregress/run/col-r1/db",
    "options": {"cache_mb": 600, "cache_type": "lru", "bloom_bits": 10, "direct_io": False},
}
SIZES = KvSizes(keys=50_000, threads=4, seconds=30, short_seconds=5)


def test_every_kv_step_spec_is_valid() -> None:
    plans = kv.plan(SIZES)
    assert [p.name for p in plans] == list(KV_STEPS)
    for p in plans:
        spec = {**kv.step_spec(CONN, p, SIZES.threads, 7), "spec_version": SPEC_VERSION}
        jsonschema.validate(spec, SCHEMA)
        assert spec["workload"] == {"kind": "kv", "step": p.step, **p.section}
        assert spec["workload"]["keys"] == 50_000


def test_step_sizes() -> None:
    plans = {p.name: p for p in kv.plan(SIZES)}
    fill = plans["fillseq"]
    assert (fill.work, fill.duration_s) == (50_000, 0.0)
    # without a WAL by the spec's own default for fillseq, read from the generated schema
    wal = spec_schema.workload("kv")["disable_wal"]
    assert "disable_wal" not in fill.section and "fillseq" in wal["description"], wal
    assert kv.step_spec(CONN, fill, 4, 1)["clients"] == 1
    assert plans["revrange"].duration_s == 5 and plans["revrange"].section["duration_s"] == 5
    assert plans["revrange"].section["range_len"] == 10
    some = plans["overwritesome"]
    assert some.work == 5_000 and some.section["overwrite_fraction"] == 0.1
    assert "duration_s" not in some.section
    flush = plans["flush_mt_l0"]
    assert not flush.reported and kv.step_spec(CONN, flush, 4, 1)["clients"] == 1
    for name in ("readrandom", "fwdrange", "readwhilewriting", "overwriteandwait"):
        assert plans[name].duration_s == 30 and plans[name].section["duration_s"] == 30
        assert plans[name].reported and kv.step_spec(CONN, plans[name], 4, 1)["clients"] == 4
    assert plans["readwhilewriting"].section["writer_mb_per_s"] == 2.0
    assert "range_len" not in plans["readwhilewriting"].section
    assert plans["fwdrangewhilewriting"].section["range_len"] == 10
    assert "writer_mb_per_s" not in plans["readrandom"].section


def test_plan_follows_the_lab_subset() -> None:
    sizes = KvSizes(keys=10, steps=("fillseq", "readrandom"))
    assert [p.name for p in kv.plan(sizes)] == ["fillseq", "readrandom"]


def _flags(args: list[str]) -> dict[str, str]:
    assert all(a.startswith("--") and "=" in a for a in args)
    return dict(a[2:].split("=", 1) for a in args)


OPTIONS: dict[str, Any] = {
    "cache_mb": 600,
    "cache_type": "hyper_clock",
    "block_size": 8192,
    "bloom_bits": 9.5,
    "compression": "none",
    "direct_io": True,
    "write_buffer_mb": 64,
    "max_background_jobs": 2,
    "level0_file_num_compaction_trigger": 4,
    "max_bytes_for_level_base_mb": 256,
    "target_file_size_base_mb": 64,
    "sync": False,
}


def test_db_bench_fillseq() -> None:
    flags = _flags(kv.db_bench_args("fillseq", SIZES, OPTIONS, "/tmp/db"))
    assert flags["benchmarks"] == "fillseq" and flags["db"] == "/tmp/db"
    assert (flags["num"], flags["key_size"], flags["value_size"]) == ("50000", "20", "400")
    assert (flags["threads"], flags["use_existing_db"], flags["disable_wal"]) == (
        "1",
        "false",
        "true",
    )
    assert "duration" not in flags
    assert flags["cache_size"] == str(600 * 2**20)
    assert flags["cache_type"] == "hyper_clock_cache"
    assert (flags["block_size"], flags["bloom_bits"]) == ("8192", "9.5")
    assert flags["compression_type"] == "none"
    assert flags["use_direct_reads"] == flags["use_direct_io_for_flush_and_compaction"] == "true"
    assert flags["write_buffer_size"] == str(64 * 2**20)
    assert flags["max_bytes_for_level_base"] == str(256 * 2**20)
    assert "block_align" not in flags


@pytest.mark.parametrize(
    ("step", "benchmarks", "extra"),
    [
        ("revrange", "seekrandom", {"duration": "5", "reverse_iterator": "true"}),
        ("overwritesome", "overwrite", {"writes": "5000"}),
        ("flush_mt_l0", "flush,waitforcompaction,compact0,waitforcompaction", {"threads": "1"}),
        ("readrandom", "readrandom", {"duration": "30", "threads": "4"}),
        ("fwdrange", "seekrandom", {"seek_nexts": "10", "reverse_iterator": "false"}),
        (
            "revrangewhilewriting",
            "seekrandomwhilewriting",
            {"benchmark_write_rate_limit": str(2 * 2**20), "reverse_iterator": "true"},
        ),
        ("fwdrangewhilewriting", "seekrandomwhilewriting", {"seek_nexts": "10"}),
        ("readwhilewriting", "readwhilewriting", {"benchmark_write_rate_limit": "2097152"}),
        ("overwriteandwait", "overwrite,waitforcompaction", {"duration": "30"}),
        ("overwrite", "overwrite", {"duration": "30"}),
    ],
)
def test_db_bench_steps(step: str, benchmarks: str, extra: dict[str, str]) -> None:
    flags = _flags(kv.db_bench_args(step, SIZES, OPTIONS, "/tmp/db"))
    assert flags["benchmarks"] == benchmarks
    assert (flags["use_existing_db"], flags["disable_wal"]) == ("true", "false")
    assert {k: flags.get(k) for k in extra} == extra


ROCKSDB_OPTIONS = next(
    e["properties"]["options"]["properties"]
    for e in SCHEMA["properties"]["engine"]["oneOf"]
    if e["properties"]["driver"]["const"] == "rocksdb"
)


def _mb(value: int) -> str:
    return str(value * 2**20)


def _bool(value: bool) -> str:
    return "true" if value else "false"


# each rocksdb option the schema gives a default, as the db_bench flags it becomes
# (None: the flag is left out)
AS_DB_BENCH: dict[str, list[tuple[str, Callable[[Any], str | None]]]] = {
    "cache_type": [("cache_type", lambda v: f"{v}_cache")],
    "block_size": [("block_size", str)],
    "bloom_bits": [("bloom_bits", lambda v: f"{v:g}")],
    "compression": [("compression_type", str)],
    "direct_io": [("use_direct_reads", _bool), ("use_direct_io_for_flush_and_compaction", _bool)],
    "block_align": [("block_align", lambda v: "true" if v else None)],
    "write_buffer_mb": [("write_buffer_size", _mb)],
    "max_background_jobs": [("max_background_jobs", str)],
    "level0_file_num_compaction_trigger": [("level0_file_num_compaction_trigger", str)],
    "max_bytes_for_level_base_mb": [("max_bytes_for_level_base", _mb)],
    "target_file_size_base_mb": [("target_file_size_base", _mb)],
    "sync": [("sync", _bool)],
}


def test_db_bench_defaults_follow_the_schema() -> None:
    """An option the lab leaves out runs db_bench as the loadgen runs it: with the
    schema's default."""
    defaults = {k: p["default"] for k, p in ROCKSDB_OPTIONS.items() if "default" in p}
    assert set(defaults) == set(AS_DB_BENCH)  # a default added to the schema needs a row
    flags = _flags(kv.db_bench_args("readrandom", SIZES, {}, "/tmp/db"))
    for key, default in defaults.items():
        for flag, text in AS_DB_BENCH[key]:
            assert flags.get(flag) == text(default), (key, default, flag)


def test_db_bench_defaults_and_errors() -> None:
    flags = _flags(kv.db_bench_args("readrandom", SIZES, {"block_align": True}, "/tmp/db"))
    assert flags["cache_type"] == "lru_cache" and flags["bloom_bits"] == "10"
    assert flags["block_align"] == "true" and flags["sync"] == "false"
    with pytest.raises(ValueError, match="no db_bench equivalent"):
        kv.db_bench_args("l.i0", SIZES, {}, "/tmp/db")
