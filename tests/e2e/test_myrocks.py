"""MyRocks through the command line, with Debian's MariaDB and its MyRocks plugin
(mariadb-plugin-rocksdb): the microbenchmarks' post-write cleanup uses the variables
MariaDB's MyRocks has, the steps after it run, and the loadgen reads its block cache's
state."""

from __future__ import annotations

from pathlib import Path

import pytest

from dbregress.analysis import state
from dbregress.benchmarks.micro import plan
from dbregress.lab.file import MicroSizes
from tests.e2e.conftest import dbregress, run_record, step_results

pytestmark = pytest.mark.engine
SIZES = MicroSizes(tables=1, rows=2000, seconds=0.3, reads_before_writes=False)
LAB = """placement = "same"
warmup_job = false
benchmark = "micro"
[[column]]
label = "myr"
build = "mariadb@system"
config = "myrocks"
[micro]
tables = 1
rows = 2000
seconds = 0.3
reads_before_writes = false
cleanup_wait_s = 0
"""


def test_mariadb_myrocks_micro(tmp_path: Path, workdir: Path) -> None:
    (tmp_path / "lab.toml").write_text(LAB)
    out = dbregress("run", "lab.toml", cwd=tmp_path, workdir=workdir)
    assert out.returncode == 0, out.stderr
    run, record = run_record(tmp_path)
    assert "MariaDB" in record["builds"]["myr"]["version_string"]
    by_step = step_results(run, "myr/r1")
    expected = [p.name for p in plan(SIZES)]
    assert list(by_step) == expected
    after = expected[expected.index("cleanup") + 1 :]
    assert after and "point-query" in after
    for name, r in by_step.items():
        assert r["status"] == "ok", (name, r.get("error"))
    for name in after:
        assert by_step[name]["q"]["value"] > 0, name
    # the state of its block cache, by its RocksDB's tickers (SHOW GLOBAL STATUS): after
    # the cleanup's flush, every point query looks up a data block, and the table fits
    stats = by_step["point-query"]["engine_stats"]["statistics"]
    hits, misses = stats[state.MYROCKS_HITS], stats[state.MYROCKS_MISSES]
    assert hits >= by_step["point-query"]["q"]["count"] * 0.9 and misses <= hits, stats
    found = state.of_stats(by_step["point-query"]["engine_stats"], 1)
    assert found is not None and found.kind == state.MYROCKS
    # MariaDB's MyRocks logs its combined memtable flush and L0 compaction
    assert "RocksDB: Manual memtable and L0 flush." in (run / "myr/r1/server.log").read_text()
