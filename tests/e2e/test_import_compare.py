"""`dbregress import`, `report` and `compare` as a user runs them, on the saved outputs of
sysbench and db_bench (tests/data/imports): no engine starts."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from tests.inprocess import dbregress_here

DATA = Path(__file__).parents[1] / "data" / "imports"
DB_BENCH = [str(DATA / f"db_bench_{i}.txt") for i in (1, 2, 3)]


def dbregress(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return dbregress_here(cwd, *args)


def test_import_report_compare_round_trip(tmp_path: Path) -> None:
    for name in ("last-year", "this-year"):
        out = dbregress(tmp_path, "import", "db_bench", *DB_BENCH, "--label", "v7", "--as", name)
        assert out.returncode == 0, out.stderr
        assert f"results/{name}" in out.stdout
    report = dbregress(tmp_path, "report", "this-year")
    assert report.returncode == 0, report.stderr
    assert "| fillseq | ops | 323,326 |" in report.stdout  # the median of the three files
    assert (tmp_path / "results" / "this-year" / "report.md").is_file()

    # an import records no host: a gate does not take two of them for one host class
    gate = ("--fail-on", "slower:time")
    out = dbregress(tmp_path, "compare", "last-year", "this-year", *gate)
    assert out.returncode == 2, out.stderr
    assert "NOT JUDGED, A and B's host is not recorded (an import)" in out.stderr
    # the same files twice: fillseq is `same`, readrandom (three repeats, spread) is
    # undecided, so a gate that judges it fails closed and names it
    out = dbregress(tmp_path, "compare", "last-year", "this-year", *gate, "--across-hosts")
    assert out.returncode == 2, out.stderr
    assert "| fillseq | B:v7 | 1.00 = [" in out.stdout
    assert "db_bench/readrandom (B:v7, time): undecided" in out.stderr
    let = dbregress(
        tmp_path,
        "compare",
        "last-year",
        "this-year",
        "--fail-on",
        "slower:time",
        "--allow-undecided",
        "--across-hosts",
    )
    assert let.returncode == 0, let.stderr
    assert "fail-on slower:time: passed with --allow-undecided" in let.stderr
    as_json = dbregress(tmp_path, "compare", "last-year", "this-year", "--format", "json")
    steps = json.loads(as_json.stdout)["comparisons"][0]["columns"][0]["steps"]
    assert [(s["step"], s["ratio"]) for s in steps] == [("fillseq", 1.0), ("readrandom", 1.0)]


def test_compare_fails_on_a_slower_step(tmp_path: Path) -> None:
    # Four repeats a side: the fewest with which a rank test can reach p < 0.05.
    fast = [str(DATA / "sysbench_oltp_point_select.txt")] * 4
    slow = [str(DATA / f"sysbench_cpu_{i}.txt") for i in (1, 2, 1, 2)]
    for name, files in (("fast", fast), ("slow", slow)):
        args = ("import", "sysbench", *files, "--step", "work", "--label", name, "--as", name)
        assert dbregress(tmp_path, *args).returncode == 0
    gate = ("--fail-on", "slower:time", "--across-hosts")  # imports: no host recorded
    out = dbregress(tmp_path, "compare", "fast", "slow", *gate)
    assert out.returncode == 1, out.stdout + out.stderr
    # the summary names the lane that found it
    assert (
        "fail-on slower:time: FAILED, 1 step(s) slower: sysbench/work (B:slow, time)" in out.stderr
    )


def test_bad_input_is_named(tmp_path: Path) -> None:
    garbled = tmp_path / "run1.txt"
    garbled.write_text((DATA / "sysbench_cpu_1.txt").read_text().replace("4186.60", "lots"))
    out = dbregress(tmp_path, "import", "sysbench", str(garbled), "--as", "x")
    assert out.returncode == 2
    assert "Error: run1.txt, line 15: cannot read 'events per second:'" in out.stderr
    assert not (tmp_path / "results" / "x").exists()
    out = dbregress(tmp_path, "import", "fio", str(garbled), "--as", "x")
    assert (out.returncode, out.stderr.strip()) == (
        2,
        "Error: unknown KIND 'fio'; one of: sysbench, db_bench, iibench, tsv",
    )
    out = dbregress(tmp_path, "compare", "x", "y")
    assert out.returncode == 2 and "'x' is not a run folder" in out.stderr
