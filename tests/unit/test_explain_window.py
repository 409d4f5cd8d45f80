"""The size of explain's counting window, from a step's results in the run."""

from __future__ import annotations

from typing import Any

from dbregress.explain.explainer import MAX_FIXED_OPS, window_for


def result(calls: int, per_s: float) -> dict[str, Any]:
    return {"q": {"op": "insert"}, "ops": {"insert": {"ops": calls, "ops_per_s": per_s}}}


def test_a_fixed_work_step_counts_the_middle_half_of_its_calls() -> None:
    # l.i2 at the quickstart's sizes: 2000 insert calls at about 1000 a second
    runs = [result(2000, 900.0), result(2000, 1100.0), result(2000, 1000.0)]
    assert window_for(runs, 4, "l.i2", None, fixed=True) == (500, 1000, 1000.0)
    # a long load is capped, after its first quarter
    assert window_for([result(100_000, 5e4)], 1, "l.i0", None, fixed=True) == (
        25_000,
        MAX_FIXED_OPS,
        5e4,
    )
    # --ops still decides, within the step's calls
    assert window_for(runs, 4, "l.i2", 40, fixed=True) == (20, 40, 1000.0)
    assert window_for([result(30, 10.0)], 4, "l.i2", 100, fixed=True) == (10, 20, 10.0)


def test_a_step_that_runs_for_a_duration_counts_100_ms_of_calls() -> None:
    assert window_for([result(50_000, 10_000.0)], 6, "qr100", None, fixed=False) == (
        500,
        1000,
        10_000.0,
    )
    assert window_for([result(50, 5.0)], 6, "qr100", None, fixed=False) == (10, 20, 5.0)
    assert window_for([result(9e6, 3e5)], 6, "readrandom", None, fixed=False)[1] == 2000
