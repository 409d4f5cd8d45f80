"""explain's counting window: its size from the run's results, the steps counted in
lockstep, and how its callgrind files split into sessions and background work."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from dbregress.execution.prepare import count_spec
from dbregress.explain import callgrind
from dbregress.explain.explainer import MAX_FIXED_OPS, window_for
from dbregress.explain.window_split import split_sessions, split_threads


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


def _profile(*objects: str) -> callgrind.Profile:
    p = callgrind.Profile(files=1)
    for ob in objects:
        p.functions[(ob, "f")] = [10] + [0] * (len(p.events) - 1)
    return p


def test_an_embedded_engines_threads_split_into_the_loadgens_and_the_engines() -> None:
    client = Path("callgrind.out.7.1-02")
    flush = Path("callgrind.out.7.1-03")
    idle = Path("callgrind.out.7.1-04")
    profiles = {
        client: _profile("/x/dbregress-loadgen", "/c/librocksdbjni-linux64.so"),
        flush: _profile("/c/librocksdbjni-linux64.so", "/lib/libc.so.6"),
        idle: _profile(),
    }
    assert split_threads(profiles) == ([client], [flush, idle])
    # one file (not split by thread), or no thread ran the loadgen's code: no split
    assert split_threads({client: profiles[client]}) is None
    assert split_threads({flush: profiles[flush], idle: profiles[idle]}) is None


def test_server_processes_split_into_sessions_and_background() -> None:
    files = [Path("callgrind.out.100.3"), Path("callgrind.out.101.3"), Path("callgrind.out.102")]
    assert split_sessions(files, {"101"}) == ([files[1]], [files[0], files[2]])
    assert split_sessions(files, {"999"}) is None


def test_the_counting_replay_runs_the_deleting_load_steps_in_lockstep() -> None:
    spec = {"clients": 1, "workload": {"kind": "insert", "step": "l.i2", "rows": 10}}
    lockstep = {"kind": "insert", "step": "l.i2", "rows": 10, "lockstep": True}
    assert count_spec(spec) == {"clients": 1, "workload": lockstep}
    assert spec["workload"] == {"kind": "insert", "step": "l.i2", "rows": 10}  # left alone
    for other in (
        {"workload": {"kind": "insert", "step": "l.i0", "rows": 10}},
        {"workload": {"kind": "kv", "step": "fillseq"}},
    ):
        assert count_spec(other) == other


def test_closed_loop_write_steps_are_counted_from_a_settled_engine() -> None:
    for workload in (
        {"kind": "kv", "step": "overwritesome"},
        {"kind": "kv", "step": "overwriteandwait"},
        {"kind": "micro", "step": "update-index"},
        {"kind": "micro", "step": "insert"},
    ):
        assert count_spec({"workload": workload})["settle_first"] is True
    for workload in (
        {"kind": "kv", "step": "readrandom"},
        {"kind": "micro", "step": "point-query"},
        {"kind": "insert", "step": "qp100"},
    ):
        assert "settle_first" not in count_spec({"workload": workload})
