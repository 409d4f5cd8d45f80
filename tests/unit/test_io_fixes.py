"""Each column of an IO-bound comparison is set against fio's reads only where it reads
as fio did: fio reads with the base column's read pattern, and a column of another kind
of read (a buffered `iobuf` column beside an O_DIRECT `iodir` base, or the reverse) gets
no IO efficiency, with the reason, and its row says how it reads. Each column's kind of
read comes from the settings its servers ran with (run.json's jobs), and io_baseline.py
records it with the baseline, so a merged `dbregress compare` run keeps it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from dbregress.analysis import fio_baseline as fb
from dbregress.analysis import io_efficiency as io
from dbregress.engines.base import EngineOptions, Sizes
from dbregress.engines.rocksdb import RocksdbEngine
from dbregress.execution import io_baseline
from dbregress.lab.file import load_lab
from dbregress.provision import Build, BuildSpec
from dbregress.report import io_tables
from dbregress.store.run import RunWriter
from tests.unit.test_io_buffered import _buffered, _engine
from tests.unit.test_io_efficiency import _baseline, _result, _steps


def _job(direct: bool | None, build: str = "rocksdb@10.2.1") -> dict[str, Any]:
    settings = {} if direct is None else {"direct_io": "true" if direct else "false"}
    return {"build": build, "settings": settings}


def _mixed(baseline: dict[str, Any], a: bool, b: bool) -> dict[str, Any]:
    """Base column a, column b, each reading with O_DIRECT or not, by its jobs' settings."""
    return {
        "comparisons": [{"name": "c", "benchmark": "kv", "labels": ["a", "b"]}],
        "device_baseline": {"c": baseline},
        "jobs": {"a/r1": _job(a), "a/r2": _job(a), "b/r1": _job(b), "b/r2": _job(b)},
    }


def _cells_fit(section: io.IoSection) -> None:
    """Every row of every format has as many cells as the header."""
    width = len(io_tables.header(section))
    table = [ln for ln in io_tables.markdown(section) if ln.startswith("| ")]
    assert table and all(ln.count(" | ") == width - 1 for ln in table), table
    page = io_tables.html(section, {})
    assert page is not None and all(len(r) == width for r in page["rows"])
    tsv = io_tables.tsv(section)
    rows = [ln for ln in tsv if ln.count("\t") and not ln.startswith("col-1\t")]
    assert rows and all(ln.count("\t") == width - 1 for ln in rows), rows


def test_a_buffered_column_beside_an_o_direct_base_gets_no_efficiency() -> None:
    steps = _steps(_engine(7600, 8000))  # RocksDB statistics: 8,000 SST reads
    (section,) = io.sections(_mixed(_baseline(), a=True, b=False), steps)
    base, buffered = section.row("a", "readrandom"), section.row("b", "readrandom")
    assert base is not None and buffered is not None
    assert not base.buffered and base.efficiency is not None and base.no_efficiency is None
    assert buffered.buffered  # its own kind of read, not fio's
    assert buffered.efficiency is None and buffered.predicted_efficiency is None
    assert buffered.no_efficiency == (
        "the column reads through the page cache (buffered), fio with O_DIRECT (the base "
        "column's read pattern): not the same kind of read, so no efficiency against fio's"
    )
    assert buffered.file_reads_per_op == pytest.approx(1.0)
    assert buffered.page_cache_hit_rate == pytest.approx(0.05)
    assert buffered.fio_page_cache_hit_rate is None  # fio's reads were not buffered
    assert buffered.reads_per_op == pytest.approx(0.95)  # its figures stay
    text = "\n".join(io_tables.markdown(section))
    assert f"- readrandom (b): no IO efficiency: {buffered.no_efficiency}" in text
    assert "| page-cache hits |" in text
    _cells_fit(section)
    found = io_tables.to_json(section)
    rows = {r["column"]: r for r in found["rows"]}
    assert rows["b"]["buffered"] is True and rows["b"]["io_efficiency"] is None
    assert rows["a"]["buffered"] is False


def test_an_o_direct_column_beside_a_buffered_base_gets_no_efficiency() -> None:
    steps = _steps(_engine(7600, 8000))
    (section,) = io.sections(_mixed(_buffered(), a=False, b=True), steps)
    base, direct = section.row("a", "readrandom"), section.row("b", "readrandom")
    assert base is not None and direct is not None
    assert base.buffered and base.efficiency is not None
    assert not direct.buffered and direct.efficiency is None
    assert direct.no_efficiency is not None
    assert direct.no_efficiency.startswith(
        "the column reads with O_DIRECT, fio through the page cache (buffered)"
    )
    assert direct.file_reads_per_op is None and direct.page_cache_hit_rate is None
    _cells_fit(section)


def test_columns_that_read_as_the_base_are_set_against_fio_as_before() -> None:
    steps = _steps(_result("readrandom", "get", 8000))
    (section,) = io.sections(_mixed(_baseline(), a=True, b=True), steps)
    for label in ("a", "b"):
        row = section.row(label, "readrandom")
        assert row is not None and row.efficiency == pytest.approx(8000 / 9884)


def test_a_column_whose_kind_of_read_is_not_recorded_gets_no_efficiency() -> None:
    record = _mixed(_baseline(), a=True, b=True)
    record["jobs"] = {"a/r1": _job(True), "b/r1": {"build": "rocksdb@10.2.1"}}  # no settings
    (section,) = io.sections(record, _steps(_result("readrandom", "get", 8000)))
    row = section.row("b", "readrandom")
    assert row is not None and row.efficiency is None
    assert row.no_efficiency is not None and "is not recorded" in row.no_efficiency
    assert section.row("a", "readrandom") is not None


def test_the_baselines_record_of_each_columns_read_wins_and_a_merged_run_keeps_it() -> None:
    baseline = _baseline(columns={"x": True, "y": False})
    merged: dict[str, Any] = {
        "comparisons": [{"name": "c", "benchmark": "kv", "labels": ["A:x", "B:y", "B:z"]}],
        "device_baseline_by_column": {"A:x": baseline, "B:y": baseline, "B:z": baseline},
        "jobs": {},
    }
    steps = {
        f"{label}/r{r}": [_result("readrandom", "get", 8000)]
        for label in ("A:x", "B:y", "B:z")
        for r in (1, 2)
    }
    (section,) = io.sections(merged, steps)
    x, y, z = (section.row(lb, "readrandom") for lb in ("A:x", "B:y", "B:z"))
    assert x is not None and x.efficiency is not None
    assert y is not None and y.efficiency is None and y.buffered
    assert y.no_efficiency is not None and "through the page cache" in y.no_efficiency
    # run B's column z: its run recorded no kind of read, and the merged record holds
    # only run A's jobs
    assert z is not None and z.efficiency is None
    assert z.no_efficiency is not None and "is not recorded" in z.no_efficiency


def test_each_engines_kind_of_read_follows_its_read_pattern() -> None:
    assert fb.reads_direct("postgres@17.2.0", {}) is False
    assert fb.reads_direct("rocksdb@10.2.1", {"direct_io": "true"}) is True
    assert fb.reads_direct("rocksdb@10.2.1", {"direct_io": "false"}) is False
    assert fb.reads_direct("rocksdb@10.2.1", {}) is False  # read_pattern's default
    flush = {"innodb_flush_method": "O_DIRECT_NO_FSYNC"}
    assert fb.reads_direct("mariadb@10.11.11", flush) is True
    assert fb.reads_direct("mysql@8.0.40", {"innodb_flush_method": "fsync"}) is False
    assert fb.reads_direct("null@1", {}) is None


@pytest.mark.parametrize("config", ["iobuf", "iodir"])
def test_rocksdbs_recorded_settings_give_its_read_patterns_kind(
    config: str, tmp_path: Path
) -> None:
    library = tmp_path / "librocksdb.so"  # never opened: the options are only parsed
    spec = BuildSpec.parse("rocksdb@10.2.1")
    build = Build(spec, tmp_path, "10.2.1", library=library, library_version="10.2.1")
    options = EngineOptions(
        workdir=tmp_path / "w",
        log_path=tmp_path / "log",
        config_name=config,
        settings={},
        sizes=Sizes(cache_mb=8, wal_mb=64, data_mb=100),
    )
    engine = RocksdbEngine(build, options)
    # the settings a job records (execute.py: settings_applied), read back
    recorded = fb.reads_direct(str(build.spec), engine.settings_applied())
    assert recorded == engine.read_pattern().direct == (config == "iodir")


LAB = """
name = "io"
benchmark = "kv"
[[column]]
label = "dir"
build = "rocksdb@10.2.1"
config = "iodir"
[[column]]
label = "buf"
build = "rocksdb@10.2.1"
config = "iobuf"
[kv]
keys = 1000
steps = ["fillseq", "readrandom"]
"""


def test_the_baseline_records_each_columns_kind_of_read_after_its_jobs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "io.toml").write_text(LAB)
    lab = load_lab(tmp_path / "io.toml")
    (comparison,) = lab.comparisons
    assert lab.io_bound(comparison)
    writer = RunWriter(tmp_path / "results", lab, {})
    # fio ran before the jobs (with the base's O_DIRECT pattern); the jobs have run
    entry = _baseline(before={"figures": {}, "command": ["fio"]}, after=None)
    writer.record["device_baseline"] = {comparison.name: entry}
    writer.record["jobs"] = {"dir/r1": _job(True), "buf/r1": _job(False)}  # type: ignore[typeddict-item]
    monkeypatch.setattr(io_baseline, "_run", lambda *a: {"error": "fio failed"})
    engine: Any = None  # an existing entry is not read from the engine again
    io_baseline.measure(lab, comparison, engine, tmp_path / "fio", writer, "after", print)
    stored = writer.record["device_baseline"][comparison.name]
    assert stored["columns"] == {"dir": True, "buf": False}
    assert fb.baseline_of(stored).columns == {"dir": True, "buf": False}
