"""dbregress bisect with real builds: an ordered list whose first bad build is known
(RocksDB 10.2 spends 8-14% more per operation than 7.10 in the read steps, counted)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.e2e.conftest import dbregress

pytestmark = pytest.mark.engine

SMALL = ["--size", "keys=20000", "--size", "seconds=0.5", "--size", "warmup_s=0.2"]


def test_bisect_finds_the_first_bad_build_of_a_list(tmp_path: Path, workdir: Path) -> None:
    builds = ",".join(["rocksdb@7.10.2"] * 3 + ["rocksdb@10.2.1"] * 2)
    out = dbregress(
        "bisect", "--builds", builds, "--step", "readrandom", *SMALL, cwd=tmp_path, workdir=workdir
    )
    assert out.returncode == 0, out.stderr
    assert "first bad build: rocksdb@10.2.1 (last good: rocksdb@7.10.2), slower" in out.stdout
    (root,) = (tmp_path / "results").glob("bisect-*")
    record = json.loads((root / "bisect.json").read_text())
    assert record["first_bad"] == "rocksdb@10.2.1" and record["direction"] == "slower"
    # five builds, b03 the first bad: b02 against b00 and b04 (same: lo = b02), then
    # b03 against b02 and b04 (slower: hi = b03), and b02, b03 are neighbours
    first, second = record["points"]
    assert (first["mid_vs_lo"]["word"], second["mid_vs_lo"]["word"]) == ("same", "slower")
    assert second["mid_vs_hi"]["word"] == "same"  # 10.2 against 10.2
    assert record["last_good"] == "rocksdb@7.10.2"
    for p in record["points"]:
        assert p["hi_vs_lo"]["word"] == "slower"  # 10.2 against 7.10, both counted
        assert (root / "runs" / p["run"] / "cost" / "lane.json").is_file()
    assert "| same |" in out.stdout and "| slower |" in out.stdout


def test_bisect_says_what_to_fix(tmp_path: Path, workdir: Path) -> None:
    out = dbregress(
        "bisect",
        "rocksdb@10.2.1",
        "rocksdb@7.10.2",
        "--step",
        "readrandom",
        cwd=tmp_path,
        workdir=workdir,
    )
    assert out.returncode == 2 and "give the good (older) version first" in out.stderr
    out = dbregress(
        "bisect", "rocksdb@7.10.2", "rocksdb@99.0.0", "--step", "x", cwd=tmp_path, workdir=workdir
    )
    assert out.returncode == 2 and "dbregress versions rocksdb" in out.stderr
