"""`dbregress import` on what the real tools print on this machine, now: sysbench and
db_bench run at tiny sizes (a second or less each), their output is imported as a user
would, and the stored Q must be exactly the number the tool printed, read here on its
own with a regex. Then a published table of absolute QPS through `dbregress report`:
the relative values must be the table's own ratios.

No database engine is started (db_bench runs RocksDB inside itself, on a 20,000-key
scratch database), so these are not marked `engine`; a test whose tool is not installed
is skipped, naming the Debian package that has it (the Makefile's `debian` target
installs both)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.inprocess import dbregress_here

DATA = Path(__file__).parents[1] / "data" / "imports"
SYSBENCH = shutil.which("sysbench")
DB_BENCH = shutil.which("db_bench")
needs_sysbench = pytest.mark.skipif(
    SYSBENCH is None, reason="sysbench is not installed (apt-get install sysbench)"
)
needs_db_bench = pytest.mark.skipif(
    DB_BENCH is None, reason="db_bench is not installed (apt-get install rocksdb-tools)"
)
NUMBER = r"(\d+(?:\.\d+)?)"


def dbregress(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    out = dbregress_here(cwd, *args)
    assert out.returncode == 0, out.stdout + out.stderr
    return out


def tool(argv: list[str], output: Path, cwd: Path) -> str:
    """Runs a tool with its stdout and stderr saved into one file, as `> output 2>&1`
    would; returns what it printed."""
    with output.open("wb") as f:
        done = subprocess.run(argv, cwd=cwd, stdout=f, stderr=subprocess.STDOUT, timeout=120)
    printed = output.read_bytes().decode()
    assert done.returncode == 0, printed
    return printed


def stored_steps(tmp: Path, run: str, job: str) -> dict[str, dict[str, Any]]:
    """The stored step results of one job of an imported run, by step name."""
    files = sorted((tmp / "results" / run / job / "steps").glob("*.json"))
    loaded = [json.loads(f.read_text()) for f in files]
    return {r["step"]: r for r in loaded}


# sysbench 1.0.20: what each test prints as its rate, and the step it becomes.
SYSBENCH_TESTS = {
    "cpu": (["cpu", "--time=1", "--threads=1", "run"], rf"events per second:\s+{NUMBER}"),
    "memory": (
        ["memory", "--time=1", "run"],
        rf"Total operations:\s+\d+\s+\({NUMBER} per second\)",
    ),
    # the SQL report without a server: the MySQL driver's dry run
    "oltp_point_select": (
        ["oltp_point_select", "--db-driver=mysql", "--mysql-dry-run=on", "--time=1", "run"],
        rf"queries:\s+\d+\s+\({NUMBER} per sec\.\)",
    ),
}


@needs_sysbench
@pytest.mark.parametrize("test", sorted(SYSBENCH_TESTS))
def test_sysbench_q_is_the_rate_it_printed(tmp_path: Path, test: str) -> None:
    args, rate = SYSBENCH_TESTS[test]
    output = tmp_path / f"sb-{test}.txt"
    printed = tool([str(SYSBENCH), *args], output, tmp_path)
    if test == "oltp_point_select":  # the SQL tests are named by their command line
        printed = f"$ sysbench {' '.join(args)}\n{printed}"
        output.write_text(printed)
    (expected,) = re.findall(rate, printed)
    (events,) = re.findall(r"total number of events:\s+(\d+)", printed)

    dbregress(tmp_path, "import", "sysbench", output.name, "--as", "live")
    steps = stored_steps(tmp_path, "live", f"sb-{test}/r1")
    assert list(steps) == [test]
    q = steps[test]["q"]
    assert q["value"] == float(expected), (q, printed)
    if test == "oltp_point_select":
        assert (q["op"], q["unit"]) == ("query", "ops")
    else:  # the SQL test's count is its queries, not its events
        assert (q["op"], q["unit"], q["count"]) == ("event", "ops", int(events))


BENCH_LINE = re.compile(
    r"\s*(\w+)\s+:\s+[\d.]+ micros/op (\d+) ops/sec(?: [\d.]+ seconds (\d+) operations)?"
)


@needs_db_bench
def test_db_bench_q_of_each_step_is_its_ops_per_second(tmp_path: Path) -> None:
    benchmarks = ["fillseq", "readrandom"]
    argv = [
        str(DB_BENCH),
        f"--benchmarks={','.join(benchmarks)}",
        "--num=20000",
        f"--db={tmp_path / 'db'}",
        "--histogram=1",
    ]
    printed = tool(argv, tmp_path / "db_bench.txt", tmp_path)
    shutil.rmtree(tmp_path / "db", ignore_errors=True)
    # Its progress meter rewrites a line with carriage returns: each part is a line.
    found = [m for part in re.split(r"[\r\n]", printed) if (m := BENCH_LINE.match(part))]
    expected = {m.group(1): (float(m.group(2)), m.group(3)) for m in found}
    assert list(expected) == benchmarks, printed
    (version,) = re.findall(r"RocksDB:\s+version\s+(\S+)", printed)

    dbregress(tmp_path, "import", "db_bench", "db_bench.txt", "--label", "now", "--as", "live")
    steps = stored_steps(tmp_path, "live", "now/r1")
    assert list(steps) == benchmarks
    for name, (ops_per_sec, operations) in expected.items():
        q = steps[name]["q"]
        assert q["value"] == ops_per_sec, (name, q, printed)
        assert q["count"] == int(operations)
    assert steps["readrandom"]["q"]["op"] == "read"  # named by its histogram
    record = json.loads((tmp_path / "results" / "live" / "run.json").read_text())
    assert record["builds"]["now"]["version_string"] == f"RocksDB {version}"


# A published table of absolute QPS


def table(path: Path) -> tuple[list[str], dict[str, list[float | None]]]:
    """The table's column descriptions and, per step, its values (None for `-`), read
    here without the importer."""
    legend: list[str] = []
    rows: dict[str, list[float | None]] = {}
    for line in path.read_text().splitlines():
        if m := re.fullmatch(r"col-\d+\s*:\s*(.+)", line.strip()):
            legend.append(m.group(1))
        elif line.strip() and not line.startswith("col-"):
            *values, step = line.split("\t")
            rows[step] = [None if v == "-" else float(v) for v in values]
    return legend, rows


def by_hand(rows: dict[str, list[float | None]]) -> dict[str, list[float | None]]:
    """Each non-base column's value over the first column's, per step."""
    return {
        step: [v / base if v is not None and base is not None else None for v in others]
        for step, (base, *others) in rows.items()
    }


def shown(ratio: float | None) -> str:
    return "-" if ratio is None else f"{ratio:.2f}"  # as the report rounds a ratio


def test_a_tables_relative_qps_are_its_own_ratios(tmp_path: Path) -> None:
    source = DATA / "table.tsv"
    legend, rows = table(source)
    labels = [re.sub(r"[^\w.=+,:@-]+", "_", d) for d in legend]  # as folder names
    relative = by_hand(rows)
    assert relative["scan"][1] is None  # the third build has no scan: `-`
    dbregress(tmp_path, "import", "tsv", str(source), "--as", "table")

    tsv = dbregress(tmp_path, "report", "table", "--format", "tsv").stdout
    absolute, rel = tsv.split("tsv: relative QPS\n")
    assert [ln for ln in absolute.splitlines() if "\t" in ln][1:] == [
        "\t".join([*(f"{v:.0f}" if v is not None else "-" for v in values), step])
        for step, values in rows.items()
    ]
    assert f"Relative to: {labels[0]} ({legend[0]}, unknown)" in rel
    assert [ln for ln in rel.splitlines() if "\t" in ln] == [
        "col-1\tcol-2",
        *("\t".join([*(shown(r) for r in ratios), step]) for step, ratios in relative.items()),
    ]

    md = dbregress(tmp_path, "report", "table").stdout
    section = md.split(f"### Relative QPS (vs {labels[0]})")[1].split("###")[0]
    assert f"| step | {' | '.join(labels[1:])} |" in section
    for step, ratios in relative.items():
        cells = " | ".join("-" if r is None else f"{shown(r)} ?" for r in ratios)
        assert f"| {step} | {cells} |" in section  # ?: one repeat a side decides nothing

    verdicts = json.loads(dbregress(tmp_path, "report", "table", "--format", "json").stdout)
    (comparison,) = verdicts["comparisons"]
    assert comparison["base"] == labels[0]
    for i, column in enumerate(comparison["columns"]):
        assert column["label"] == labels[i + 1]
        got = {s["step"]: s["ratio"] for s in column["steps"]}
        for step, ratios in relative.items():
            ratio = ratios[i]
            if ratio is None:  # a `-` in the table: the step is there, without a ratio
                assert got[step] is None
            else:  # unrounded; taken of the log QPS, so the last bits may differ
                assert got[step] == pytest.approx(ratio, rel=1e-12), (step, column)
