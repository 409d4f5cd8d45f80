"""The host's CPU counters (/proc/stat) and clock (/sys, /proc/cpuinfo) on fixed text."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from dbregress.collect import hostcpu, proc
from dbregress.collect.hostcpu import CpuTimes, cpuinfo_mhz, host_window, parse_proc_stat

TICK = proc.TICKS_PER_S
STAT = """cpu  300 10 60 1000 40 5 5 20 0 0
cpu0 100 10 20 500 30 2 3 5 0 0
cpu1 200 0 40 500 10 3 2 15 0 0
intr 338156 0 0
ctxt 501189
"""


def test_per_cpu_lines_are_summed_for_the_chosen_cpus() -> None:
    both = parse_proc_stat(STAT)
    assert both == CpuTimes(cpus=2, busy=300 + 10 + 60 + 5 + 5, idle=1040, steal=20)
    one = parse_proc_stat(STAT, {1})
    assert one == CpuTimes(cpus=1, busy=200 + 40 + 3 + 2, idle=510, steal=15)


def test_the_aggregate_line_is_the_fallback() -> None:
    assert parse_proc_stat(STAT, {7}) == CpuTimes(cpus=2, busy=380, idle=1040, steal=20)
    old_kernel = "cpu  1 2 3 4\n"  # no iowait, irq, softirq or steal columns
    assert parse_proc_stat(old_kernel) == CpuTimes(cpus=1, busy=6, idle=4, steal=0)
    with pytest.raises(ValueError):
        parse_proc_stat("intr 1\n")


def test_the_window_subtracts_the_step_own_cpu() -> None:
    start = CpuTimes(cpus=2, busy=1000, idle=0, steal=100)
    end = CpuTimes(cpus=2, busy=1000 + 12 * TICK, idle=0, steal=100 + TICK)
    w = host_window(start, end, window_s=10.0, own_cpu_s=9.0)
    assert w["busy_s"] == pytest.approx(12.0) and w["steal_s"] == pytest.approx(1.0)
    assert w["other_cpu_s"] == pytest.approx(3.0)
    assert w["other_cpu_frac"] == pytest.approx(3.0 / 20) and w["steal_frac"] == 0.05
    assert host_window(start, end, 10.0, own_cpu_s=50.0)["other_cpu_s"] == 0.0
    short = host_window(start, end, window_s=0.4, own_cpu_s=0.0)
    assert short["busy_s"] == pytest.approx(12.0) and short["other_cpu_frac"] is None


def test_the_live_host_reads() -> None:
    times = hostcpu.read_cpu_times()
    # by default the CPUs this process may run on, each with a /proc/stat line
    assert times is not None and times.cpus == len(os.sched_getaffinity(0))
    assert times.busy > 0
    first = hostcpu.read_cpu_times({min(os.sched_getaffinity(0))})
    assert first is not None and first.cpus == 1 and first.busy > 0


def test_clock_from_sysfs_then_cpuinfo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(hostcpu, "SYS_CPU", tmp_path / "sys")
    monkeypatch.setattr(hostcpu, "CPUINFO", tmp_path / "cpuinfo")
    (tmp_path / "cpuinfo").write_text(
        "processor\t: 0\ncpu MHz\t\t: 2596.132\n\nprocessor\t: 1\ncpu MHz\t\t: 1800.5\n"
    )
    assert hostcpu.cpu_clock({0, 1}) == {"governor": None, "cpu_mhz": [2596.132, 1800.5]}
    for n, governor in ((0, "performance"), (1, "powersave")):
        freq = tmp_path / "sys" / f"cpu{n}" / "cpufreq"
        freq.mkdir(parents=True)
        (freq / "scaling_governor").write_text(governor + "\n")
        (freq / "scaling_cur_freq").write_text("3000000\n")
    assert hostcpu.cpu_clock({0, 1}) == {
        "governor": "performance,powersave",
        "cpu_mhz": [3000.0, 3000.0],
    }
    (tmp_path / "cpuinfo").unlink()
    assert hostcpu.cpu_clock({5}) == {"governor": None, "cpu_mhz": None}


def test_cpuinfo_without_mhz() -> None:
    assert cpuinfo_mhz("processor\t: 0\nBogoMIPS\t: 50.00\n") == {}
