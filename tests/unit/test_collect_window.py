"""A step's phases and measured window from the runner's marks (synthetic counters)."""

from __future__ import annotations

import pytest

from dbregress.collect import proc
from dbregress.collect.hostcpu import CpuTimes
from dbregress.collect.proc import TreeSample
from dbregress.collect.window import Mark, host, phases, window_usage

TICK = proc.TICKS_PER_S


def tree(at: float, cpu_s: float, written: int = 0) -> TreeSample:
    ticks = round(cpu_s * TICK)
    return TreeSample(1, at, ticks, 0, 0, written, {(1, 1): 0})


def process(cpu_s: float, cs: int = 0) -> dict[str, float | int]:
    return {"user_s": cpu_s, "system_s": 0.0, "voluntary_cs": cs, "involuntary_cs": 1}


def mark(at: float, server_s: float | None, loadgen_s: float, busy_s: float) -> Mark:
    server = None if server_s is None else tree(at, server_s)
    cpu = CpuTimes(2, round(busy_s * TICK), 0, 0)
    return Mark(at, server, tree(at, 0.0, written=int(at)), cpu, process(loadgen_s, int(at)))


def marks(embedded: bool) -> dict[str, Mark]:
    s = None if embedded else 0.0
    return {
        "spawn": mark(0.0, s, 0.0, 0.0),
        "ready": mark(1.0, None if embedded else 0.5, 0.2, 1.0),
        "measuring": mark(3.0, None if embedded else 1.5, 0.6, 4.0),
        "stopped": mark(13.0, None if embedded else 9.5, 3.6, 16.0),
        "end": mark(14.0, None if embedded else 10.0, 3.7, 17.0),
    }


LOADGEN_PHASES = {
    name: {"wall_s": wall, "process": process(cpu)}
    for name, wall, cpu in (("setup", 0.9, 0.2), ("warmup", 2.0, 0.4), ("checks", 0.5, 0.1))
}


def test_the_window_counts_from_measuring_to_stopped() -> None:
    m = marks(embedded=False)
    server, client = window_usage(m["measuring"], m["stopped"])
    assert server.user_s == pytest.approx(8.0)
    assert client is not None and client.user_s == pytest.approx(3.0)
    assert client.ctx_switches == 10 and client.write_bytes == 10  # µs figures, /proc IO
    noise = host(m["measuring"], m["stopped"], server, client)
    assert noise["window_s"] == 10.0 and noise["busy_s"] == pytest.approx(12.0)
    assert noise["other_cpu_s"] == pytest.approx(1.0)
    assert noise["other_cpu_frac"] == pytest.approx(0.05)


def test_an_embedded_engine_is_the_loadgen() -> None:
    m = marks(embedded=True)
    server, client = window_usage(m["measuring"], m["stopped"])
    assert client is None and server.user_s == pytest.approx(3.0)
    p = phases(m, LOADGEN_PHASES)
    assert p["setup"] == {"wall_s": 0.9, "server_cpu_s": None, "client_cpu_s": 0.2}


def test_phases_outside_the_window() -> None:
    p = phases(marks(embedded=False), LOADGEN_PHASES)
    assert p["setup"]["server_cpu_s"] == pytest.approx(0.5)
    assert p["warmup"]["server_cpu_s"] == pytest.approx(1.0)
    assert p["checks"] == {"wall_s": 0.5, "server_cpu_s": pytest.approx(0.5), "client_cpu_s": 0.1}


def test_unreadable_host_counters_give_nulls() -> None:
    m = marks(embedded=False)
    start = Mark(3.0, m["measuring"].server, m["measuring"].loadgen, None, m["measuring"].process)
    server, client = window_usage(start, m["stopped"])
    noise = host(start, m["stopped"], server, client)
    assert noise["window_s"] == 10.0 and noise["other_cpu_frac"] is None


def test_per_op_figures_have_every_metric_and_counts_divide_by_q() -> None:
    from dbregress.analysis.metrics import PER_OP
    from dbregress.execution.step_figures import counter_metrics, per_op_metrics

    server = proc.Usage(2.0, 1.0, 500, 4000 * 1024, 0, 10.0, True, True)
    client = proc.Usage(0.5, 0.5, 0, 0, 0, 10.0, True, True)
    keys = {m.key for m in PER_OP}
    assert set(per_op_metrics(0, 10.0, server, client)) == keys  # Q = 0: all None
    assert all(v is None for v in per_op_metrics(0, 10.0, server, client).values())
    figures = per_op_metrics(1000, 10.0, server, client)
    assert set(figures) == keys
    assert figures["server_cpu_us"] == pytest.approx(3000.0)
    assert figures["rkb"] == pytest.approx(4.0) and figures["ops_per_s"] == 100.0
    counted = {"server": {"cycles": 2e9, "instructions": None}, "client": {"cycles": 1e6}}
    assert counter_metrics(counted, 1000) == {"server_cycles": 2e6, "server_instructions": None}
