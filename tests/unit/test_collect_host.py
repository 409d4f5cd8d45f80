"""Host facts saved with every run."""

from __future__ import annotations

import json
import os

from dbregress.collect import pmu
from dbregress.collect.host import _cpuinfo_model, _mem_total_bytes, host_facts


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


def test_parsers() -> None:
    assert _cpuinfo_model("processor\t: 0\nmodel name\t: AMD EPYC 7B13\n") == "AMD EPYC 7B13"
    assert _cpuinfo_model("") == "unknown"
    assert _mem_total_bytes("MemTotal:       1024 kB\n") == 1024 * 1024
