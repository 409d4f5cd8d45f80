"""sysbench 1.0 text reports: one file, one run of one test, one step.

Q is queries/s from `queries: N (X per sec.)` for the SQL tests, else events/s
(`events per second:` of the cpu test, `Total operations: N (X per second)` of the
memory test, `events/s (eps):` of newer releases, or the number of events over the total
time). The latency block's min, avg, max and its percentile (95th by default) are kept,
in µs; sysbench prints no other percentile.
"""

from __future__ import annotations

import re
from pathlib import PurePath

from dbregress.imports.common import Measured, bad, lines, number, safe_name

_VALUE = r"\s+(\d+(?:\.\d+)?)"
_PER_SEC = r"\s+(\d+)\s+\((\d+(?:\.\d+)?) per sec\.\)"
_PER_SECOND = r"\s+(\d+)\s+\((\d+(?:\.\d+)?) per second\)"
# A line that starts with one of these prefixes must match its pattern.
LINES: dict[str, str] = {
    "queries:": r"queries:" + _PER_SEC,
    "transactions:": r"transactions:" + _PER_SEC,
    "events per second:": r"events per second:" + _VALUE,
    "Total operations:": r"Total operations:" + _PER_SECOND,  # the memory test
    "events/s (eps):": r"events/s \(eps\):" + _VALUE,
    "total time:": r"total time:" + _VALUE + "s",
    "time elapsed:": r"time elapsed:" + _VALUE + "s",
    "total number of events:": r"total number of events:\s+(\d+)",
    "Number of threads:": r"Number of threads:\s+(\d+)",
}
LATENCY = {"min:": "min", "avg:": "mean", "max:": "max"}
_PERCENTILE = re.compile(r"(\d+(?:\.\d+)?)th percentile:" + _VALUE)
# The memory test's `4783.02 MiB transferred (4778.30 MiB/sec)`.
_TRANSFERRED = re.compile(r"\d+(?:\.\d+)? MiB transferred \((\d+(?:\.\d+)?) MiB/sec\)")
# Lines of the report of a test that its file does not name (`cpu`, `memory`).
_TEST_LINES = {"Prime numbers limit:": "cpu", "CPU speed:": "cpu", "Running memory speed": "memory"}
_COMMAND = re.compile(r"^\s*(?:[$#>]\s*)?(?:\S*/)?sysbench\s+(.*)$")
COMMANDS = ("prepare", "run", "cleanup", "help", "warmup", "prewarm")


def test_name(texts: list[str]) -> str | None:
    """The test of a command line echoed into the file (`$ sysbench oltp_read_only ...
    run`), or `cpu` or `memory` when that test's own lines are there."""
    for line in texts:
        m = _COMMAND.match(line)
        if m is None or re.match(r"\d+\.\d+", m.group(1)):  # `sysbench 1.0.20 (using ...)`
            continue
        for token in m.group(1).split():
            if not token.startswith("-") and token not in COMMANDS:
                return PurePath(token).name.removesuffix(".lua")
    for line in texts:
        for start, test in _TEST_LINES.items():
            if line.startswith(start):
                return test
    return None


def _percentile_key(text: str) -> str:
    return "p" + text.replace(".", "")


def parse(text: str, source: str, step: str | None = None) -> Measured:
    """The one report of the file, as step `step` (default: its test, else the file's
    stem)."""
    numbered = list(lines(text))
    found: dict[str, tuple[str, ...]] = {}
    latency: dict[str, float | None] = {}
    reports = 0
    in_latency = False
    mib_per_s: float | None = None
    for no, raw in numbered:
        line = raw.strip()
        if line == "Latency (ms):":
            reports += 1
            if reports > 1:
                raise bad(source, no, "a second sysbench report; import one run per file")
            in_latency = True
            continue
        if in_latency:
            in_latency = _latency(line, latency, source, no)
            if in_latency:
                continue
        if transferred := _TRANSFERRED.fullmatch(line):
            mib_per_s = number(transferred.group(1), source, no, "MiB/sec")
        for prefix, pattern in LINES.items():
            if line.startswith(prefix):
                m = re.fullmatch(pattern, line)
                if m is None:
                    raise bad(source, no, f"cannot read {prefix!r} here: {line!r}")
                found[prefix] = m.groups()
    qps, op, count = _q(found, source)
    elapsed = _float(found, "total time:") or _float(found, "time elapsed:")
    name = step or test_name([line for _, line in numbered]) or PurePath(source).stem
    detail: dict[str, float | str] = {"tool": "sysbench"}
    if "Number of threads:" in found:
        detail["threads"] = int(found["Number of threads:"][0])
    if "transactions:" in found:
        detail["transactions_per_s"] = float(found["transactions:"][1])
    if mib_per_s is not None:
        detail["mib_per_s"] = mib_per_s
    return Measured(
        step=safe_name(name, source, None, "step name"),
        qps=qps,
        op=op,
        count=count,
        elapsed_s=elapsed,
        latency_us=latency,
        detail=detail,
    )


def _latency(line: str, latency: dict[str, float | None], source: str, no: int) -> bool:
    """Reads one line of the latency block; False once the block has ended."""
    for prefix, key in LATENCY.items():
        if line.startswith(prefix):
            latency[key] = _us(number(line.removeprefix(prefix).strip(), source, no, prefix))
            return True
    m = _PERCENTILE.fullmatch(line)
    if m is not None:
        latency[_percentile_key(m.group(1))] = _us(number(m.group(2), source, no, "percentile"))
        return True
    return line.startswith("sum:")


def _us(ms: float) -> float:
    return round(ms * 1000, 3)


def _float(found: dict[str, tuple[str, ...]], key: str) -> float | None:
    return float(found[key][0]) if key in found else None


def _q(found: dict[str, tuple[str, ...]], source: str) -> tuple[float, str, int | None]:
    """(Q, its operation, how many) from what the report printed."""
    if "queries:" in found:
        count, rate = found["queries:"]
        return float(rate), "query", int(count)
    events = found.get("total number of events:")
    n = int(events[0]) if events else None
    for key in ("events per second:", "events/s (eps):"):
        if key in found:
            return float(found[key][0]), "event", n
    if "Total operations:" in found:
        count, rate = found["Total operations:"]
        return float(rate), "event", int(count)
    total = _float(found, "total time:")
    if n is not None and total:
        return n / total, "event", n
    raise bad(
        source,
        None,
        "no sysbench result: found neither 'queries: N (X per sec.)' nor "
        "'events per second:' nor 'Total operations: N (X per second)' nor "
        "'total number of events:' with 'total time:'",
    )
