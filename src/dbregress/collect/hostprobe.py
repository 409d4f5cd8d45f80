"""How steady the host itself is, with no engine running: two small probes sampled in
short blocks, whose block-to-block variation is a floor under any step's noise.

- cpu: a loop of integer arithmetic in the interpreter, which stays in the core and its
  first-level caches: it slows when the hypervisor takes the core or the clock drops.
- memory: random reads (a numpy gather) from a buffer sized to sit in the last-level
  cache but not the second: it also slows when other tenants of the physical host fill
  that cache or the memory bus, which steal time and /proc/stat never show.

On a cloud virtual machine the second can vary far more than the first: the host this
project is developed on ran the CPU probe steady to 1% while the memory probe's
one-second blocks ranged from 0.84 to 1.23 of their median.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from dbregress.shapes.calibration import HostProbe, ProbeBlocks

BUFFER_BYTES = 8 << 20  # beyond a typical L2 (0.5-2 MB), inside a typical L3 (16-64 MB)
GATHER = 1 << 18  # random reads per numpy call
BLOCK_S = 1.0


@dataclass(frozen=True)
class Probe:
    """One probe's rates in consecutive blocks, and what they say."""

    name: str
    block_s: float
    rates: list[float]  # work units per second, one per block
    cv: float | None  # coefficient of variation of the block rates
    low: float | None  # slowest block / median
    high: float | None  # fastest block / median

    def as_dict(self) -> ProbeBlocks:
        return {
            "name": self.name,
            "block_s": self.block_s,
            "rates": list(self.rates),
            "cv": self.cv,
            "low": self.low,
            "high": self.high,
        }


def _probe(name: str, seconds: float, block_s: float, work: Callable[[], int]) -> Probe:
    rates = []
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        start, done = time.perf_counter(), 0
        while (now := time.perf_counter()) - start < block_s:
            done += work()
        rates.append(done / (now - start))
    med = statistics.median(rates) if rates else math.nan
    ok = len(rates) >= 2 and med > 0
    return Probe(
        name,
        block_s,
        rates,
        statistics.stdev(rates) / statistics.fmean(rates) if ok else None,
        min(rates) / med if ok else None,
        max(rates) / med if ok else None,
    )


def _cpu_work() -> int:
    x = 1
    for _ in range(20_000):
        x = (x * 1103515245 + 12345) & 0xFFFFFFFF
    return 20_000


def memory_work(buffer_bytes: int = BUFFER_BYTES, seed: int = 1) -> Callable[[], int]:
    """A function doing GATHER random reads from a buffer of buffer_bytes per call."""
    rng = np.random.default_rng(seed)
    buffer = rng.permutation(buffer_bytes // 8).astype(np.int64)
    index = rng.integers(0, buffer.size, GATHER)

    def work() -> int:
        int(buffer[index].sum())
        return GATHER

    work()  # touch every page before timing
    return work


def probe_host(seconds: float = 10.0, block_s: float = BLOCK_S) -> HostProbe:
    """Run the CPU probe for a fifth of `seconds`, then the memory probe for the rest."""
    cpu = _probe("cpu", seconds / 5, block_s, _cpu_work)
    memory = _probe("memory", seconds - seconds / 5, block_s, memory_work())
    return {
        "buffer_bytes": BUFFER_BYTES,
        "cpu": cpu.as_dict(),
        "memory": memory.as_dict(),
    }


def describe(result: HostProbe) -> str:
    """One line: how much each probe's blocks varied."""
    parts = []
    mb = result.get("buffer_bytes", BUFFER_BYTES) / (1 << 20)
    probes = ((result.get("cpu"), "CPU loop"), (result.get("memory"), f"random reads in {mb:g} MB"))
    for p, what in probes:
        if not p or p.get("cv") is None:
            continue
        parts.append(
            f"{what} CV {p['cv']:.1%} over {len(p['rates'])} blocks of {p['block_s']:g} s "
            f"(range {p['low']:.2f}-{p['high']:.2f} of the median)"
        )
    return "; ".join(parts) if parts else "no probe figures"
