"""db_bench output: each benchmark line is a step, Q its ops/sec.

    readrandom   :       3.456 micros/op 289351 ops/sec 1.000 seconds 289351 operations; ...

With --histogram=1 a block follows the line (`Microseconds per read:`, `Count: ...
Average: ...`, `Min: ... Median: ... Max: ...`, `Percentiles: P50: ... P99: ...`): its
figures become the step's latency (µs). A benchmark run twice in one file (e.g.
--benchmarks=readrandom,readrandom) gets .2, .3, ... after its name.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from dbregress.imports.common import Measured, bad, lines, number, safe_name

_NUM = r"([0-9.]+)"
BENCH = re.compile(
    r"(\S+)\s+:\s+" + _NUM + r" micros/op (\d+) ops/sec"
    r"(?:[ ;]+" + _NUM + r" seconds (\d+) operations)?"
    r"(?:[ ;]+" + _NUM + r" MB/s)?.*"
)
BENCH_START = re.compile(r"\S+\s+:\s+[0-9.]+ micros/op")
VERSION = re.compile(r"RocksDB:\s+version\s+(\S+)")
HISTOGRAM = re.compile(r"Microseconds per (\w+):")
# Figures of a histogram block: name as printed -> stored latency key (µs).
FIGURES = {
    "Average": "mean",
    "Min": "min",
    "Median": None,  # P50 is printed too
    "Max": "max",
    "P50": "p50",
    "P95": "p95",
    "P99": "p99",
    "P99.9": "p999",
}
_PAIR = re.compile(r"(\w+(?:\.\d+)?):\s+(\S+)")


@dataclass
class _Step:
    """A benchmark line read so far; its histogram block, if one follows, adds the
    operation's name and its latency figures."""

    step: str
    qps: float
    count: int | None
    elapsed_s: float | None
    detail: dict[str, float | str]
    latency: dict[str, float | None] = field(default_factory=dict)
    op: str = "op"


def version(text: str) -> str | None:
    """The RocksDB version db_bench printed in its header."""
    for _, line in lines(text):
        m = VERSION.match(line.strip())
        if m:
            return f"RocksDB {m.group(1)}"
    return None


def parse(text: str, source: str) -> list[Measured]:
    steps: list[_Step] = []
    histogram: _Step | None = None  # the block being read
    for no, raw in lines(text):
        line = raw.strip()
        if BENCH_START.match(line):
            m = BENCH.fullmatch(line)
            if m is None:
                raise bad(source, no, f"cannot read this benchmark line: {line!r}")
            steps.append(_step(m, source, no, [s.step for s in steps]))
            histogram = None
            continue
        h = HISTOGRAM.fullmatch(line)
        if h is not None:
            if not steps:
                raise bad(source, no, "a histogram before any benchmark line")
            histogram = steps[-1]
            histogram.op = h.group(1)
            continue
        if histogram is not None and line.startswith(("Count:", "Min:", "Percentiles:")):
            _figures(line, histogram, source, no)
    return [
        Measured(
            step=s.step,
            qps=s.qps,
            op=s.op,
            count=s.count,
            elapsed_s=s.elapsed_s,
            latency_us=s.latency,
            detail=s.detail,
        )
        for s in steps
    ]


def _step(m: re.Match[str], source: str, no: int, before: list[str]) -> _Step:
    name = safe_name(m.group(1), source, no, "benchmark name")
    runs = sum(1 for s in before if s == name or s.startswith(f"{name}."))
    detail: dict[str, float | str] = {
        "tool": "db_bench",
        "micros_per_op": number(m.group(2), source, no, "micros/op"),
    }
    if m.group(6) is not None:
        detail["mb_per_s"] = number(m.group(6), source, no, "MB/s")
    return _Step(
        step=name if not runs else f"{name}.{runs + 1}",
        qps=number(m.group(3), source, no, "ops/sec"),
        count=int(m.group(5)) if m.group(5) is not None else None,
        elapsed_s=number(m.group(4), source, no, "seconds") if m.group(4) else None,
        detail=detail,
    )


def _figures(line: str, step: _Step, source: str, no: int) -> None:
    for name, value in _PAIR.findall(line.removeprefix("Percentiles:")):
        if name == "Count":
            step.detail["histogram_count"] = int(number(value, source, no, name))
        key = FIGURES.get(name)
        if key is not None:
            step.latency[key] = number(value, source, no, name)
