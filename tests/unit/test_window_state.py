"""The counting window meets the timed window's state: a timed step's window lies at
the middle of the time lane's measured window, and the engine's block-cache counters over the
counted window are kept beside the timed window's; a side that differs beyond the
tolerance gets no cost verdict."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from dbregress.analysis import state
from dbregress.analysis.cost import cost_verdicts
from dbregress.cost.planning import LANE_SIZING
from dbregress.explain.explainer import timed_middle, windows
from dbregress.lab.file import Lab, load_lab


def stats(hits: float, misses: float) -> dict[str, Any]:
    return {"statistics": {state.HITS: hits, state.MISSES: misses, "rocksdb.bytes.read": 9.0}}


def test_a_timed_steps_window_lies_at_the_middle_of_the_timed_one() -> None:
    # readrandom at 96,000 gets/s, a 0.5 s warm-up and 1 s measured: the window of 1000
    # gets is centred on the 96,000th, the last 500 calls before it instrumented
    assert timed_middle(500, 1000, 96_000.0, 0.5, 1.0) == (95_500, 500)
    # fewer calls up to there than the window's own warm-up: the window as it was
    assert timed_middle(500, 1000, 600.0, 0.5, 1.0) == (500, 0)
    assert timed_middle(10, 20, 0.5, 0.0, 1.0) == (10, 0)


def test_the_timed_state_pools_the_repeats_measured_windows() -> None:
    results = [
        {"q": {"count": 1000}, "engine_stats": stats(990, 10)},
        {"q": {"count": 3000}, "engine_stats": stats(2990, 10)},
        {"q": {"count": 5}, "engine_stats": None},  # an engine without statistics
    ]
    timed = state.timed(results)
    assert timed == state.CacheState(3980.0, 20.0, 4000)
    assert timed.hit_rate == 0.995
    assert timed.to_json()["misses_per_op"] == 0.005
    assert state.timed([{"q": {"count": 5}, "engine_stats": None}]) is None


def test_a_cold_counted_window_is_a_mismatch_and_a_warm_one_is_not() -> None:
    timed = state.CacheState(361_541, 0, 362_619)
    per_op = {"estimated_cycles": 40_000.0, "instructions": 20_000.0}
    cold = {"divisor": 1000.0, "per_op": per_op, **state.judged(stats(300, 700), 1000, timed)}
    assert cold["engine_state"]["counted"]["hit_rate"] == 0.3
    assert cold["engine_state"]["timed"]["hit_rate"] == 1.0
    assert cold["state_mismatch"] is None  # judged once the count is known
    state.settle(cold, 0.01)
    assert cold["state_mismatch"] is not None and "0.7000 per operation" in cold["state_mismatch"]
    warm = {"divisor": 1000.0, "per_op": per_op, **state.judged(stats(1000, 0), 1000, timed)}
    state.settle(warm, 0.01)
    assert warm["state_mismatch"] is None
    tol = warm["engine_state"]["tolerance_misses_per_op"]
    assert tol == pytest.approx(state.tolerance("rocksdb", per_op, 0.01), abs=1e-6)
    # no block read at all in either window (a memtable-only step): nothing to judge
    none = {"divisor": 1000.0, "per_op": per_op}
    none |= state.judged(stats(0, 0), 1000, state.CacheState(0, 0, 10))
    state.settle(none, 0.01)
    assert none["state_mismatch"] is None
    # an engine that reports no statistics: no state recorded
    assert state.judged(None, 1000, timed) == {}
    assert state.judged({"statistics": {}}, 1000, None) == {}


def _replay(column: str, n: int, hits: float, misses: float, cycles: float) -> dict[str, Any]:
    timed = state.CacheState(99_000, 1_000, 100_000)
    figures = {"per_op": {"estimated_cycles": cycles, "instructions": cycles / 2}}
    figures |= state.judged(stats(hits, misses), 1000, timed)
    return {
        "column": column,
        "replay": n,
        "status": "ok",
        "steps": {"readrandom": figures},
    }


def test_a_side_whose_window_missed_the_timed_state_gets_no_cost_verdict() -> None:
    record = {"comparisons": [{"name": "kv", "labels": ["a", "b"]}]}
    key = ("kv", "b", "readrandom")
    warm = [_replay(c, n, 990, 10, v) for c in "ab" for n, v in ((1, 1000.0), (2, 1001.0))]
    found = cost_verdicts(record, warm)
    assert found is not None
    head = found.headline()[key]
    assert head.verdict == "same"
    base, column = head.state
    assert base is not None and column is not None
    assert base.counted == 0.99 and base.timed == 0.99 and column.mismatch is None

    cold = [r for r in warm if r["column"] == "a"]
    cold += [_replay("b", n, 300, 700, 2000.0 + n) for n in (1, 2)]
    found = cost_verdicts(record, cold)
    assert found is not None
    for metric in ("estimated_cycles", "instructions"):  # not only the headline
        c = found.metrics[metric][key]
        assert c.verdict == "undecided", c
        assert c.reason.startswith("the column's counted windows missed 0.7000"), c.reason
        assert c.ratio is not None and c.ratio > 1.9  # still shown, not judged


def _kv_lab(tmp_path: Path) -> Lab:
    text = """
name = "w"
[[comparison]]
name = "rocksdb"
benchmark = "kv"
[[comparison.column]]
label = "a"
build = "rocksdb@7.10.2"
[[comparison.column]]
label = "b"
build = "rocksdb@10.2.1"
[comparison.kv]
keys = 200000
seconds = 1
warmup_s = 0.5
"""
    path = tmp_path / "lab.toml"
    path.write_text(text)
    return load_lab(path)


def _timed(column: str, step: str, rate: float, hits: float, misses: float) -> dict[str, Any]:
    return {
        "column": column,
        "step": step,
        "q": {"op": "get", "count": int(rate)},
        "ops": {"get": {"ops": int(rate * 1.5), "ops_per_s": rate}},
        "engine_stats": stats(hits, misses),
    }


def test_a_window_warms_until_the_base_timed_hit_rate(tmp_path: Path) -> None:
    comp = _kv_lab(tmp_path).comparisons[0]
    results = [
        _timed("a", "readrandom", 300_000.0, 299_400, 600),  # base: 99.8%
        _timed("b", "readrandom", 270_000.0, 260_000, 10_000),  # its own timed state
    ]
    found = windows(comp, ["readrandom"], "b", results, sizing=LANE_SIZING, own_pace=False)
    choice = found["readrandom"]
    # the middle of the base's timed window stays the latest the window opens ...
    assert choice.skip_ops == round(1.0 * 300_000) - choice.ops // 2
    assert choice.warm_ops > 0
    # ... and it opens once a probe's stretch hits the base's rate less the margin, in
    # every column (the same calls), while each column is checked against its own state
    assert choice.until_hit_rate == pytest.approx(0.998 - state.UNTIL_MARGIN)
    assert choice.timed is not None and choice.timed.hit_rate == pytest.approx(260 / 270)
    # an engine without the counters, or a cache the base never read: no probing
    assert state.until_rate(None) == 0.0
    assert state.until_rate(state.CacheState(0, 0, 10)) == 0.0
    middle_only = dataclasses.replace(LANE_SIZING, warm_until_state=False)
    found = windows(comp, ["readrandom"], "b", results, sizing=middle_only, own_pace=False)
    assert found["readrandom"].until_hit_rate == 0.0
