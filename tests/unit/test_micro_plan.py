"""The microbenchmark plan follows the suite's published order."""

from __future__ import annotations

from pathlib import Path

import pytest

from dbregress.benchmarks.micro import plan
from dbregress.lab.file import MicroSizes, load_lab
from dbregress.lab.micro_names import GROUPS, READS
from dbregress.model.errors import LabError


def test_order_reads_writes_cleanup_reads_delete_insert() -> None:
    names = [p.name for p in plan(MicroSizes(tables=2, rows=100_000, seconds=1))]
    assert names[0] == "load"
    assert names[1 : 1 + len(READS)] == [n + ".pre" for n in READS]
    cleanup = names.index("cleanup")
    assert names[cleanup - 1] == "read-write-range100"
    assert names[cleanup + 1 : cleanup + 1 + len(READS)] == list(READS)
    assert names[-2:] == ["delete", "insert"]
    every = {n for g in GROUPS.values() for n in g}
    assert every <= set(names)


def test_ranges_longer_than_the_table_are_left_out() -> None:
    names = [p.name for p in plan(MicroSizes(rows=5000, seconds=1))]
    assert "read-only-range10000" not in names and "read-only-range100" in names


def test_range_sizes_and_subsets() -> None:
    plans = plan(MicroSizes(only=("read-only-range10000", "insert"), reads_before_writes=False))
    assert [(p.name, p.step) for p in plans] == [
        ("load", "load"),
        ("cleanup", "cleanup"),
        ("read-only-range10000", "read-only"),
        ("insert", "insert"),
    ]
    assert plans[2].section["range_size"] == 10000
    assert not plans[0].reported and not plans[1].reported


def test_micro_lab(tmp_path: Path) -> None:
    path = tmp_path / "lab.toml"
    text = """benchmark = "micro"
[[column]]
label = "pg"
build = "postgres@17.2.0"
[micro]
tables = 2
rows = 1000
seconds = 1
only = ["point-query", "scan"]
"""
    path.write_text(text)
    sizes = load_lab(path).comparisons[0].sizes
    assert isinstance(sizes, MicroSizes) and sizes.only == ("point-query", "scan")
    path.write_text(text.replace('"scan"', '"scna"'))
    with pytest.raises(LabError, match=r"lab.toml:9: micro.only: unknown microbenchmark 'scna'"):
        load_lab(path)
