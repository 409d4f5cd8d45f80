"""dbregress import: each parser on real tool outputs (tests/data/imports/README.md says
how each was made), the run folder they become, and `report` and `compare` on it."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Sequence
from pathlib import Path

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dbregress.analysis.compare import compare_run
from dbregress.cli import compare as compare_cli
from dbregress.cli.main import parser
from dbregress.imports import db_bench, iibench, sysbench, tsv
from dbregress.imports.common import Measured, Repeat, UnparseableFile, write_run
from dbregress.model.errors import DbregressError, StoreError
from dbregress.store.run import read_run

DATA = Path(__file__).parents[1] / "data" / "imports"
SCHEMAS = Path(__file__).parents[2] / "schema"


def text(name: str) -> str:
    return (DATA / name).read_bytes().decode()  # as is: db_bench's progress has \r


def fixture(name: str) -> str:
    return str(DATA / name)


# sysbench


def test_sysbench_cpu_report() -> None:
    m = sysbench.parse(text("sysbench_cpu_1.txt"), "sysbench_cpu_1.txt")
    assert (m.step, m.op, m.unit) == ("cpu", "event", "ops")
    assert (m.qps, m.count, m.elapsed_s) == (4186.60, 4190, 1.0003)
    assert dict(m.latency_us) == {"min": 220.0, "mean": 240.0, "max": 12280.0, "p95": 240.0}
    assert m.detail["threads"] == 1


def test_sysbench_memory_report_takes_its_operations_per_second() -> None:
    m = sysbench.parse(text("sysbench_memory.txt"), "sysbench_memory.txt")
    assert (m.step, m.op, m.unit) == ("memory", "event", "ops")
    # the rate sysbench printed, not the events over the total time (4896342.1)
    assert (m.qps, m.count, m.elapsed_s) == (4892978.72, 4897811, 1.0003)
    assert m.latency_us["max"] == 5570.0 and m.detail["mib_per_s"] == 4778.30


def test_sysbench_sql_report_takes_queries_per_second_and_the_echoed_test() -> None:
    m = sysbench.parse(text("sysbench_oltp_point_select.txt"), "x.txt")
    assert (m.step, m.op) == ("oltp_point_select", "query")
    assert (m.qps, m.count) == (7176297.30, 7182494)
    assert m.detail["transactions_per_s"] == 7176297.30
    assert m.latency_us["max"] == 1120.0 and m.latency_us["p95"] == 0.0


def test_sysbench_step_name_from_option_else_file_stem() -> None:
    report = text("sysbench_cpu_1.txt")
    assert sysbench.parse(report, "a.txt", step="cpu-1t").step == "cpu-1t"
    anonymous = "\n".join(
        ln for ln in report.splitlines() if not ln.startswith(("Prime", "CPU speed"))
    )
    assert sysbench.parse(anonymous, "run-7.txt").step == "run-7"


def test_sysbench_newer_throughput_block() -> None:
    # The layout of later sysbench releases (hand-written, values of our own).
    report = (
        "Throughput:\n    events/s (eps):                      1234.5000\n"
        "    time elapsed:                        10.0010s\n"
        "    total number of events:              12346\n\n"
        "Latency (ms):\n         min:    0.50\n         avg:    0.81\n"
        "         max:    3.20\n         99th percentile:    1.10\n         sum:  9999.00\n"
    )
    m = sysbench.parse(report, "new.txt")
    assert (m.qps, m.count, m.elapsed_s) == (1234.5, 12346, 10.001)
    assert m.latency_us["p99"] == 1100.0 and m.latency_us["max"] == 3200.0


def test_sysbench_two_reports_in_one_file_name_the_line() -> None:
    first = text("sysbench_cpu_1.txt")
    second_at = len(first.splitlines()) + text("sysbench_cpu_2.txt").splitlines().index(
        "Latency (ms):"
    )
    with pytest.raises(UnparseableFile, match=f"both.txt, line {second_at + 1}: a second"):
        sysbench.parse(first + text("sysbench_cpu_2.txt"), "both.txt")


def test_sysbench_garbled_line_and_foreign_file_are_named() -> None:
    garbled = text("sysbench_oltp_point_select.txt").replace("(7176297.30 per sec.)", "(fast)", 2)
    with pytest.raises(UnparseableFile, match=r"g.txt, line 19: cannot read 'transactions:'"):
        sysbench.parse(garbled, "g.txt")
    with pytest.raises(UnparseableFile, match=r"db_bench_1\.txt: no sysbench result"):
        sysbench.parse(text("db_bench_1.txt"), "db_bench_1.txt")


# db_bench


def test_db_bench_steps_with_histograms() -> None:
    report = text("db_bench_1.txt")
    fill, read = db_bench.parse(report, "db_bench_1.txt")
    assert db_bench.version(report) == "RocksDB 7.8.3"
    assert (fill.step, fill.op, fill.qps, fill.count, fill.elapsed_s) == (
        "fillseq",
        "write",
        323326.0,
        20000,
        0.062,
    )
    assert dict(fill.latency_us) == {
        "mean": 3.0875,
        "min": 2.0,
        "max": 3428.0,
        "p50": 2.30,
        "p99": 5.96,
        "p999": 26.50,
    }
    assert fill.detail["micros_per_op"] == 3.090 and fill.detail["mb_per_s"] == 35.8
    assert (read.step, read.op, read.qps) == ("readrandom", "read", 1021033.0)
    assert (read.latency_us["p50"], read.latency_us["p99"], read.latency_us["max"]) == (
        0.55,
        1.98,
        213.0,
    )


def test_db_bench_without_histogram_has_no_latency() -> None:
    steps = db_bench.parse(text("db_bench_nohist.txt"), "n.txt")
    assert [(s.step, s.qps, s.count) for s in steps] == [
        ("fillrandom", 247322.0, 10000),
        ("overwrite", 239698.0, 10000),
        ("readseq", 2370462.0, 8619),
    ]
    assert all(not s.latency_us and s.op == "op" for s in steps)


def test_db_bench_benchmark_run_twice_gets_a_suffix() -> None:
    twice = text("db_bench_1.txt") + text("db_bench_2.txt")
    steps = db_bench.parse(twice, "t.txt")
    assert [s.step for s in steps] == ["fillseq", "readrandom", "fillseq.2", "readrandom.2"]
    assert steps[2].qps == 328871.0 and steps[2].latency_us["max"] == 4662.0


def test_db_bench_garbled_line_is_named() -> None:
    garbled = text("db_bench_1.txt").replace("323326 ops/sec", "many ops/sec")
    with pytest.raises(UnparseableFile, match=r"bad.txt, line 28: cannot read this benchmark"):
        db_bench.parse(garbled, "bad.txt")


# tables


def test_tsv_table_columns_in_legend_order() -> None:
    a, b, c = tsv.parse(text("table.tsv"), "table.tsv")
    assert [r.label for r in (a, b, c)] == [
        "pg-15.4_gcc_-O2",
        "pg-16.1_gcc_-O2",
        "pg-17.0_clang_-O3_lto",
    ]
    assert c.build == "pg-17.0 clang -O3 lto"
    assert [(m.step, m.qps) for m in a.steps] == [
        ("point-query", 5123),
        ("insert", 1830),
        ("scan", 712),
    ]
    assert [m.step for m in c.steps] == ["point-query", "insert"]  # `-`: no value
    assert a.steps[0].unit == "ops" and a.steps[0].latency_us == {}


def test_tsv_relative_table_gets_its_base() -> None:
    base, b, c = tsv.parse(text("relative.tsv"), "relative.tsv")
    assert [r.label for r in (base, b, c)] == ["build-a", "build-b", "build-c"]
    assert [(m.step, m.qps, m.unit) for m in base.steps] == [
        ("point-query_range=100", 1.0, "relative"),
        ("insert_range=100", 1.0, "relative"),
    ]
    assert [m.qps for m in c.steps] == [0.91, 1.20]


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ("5\t6\tinsert\n", r"t.tsv, line 1: a table before its legend"),
        ("col-1 : a\ncol-2 : b\n5\tinsert\n", r"t.tsv, line 3: expected 2 value"),
        ("col-1 : a\n5x\tinsert\n", r"t.tsv, line 2: col-1 of insert: '5x' is not a number"),
        ("col-1 : a\n5\tinsert\ncol-1 : b\n", r"t.tsv, line 3: a legend line after the rows"),
        ("col-2 : a\n5\tinsert\n", r"t.tsv, line 2: the legend names \['col-2'\]"),
        ("col-1 : a\n", r"t.tsv: no row of values"),
    ],
)
def test_tsv_errors_name_the_line(table: str, message: str) -> None:
    with pytest.raises(UnparseableFile, match=message):
        tsv.parse(table, "t.tsv")


def test_iibench_summary_rows_are_columns() -> None:
    a, b = iibench.parse(text("iibench_summary.txt"), "s.txt")
    assert (a.label, b.label) == ("ver-a", "ver-b")
    first = {m.step: m for m in a.steps}
    steps = ["l.i0", "l.x", "l.i1", "l.i2", "qr100", "qp100", "qr500", "qp500", "qr1000"]
    assert list(first) == [*steps, "qp1000"]
    assert (first["l.i0"].qps, first["l.i0"].op, first["l.i0"].unit) == (281004, "insert", "rows")
    assert (first["l.x"].op, first["qp1000"].op, first["qp1000"].unit) == (
        "create_index",
        "query",
        "ops",
    )
    assert "qr1000" not in {m.step for m in b.steps}


def test_iibench_errors_name_the_line() -> None:
    with pytest.raises(UnparseableFile, match=r"s.txt, line 1: a row before the header"):
        iibench.parse("ver-a 1 2\n", "s.txt")
    with pytest.raises(UnparseableFile, match=r"s.txt, line 2: expected a name and 2 value"):
        iibench.parse("dbms l.i0 l.x\nver-a 1\n", "s.txt")


PARSERS: dict[str, Callable[[str], Sequence[Measured | Repeat]]] = {
    "sysbench_cpu_1.txt": lambda t: [sysbench.parse(t, "f")],
    "sysbench_memory.txt": lambda t: [sysbench.parse(t, "f")],
    "sysbench_oltp_point_select.txt": lambda t: [sysbench.parse(t, "f")],
    "db_bench_1.txt": lambda t: db_bench.parse(t, "f"),
    "table.tsv": lambda t: tsv.parse(t, "f"),
    "relative.tsv": lambda t: tsv.parse(t, "f"),
    "iibench_summary.txt": lambda t: iibench.parse(t, "f"),
}


@settings(max_examples=150, deadline=None)
@given(
    name=st.sampled_from(sorted(PARSERS)),
    where=st.floats(0, 1),
    cut=st.integers(0, 40),
    junk=st.text(st.characters(codec="utf-8"), max_size=20),
)
def test_damaged_files_are_refused_by_name_or_read(
    name: str, where: float, cut: int, junk: str
) -> None:
    """A fixture with a piece replaced by junk parses, or fails naming the file."""
    original = text(name)
    at = int(where * len(original))
    damaged = original[:at] + junk + original[at + cut :]
    try:
        found = PARSERS[name](damaged)
    except UnparseableFile as e:
        assert re.match(r"f(, line \d+)?: ", str(e)), str(e)
        return
    for item in found:
        for m in item.steps if isinstance(item, Repeat) else (item,):
            assert math.isfinite(m.qps) and m.qps >= 0


# the run folder


def main(args: list[str]) -> int:
    """The command line without its error handling: errors raise."""
    ns = parser().parse_args(args)
    code: int = ns.func(ns)
    return code


def _import(tmp: Path, name: str, kind: str, *files: str, labels: tuple[str, ...] = ()) -> int:
    args = ["import", kind, *(fixture(f) for f in files), "--as", name, "--results", str(tmp)]
    for label in labels:
        args += ["--label", label]
    return main(args)


def test_import_writes_a_run_folder_with_its_origin_and_missing_metrics(tmp_path: Path) -> None:
    files = ("db_bench_1.txt", "db_bench_2.txt", "db_bench_3.txt")
    assert _import(tmp_path, "old", "db_bench", *files, labels=("v7",)) == 0
    data = read_run(tmp_path / "old")
    imported = data.record["imported"]
    assert (imported["kind"], imported["files"]) == ("db_bench", list(files))
    assert data.record["comparisons"] == [
        {"name": "db_bench", "benchmark": "db_bench", "labels": ["v7"]}
    ]
    assert data.record["builds"]["v7"]["version_string"] == "RocksDB 7.8.3"
    assert sorted(data.steps) == ["v7/r1", "v7/r2", "v7/r3"]
    fill = data.steps["v7/r2"][0]
    assert (fill["step"], fill["column"], fill["repeat"], fill["q"]["value"]) == (
        "fillseq",
        "v7",
        2,
        328871.0,
    )
    assert fill["server"] is None and fill["host"] is None and fill["elapsed_s"] == 0.061
    assert fill["per_op"]["server_cpu_us"] is None and fill["per_op"]["cs"] is None
    assert fill["ops"]["write"]["latency_us"]["p95"] is None
    assert fill["ops"]["write"]["latency_us"]["p99"] == 5.88
    stored = "".join(p.read_text() for p in (tmp_path / "old").rglob("*.json"))
    assert str(DATA) not in stored and str(tmp_path) not in stored


def test_a_labels_nth_file_with_a_step_is_its_repeat_n(tmp_path: Path) -> None:
    def one(step: str, qps: float, source: str) -> Repeat:
        return Repeat("x", (Measured(step, qps, "op"),), source)

    repeats = [one("a", 1, "1"), one("b", 2, "2"), one("a", 3, "3")]
    write_run(tmp_path, "r", "sysbench", "sysbench", ["1", "2", "3"], repeats)
    data = read_run(tmp_path / "r")
    got = {job: [(r["step"], r["q"]["value"]) for r in rs] for job, rs in data.steps.items()}
    assert got == {"x/r1": [("a", 1), ("b", 2)], "x/r2": [("a", 3)]}
    assert data.record["jobs"]["x/r1"]["files"] == ["1", "2"]


def test_import_refuses_what_it_cannot_do(tmp_path: Path) -> None:
    with pytest.raises(DbregressError, match="unknown KIND 'csv'; one of: sysbench"):
        _import(tmp_path, "a", "csv", "table.tsv")
    with pytest.raises(DbregressError, match="--label given 2 times for 3 files"):
        files = ("db_bench_1.txt", "db_bench_2.txt", "db_bench_3.txt")
        _import(tmp_path, "a", "db_bench", *files, labels=("x", "y"))
    with pytest.raises(DbregressError, match="a tsv table names its own columns"):
        _import(tmp_path, "a", "tsv", "table.tsv", labels=("x",))
    with pytest.raises(UnparseableFile, match=r"sysbench_cpu_1\.txt: no benchmark line"):
        _import(tmp_path, "a", "db_bench", "sysbench_cpu_1.txt")
    assert _import(tmp_path, "a", "tsv", "table.tsv") == 0
    with pytest.raises(StoreError, match="exists already"):
        _import(tmp_path, "a", "tsv", "table.tsv")
    runs = [p.name for p in tmp_path.iterdir() if not p.name.startswith("history.sqlite")]
    assert runs == ["a"]  # no half run left behind (the run history indexes "a")


def test_report_on_an_import_shows_missing_as_missing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _import(tmp_path, "sb", "sysbench", "sysbench_cpu_1.txt", "sysbench_cpu_2.txt") == 0
    assert main(["report", "sb", "--results", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "| cpu | - / - |" in out  # CPU per operation: unknown, not 0
    assert "| sysbench_cpu_1 | - | - | - | - | - | - | - |" in out
    assert (tmp_path / "sb" / "report.md").is_file()


def test_compare_two_imports_of_the_same_files_is_an_aa_pair(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    files = ("db_bench_1.txt", "db_bench_2.txt", "db_bench_3.txt")
    assert _import(tmp_path, "a", "db_bench", *files, labels=("v7",)) == 0
    assert _import(tmp_path, "b", "db_bench", *files, labels=("v7",)) == 0
    assert main(["report", "b", "--results", str(tmp_path)]) == 0
    capsys.readouterr()
    results = ["--results", str(tmp_path)]
    # imports record no host: without --across-hosts the time lane is not judged at all
    assert main(["compare", "a", "b", *results, "--fail-on", "slower:time"]) == 2
    assert "not known to be the same host class" in capsys.readouterr().err
    # three repeats a side leave readrandom undecided: a gate that judges it cannot pass
    gated = ["--format", "json", "--fail-on", "slower:time", "--across-hosts"]
    assert main(["compare", "a", "b", *results, *gated]) == 2
    err = capsys.readouterr().err
    assert "NOT JUDGED" in err and "db_bench/readrandom (B:v7, time): undecided" in err
    assert main(["compare", "a", "b", *results, *gated, "--allow-undecided"]) == 0
    captured = capsys.readouterr()
    assert "passed with --allow-undecided" in captured.err
    verdicts = json.loads(captured.out)
    jsonschema.validate(verdicts, json.loads((SCHEMAS / "verdicts.schema.json").read_text()))
    assert verdicts["run_id"] == "a vs b" and verdicts["status"] == "ok"
    (comp,) = verdicts["comparisons"]
    assert (comp["base"], [c["label"] for c in comp["columns"]]) == ("A:v7", ["B:v7"])
    steps = {s["step"]: s for s in comp["columns"][0]["steps"]}
    assert sorted(steps) == ["fillseq", "readrandom"]
    assert all(s["ratio"] == 1.0 and s["verdict"] != "slower" for s in steps.values())
    assert steps["fillseq"]["verdict"] == "same"
    assert steps["fillseq"]["repeats"] == {"base": 3, "column": 3}
    assert main(["compare", "a", "b", *results]) == 0
    assert "| fillseq | B:v7 | 1.00 = [" in capsys.readouterr().out


def test_compare_matches_by_step_and_keeps_steps_in_common(tmp_path: Path) -> None:
    assert _import(tmp_path, "t", "tsv", "table.tsv") == 0
    assert _import(tmp_path, "n", "db_bench", "db_bench_1.txt", "db_bench_nohist.txt") == 0
    a, b = read_run(tmp_path / "t"), read_run(tmp_path / "n")
    with pytest.raises(DbregressError) as e:
        compare_cli.merge(a, b)
    assert str(e.value) == (
        "no step in common: t has tsv (point-query, insert, scan); "
        "n has db_bench (fillseq, readrandom)"
    )
    record, steps = compare_cli.merge(read_run(tmp_path / "n"), read_run(tmp_path / "n"))
    assert record["comparisons"][0]["labels"] == [
        "A:db_bench_1",
        "B:db_bench_1",
        "B:db_bench_nohist",
    ]
    qps = compare_run(record, steps).qps
    assert sorted(k for k in qps) == [
        ("db_bench", "B:db_bench_1", "fillseq"),
        ("db_bench", "B:db_bench_1", "readrandom"),
        ("db_bench", "B:db_bench_nohist", "fillseq"),
        ("db_bench", "B:db_bench_nohist", "readrandom"),
    ]
    with pytest.raises(StoreError, match="'nope' is not a run folder"):
        main(["compare", "t", "nope", "--results", str(tmp_path)])
