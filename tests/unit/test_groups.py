"""Microbenchmark group summaries."""

from __future__ import annotations

import pytest

from dbregress.analysis.groups import group_summaries, summarize
from dbregress.analysis.summary import Cell, Matrix
from dbregress.lab.micro_names import GROUPS, group_of, loadgen_step


def test_every_name_is_in_exactly_one_group() -> None:
    names = [n for g in GROUPS.values() for n in g]
    assert len(names) == len(set(names))
    assert group_of("point-query.pre") == "point"
    assert group_of("read-only-range100") == "range with aggregation"
    assert group_of("update-zipf") == "writes"
    assert group_of("load") is None


def test_loadgen_step_names() -> None:
    assert loadgen_step("read-only-range10000") == ("read-only", 10000)
    assert loadgen_step("read-write-range10.pre") == ("read-write", 10)
    assert loadgen_step("scan") == ("scan", None)


def test_summarize() -> None:
    avg, med, lo, hi, sd = summarize([0.9, 1.0, 1.1, 1.4])
    assert (avg, med, lo, hi) == pytest.approx((1.1, 1.05, 0.9, 1.4))
    assert sd == pytest.approx(0.187083, rel=1e-4)


def test_group_summaries_use_only_steps_both_ran() -> None:
    def ok(q: float) -> Cell:
        return Cell("ok", qps=q)

    cells = {
        ("a", "point-query"): ok(100),
        ("b", "point-query"): ok(90),
        ("a", "hot-points"): ok(100),
        ("b", "hot-points"): ok(110),
        ("a", "scan"): ok(10),
        ("b", "scan"): Cell("failed"),
        ("a", "insert"): ok(50),
        ("b", "insert"): ok(40),
    }
    m = Matrix("m", "micro", ["a", "b"], ["point-query", "hot-points", "scan", "insert"], cells)
    by_group = {g.group: g for g in group_summaries(m)}
    assert set(by_group) == {"point", "writes"}  # scan failed: no range group at all
    assert by_group["point"].count == 2 and by_group["point"].average == pytest.approx(1.0)
    assert by_group["writes"].minimum == pytest.approx(0.8)
