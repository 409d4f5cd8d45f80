"""A paced step's counted window is the same on every host: the Insert Benchmark's
q-steps and kv's *whilewriting steps count a pinned number of Q calls per write, at a
window placed and sized from that pace, never from the time lane's rate (which moves
with the host's speed: 8,224 and 4,412 queries/s at two points of one bisection)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from dbregress import benchmarks
from dbregress.benchmarks import insert, kv
from dbregress.benchmarks.plan import PinnedPace
from dbregress.cost.planning import LANE_SIZING
from dbregress.explain.explainer import pinned_window, windows
from dbregress.explain.jobs import Choice
from dbregress.lab.file import Comparison, load_lab

INSERT = """\
name = "paced"
count = false
benchmark = "insert"
[[column]]
label = "a"
build = "postgres@17.2.0"
[[column]]
label = "b"
build = "postgres@17.2.0"
[insert]
load_rows = 1000
write_rows = 100
query_seconds = 1
warmup_s = 0.5
"""
KV = """\
name = "paced"
count = false
benchmark = "kv"
[[column]]
label = "a"
build = "rocksdb@10.2.1"
[[column]]
label = "b"
build = "rocksdb@10.2.1"
[kv]
keys = 10000
threads = 1
seconds = 1
warmup_s = 0.5
"""
Q_STEPS = ["qr100", "qp100", "qr500", "qp500", "qr1000", "qp1000"]


def _comparison(tmp_path: Path, text: str) -> Comparison:
    path = tmp_path / "lab.toml"
    path.write_text(text)
    return load_lab(path).comparisons[0]


def _results(steps: list[str], rates: dict[str, float], op: str) -> list[dict[str, Any]]:
    """The time lane's step results of each column at its rate (no engine state)."""
    return [
        {
            "column": column,
            "step": step,
            "q": {"op": op, "count": int(rate)},
            "ops": {op: {"ops": int(rate * 1.5), "ops_per_s": rate}},
        }
        for step in steps
        for column, rate in rates.items()
    ]


def _window(c: Choice) -> tuple[int, int, float, int, float]:
    return (c.skip_ops, c.ops, c.q_per_s, c.warm_ops, c.until_hit_rate)


def test_the_cost_lanes_q_step_windows_do_not_depend_on_the_time_lanes_rate(
    tmp_path: Path,
) -> None:
    comp = _comparison(tmp_path, INSERT)
    fast = _results(Q_STEPS, {"a": 8224.0, "b": 7000.0}, "range_query")
    slow = _results(Q_STEPS, {"a": 4412.0, "b": 3900.0}, "range_query")
    at_fast = windows(comp, Q_STEPS, "b", fast, sizing=LANE_SIZING, own_pace=False)
    at_slow = windows(comp, Q_STEPS, "b", slow, sizing=LANE_SIZING, own_pace=False)
    for step in Q_STEPS:
        assert _window(at_fast[step]) == _window(at_slow[step]), step
        assert at_fast[step].q_per_s == insert.COUNTED_Q_PER_S
    # explain's own replays keep each column's own pace (a diagnostic of its run)
    own = windows(comp, ["qr100"], "b", fast, sizing=LANE_SIZING)
    assert own["qr100"].q_per_s == 7000.0


def test_each_q_step_window_holds_a_whole_number_of_write_batches(tmp_path: Path) -> None:
    comp = _comparison(tmp_path, INSERT)
    found = windows(
        comp,
        Q_STEPS,
        "b",
        _results(Q_STEPS, {"a": 6000.0, "b": 6000.0}, "range_query"),
        sizing=LANE_SIZING,
        own_pace=False,
    )
    plans = {p.name: p for p in benchmarks.plans(comp)}
    for step, every in (("qr100", 500), ("qr500", 100), ("qr1000", 50)):
        pin = benchmarks.counted_pace(comp, plans[step])
        assert pin is not None and pin.calls_per_write == every  # a 10-row batch each
        c = found[step]
        assert c.ops % every == 0 and c.ops >= LANE_SIZING.min_ops
        # the window and the warm-up start half a period from a write
        assert c.skip_ops % every == every // 2 and c.warm_ops % every == every // 2
        inside = [i for i in range(c.skip_ops + 1, c.skip_ops + c.ops + 1) if i % every == 0]
        assert len(inside) == c.ops // every, step
        # centred on the batches the time lane wrote by its measured window's middle
        # (1 s at the step's rate: 10, 50, 100 batches), whatever its query rate was
        middle = (c.skip_ops + c.ops / 2) / every
        assert abs(middle - pin.writes_per_s * 1.0) <= 1, (step, middle)


def test_a_whilewriting_steps_writer_is_pinned_too(tmp_path: Path) -> None:
    comp = _comparison(tmp_path, KV)
    steps = ["readwhilewriting"]
    plans = {p.name: p for p in benchmarks.plans(comp)}
    pin = kv.counted_pace(comp.sizes, plans["readwhilewriting"])  # type: ignore[arg-type]
    # 2 MB/s of 420-byte entries: 4,993 puts/s, one every 40 reads
    assert pin is not None and pin.calls_per_write == 40
    assert round(pin.writes_per_s) == 4993
    at = [
        windows(
            comp, steps, "b", _results(steps, {"a": r, "b": r}, "get"), None, LANE_SIZING, False
        )
        for r in (350_000.0, 120_000.0)
    ]
    assert _window(at[0]["readwhilewriting"]) == _window(at[1]["readwhilewriting"])
    assert kv.counted_pace(comp.sizes, plans["readrandom"]) is None  # type: ignore[arg-type]


def test_a_pinned_window_is_sized_by_the_sizing_and_never_starts_before_zero() -> None:
    pin = PinnedPace(10.0, 500)
    assert pinned_window(pin, LANE_SIZING, 0.5, 1.0) == (4750, 500, 250)
    # a step too short for a warm-up before its window: every call before it instrumented
    skip, ops, warm = pinned_window(pin, LANE_SIZING, 0.0, 0.1)
    assert (skip, ops, warm) == (250, 500, 0)
