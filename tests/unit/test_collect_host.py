"""Host facts saved with every run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dbregress.collect import pmu
from dbregress.collect.host import _cpuinfo_model, _mem_total_bytes, host_facts
from dbregress.collect.perfctl import PerfError


def test_host_facts() -> None:
    facts = host_facts()
    assert facts["cpu_count"] == os.cpu_count()
    assert facts["cpu_affinity"] == sorted(os.sched_getaffinity(0))
    assert str(facts["kernel"]).startswith("Linux")
    assert isinstance(facts["mem_total_bytes"], int)
    assert facts["perf_counters"] == pmu.detect().note
    if not pmu.detect().available:
        assert facts["perf_counters"] == pmu.NO_PMU or "perf is not installed" in pmu.detect().note
    json.dumps(facts)  # stored as JSON with the results


def test_perf_stat_output_is_read() -> None:
    vm = "<not supported>,,cycles,0,100.00,,\n<not supported>,,instructions,0,100.00,,\n"
    assert pmu.parse_stat(vm) == {"cycles": None, "instructions": None}
    pmu_host = "1234567,,cycles:u,1000,100.00,,\n2345678,,instructions:u,1000,100.00,1.9,insn\n"
    assert pmu.parse_stat(pmu_host) == {"cycles": 1234567, "instructions": 2345678}


def test_software_counts_and_perf_stat_s_human_output_are_read() -> None:
    csv = (
        "1001.68,msec,task-clock,1001679309,100.00,0.666,CPUs utilized\n"
        "5,,context-switches,1001658167,100.00,4.992,/sec\n"
    )
    assert pmu.parse_stat(csv, ("task-clock", "context-switches")) == {
        "task-clock": 1001.68,
        "context-switches": 5,
    }
    tracepoint = "212345,,raw_syscalls:sys_enter,1001658167,100.00,,\n"
    assert pmu.parse_stat(tracepoint, ("raw_syscalls:sys_enter",)) == {
        "raw_syscalls:sys_enter": 212345
    }
    human = "     1,234,567      cycles\n     <not supported>      instructions\n"
    assert pmu.parse_stat(human) == {"cycles": 1234567, "instructions": None}


def _cpu_ms(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) * 1000 / os.sysconf("SC_CLK_TCK")


@pytest.mark.skipif(os.geteuid() != 0, reason="perf attaches to processes as root")
def test_a_counter_counts_only_while_enabled() -> None:
    # A real perf stat on a busy process, with a software event standing in for the
    # hardware ones (this host may have no PMU): attached with its events off, it counts
    # the enabled middle of the process's life and not its start or its end.
    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        counter = pmu.Counter([busy.pid], ("task-clock", "context-switches"))
        counter.start()
        time.sleep(0.5)
        counter.enable()
        time.sleep(0.5)
        counter.disable()
        time.sleep(0.5)
        counts = counter.stop()
        total_ms = _cpu_ms(busy.pid)
    finally:
        busy.kill()
        busy.wait()
    assert counts["task-clock"] is not None and counts["context-switches"] is not None
    # enabled for a third of its life: well under 0.8 of its CPU time, whatever the load
    assert 0 < counts["task-clock"] < 0.8 * total_ms, (counts, total_ms)
    assert counter.proc is not None and counter.proc.poll() is not None


def test_parsers() -> None:
    assert _cpuinfo_model("processor\t: 0\nmodel name\t: AMD EPYC 7B13\n") == "AMD EPYC 7B13"
    assert _cpuinfo_model("") == "unknown"
    assert _mem_total_bytes("MemTotal:       1024 kB\n") == 1024 * 1024


@pytest.mark.skipif(os.geteuid() != 0, reason="perf attaches to processes as root")
def test_a_counter_that_cannot_attach_says_why_at_once() -> None:
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()  # its pid names no process now
    counter = pmu.Counter([gone.pid], ("task-clock",))
    with pytest.raises(PerfError, match="perf stat exited"):
        counter.start()
    counter.close()
    assert counter.proc is not None and counter.proc.poll() is not None
