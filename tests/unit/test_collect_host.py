"""Host facts saved with every run."""

from __future__ import annotations

import json
import os

from dbregress.collect.host import _cpuinfo_model, _mem_total_bytes, host_facts


def test_host_facts() -> None:
    facts = host_facts()
    assert facts["cpu_count"] == os.cpu_count()
    assert facts["cpu_affinity"] == sorted(os.sched_getaffinity(0))
    assert str(facts["kernel"]).startswith("Linux")
    assert isinstance(facts["mem_total_bytes"], int)
    assert facts["perf_counters"] == "unknown"
    json.dumps(facts)  # stored as JSON with the results


def test_parsers() -> None:
    assert _cpuinfo_model("processor\t: 0\nmodel name\t: AMD EPYC 7B13\n") == "AMD EPYC 7B13"
    assert _cpuinfo_model("") == "unknown"
    assert _mem_total_bytes("MemTotal:       1024 kB\n") == 1024 * 1024
