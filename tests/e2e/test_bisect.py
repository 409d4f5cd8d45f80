"""dbregress bisect with real builds: an ordered list whose first bad build is known
(RocksDB 10.2 spends 8-14% more per operation than 7.10 in the read steps, counted), and
PostgreSQL user builds with a known server-side cost per response, one range holding an
improvement then a regression."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest

from tests.e2e.conftest import assert_no_process_mentions, dbregress, start_dbregress, wait_for
from tests.fixtures.userbuild import build_library, postgres_basedir, wrap_postgres

pytestmark = pytest.mark.engine

# two counting replays a build: RocksDB's readrandom counts repeat to 0.0x%, and the
# builds differ by 8-14%
SIZES = ["--size", "keys=10000", "--size", "seconds=0.3", "--size", "warmup_s=0.1"]
SMALL = [*SIZES, "--replays", "2"]
# the Insert Benchmark at the sizes of tests/e2e/test_cost_regression.py
PG_SIZES = [
    *("--size", "load_rows=3000", "--size", "write_rows=600", "--size", "query_seconds=0.3"),
    *("--size", "warmup_s=0.1", "--size", "cleanup_wait_s=0"),
]


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
    # progress lines, off a terminal: the ends built first, then a line per build and
    # per point
    lines = [ln for ln in out.stderr.splitlines() if ln.startswith("bisect [")]
    assert "building the good end 1/5 rocksdb@7.10.2" in lines[0]
    assert "building the bad end 5/5 rocksdb@10.2.1" in lines[2]
    assert sum(" building " in ln for ln in lines) == 4  # b00 and b04, then b02 and b03
    assert sum(": measuring " in ln for ln in lines) == 2


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


def test_ctrl_c_then_resume_reuses_every_finished_run(
    tmp_path: Path, workdir: Path, launched: list
) -> None:
    builds = ",".join(["rocksdb@7.10.2"] * 3 + ["rocksdb@10.2.1"] * 2)
    args = ["bisect", "--builds", builds, "--step", "readrandom", *SMALL]
    proc = start_dbregress(launched, *args, cwd=tmp_path, workdir=workdir)

    def second_point_started() -> bool:
        found = list((tmp_path / "results").glob("bisect-*/bisect.json"))
        if not found:
            return False
        state = json.loads(found[0].read_text())
        return len(state["points"]) == 1 and state.get("current") is not None

    wait_for(second_point_started, 600, "the bisection's second point")
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert "dbregress bisect --resume" in err
    assert_no_process_mentions(str(workdir))
    (root,) = (tmp_path / "results").glob("bisect-*")
    runs_before = sorted(p.name for p in (root / "runs").iterdir() if p.is_dir())
    assert len(runs_before) == 2  # the finished point's run and the interrupted one's
    assert (root / "runs" / "history.sqlite").is_file()  # the bisection's own history

    out = dbregress("bisect", "--resume", "latest", cwd=tmp_path, workdir=workdir)
    assert out.returncode == 0, out.stderr
    assert "reusing run" in out.stderr and "resuming the interrupted run" in out.stderr
    assert "first bad build: rocksdb@10.2.1 (last good: rocksdb@7.10.2), slower" in out.stdout
    again = sorted(p.name for p in (root / "runs").iterdir() if p.is_dir())
    assert again == runs_before  # no new run
    record = json.loads((root / "bisect.json").read_text())
    assert [p["run"] for p in record["points"]] == runs_before
    assert record["current"] is None


def test_an_improvement_then_a_regression_names_the_regression(
    tmp_path: Path, workdir: Path
) -> None:
    """PostgreSQL 17.2 user builds whose server adds a loop to every send() (issue 51's
    case): +1000 iterations (the good end), plain 17.2 twice, +500, +2000 (the bad end).
    The first point, plain 17.2, is faster than the good end; a walk that re-based on it
    judged +500 against plain, called it slower and named it "first bad", although it
    is faster than the good end. Judged against the good end, +500 is faster too, and
    the answer is +2000, with the range's changes both ways said."""
    base = postgres_basedir("17.2.0")
    taxed = {
        n: wrap_postgres(base, workdir / f"pg-send{n}", build_library(workdir / f"lib{n}", n))
        for n in (1000, 500, 2000)
    }
    specs = [f"postgres@{taxed[1000]}", "postgres@17.2.0", "postgres@17.2.0"]
    specs += [f"postgres@{taxed[500]}", f"postgres@{taxed[2000]}"]
    out = dbregress(
        "bisect",
        "--builds",
        ",".join(specs),
        "--step",
        "qp100",
        "--config",
        "ci",
        *PG_SIZES,
        "--replays",
        "2",
        cwd=tmp_path,
        workdir=workdir,
    )
    assert out.returncode == 0, out.stderr
    assert f"first bad build: {specs[4]} (last good: {specs[3]}), slower" in out.stdout
    assert "changes both ways" in out.stdout and "--all-changes" in out.stdout
    (root,) = (tmp_path / "results").glob("bisect-*")
    record = json.loads((root / "bisect.json").read_text())
    first, second = record["points"]
    assert first["mid_vs_lo"]["word"] == "faster"  # plain 17.2 against +1000
    assert second["mid"] == specs[3] and second["mid_vs_good"]["word"] == "faster"
    assert record["other_way"] == ["postgres@17.2.0", specs[3]]
    # every change of the same range: the count store (beside the bisection, in the same
    # results folder) gives back every build's counts, so its runs count nothing anew.
    # +1000 -> plain is an improvement, plain -> +500 and +500 -> +2000 regressions, and
    # the second plain 17.2 is the same build as the first: no change there
    out = dbregress(
        "bisect",
        "--builds",
        ",".join(specs),
        "--step",
        "qp100",
        "--config",
        "ci",
        *PG_SIZES,
        "--replays",
        "2",
        "--all-changes",
        "--min",
        "0.5%",
        cwd=tmp_path,
        workdir=workdir,
    )
    assert out.returncode == 0, out.stderr
    (every,) = [p for p in (tmp_path / "results").glob("bisect-*") if p != root]
    record = json.loads((every / "bisect.json").read_text())
    changes = [(c["build"], c["last_good"], c["direction"]) for c in record["changes"]]
    assert changes == [
        (specs[1], specs[0], "faster"),
        (specs[3], specs[2], "slower"),
        (specs[4], specs[3], "slower"),
    ], out.stdout
    for c in record["changes"]:
        assert c["ci"][0] <= c["ratio"] <= c["ci"][1] and c["share"] is not None
    assert record["counted"] == 5 and "the named changes explain" in out.stdout
