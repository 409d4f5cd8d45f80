"""The Insert Benchmark (METHOD.md section 2): lab sizes -> ordered step plans."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from dbregress.engines.base import Sizes
from dbregress.lab import InsertSizes

# Bytes a row costs with its three secondary indexes, from l.i0+l.x on PostgreSQL 17
# (about 120 B heap + 3 x 40 B index entries, rounded up for page fill).
BYTES_PER_ROW = 300
MIN_CACHE_MB = 128
WAL_MIN_MB = 1024


@dataclass(frozen=True)
class StepPlan:
    name: str  # as reported: l.i0, qr100, ...
    step: str  # as the loadgen knows it: l.i0, qr, ...
    insert: dict[str, Any] = field(default_factory=dict)
    reported: bool = True  # the cleanup has no Q of its own
    wait_after_s: float = 0.0  # quiet time after the step (post-write cleanup)
    work: int = 0  # rows to insert, or 0 for timed steps; for progress
    duration_s: float = 0.0  # timed steps

    def expected_s(self, rows_per_s: float = 20_000.0) -> float:
        """A generous guess of the step's length, for progress and hang detection."""
        return self.duration_s + self.work / rows_per_s


def plan(sizes: InsertSizes) -> list[StepPlan]:
    steps: dict[str, StepPlan] = {
        "l.i0": StepPlan(
            "l.i0",
            "l.i0",
            {"rows": sizes.load_rows, "rows_per_commit": 100},
            work=sizes.load_rows * sizes.clients,
        ),
        "l.x": StepPlan("l.x", "l.x", work=sizes.load_rows * sizes.clients),
        "l.i1": StepPlan(
            "l.i1",
            "l.i1",
            {"rows": sizes.write_rows, "rows_per_commit": 50},
            work=2 * sizes.write_rows * sizes.clients,
        ),
        "l.i2": StepPlan(
            "l.i2",
            "l.i2",
            {"rows": sizes.write_rows // 4, "rows_per_commit": 5},
            work=sizes.write_rows * sizes.clients,
        ),
        "cleanup": StepPlan(
            "cleanup",
            "cleanup",
            reported=False,
            wait_after_s=sizes.cleanup_wait(),
            work=sizes.total_rows,
        ),
    }
    for rate in (100, 500, 1000):
        for kind in ("qr", "qp"):
            name = f"{kind}{rate}"
            steps[name] = StepPlan(
                name,
                kind,
                {"duration_s": sizes.query_seconds, "insert_rate": rate, "rows_per_commit": 10},
                duration_s=sizes.query_seconds,
            )
    return [steps[name] for name in sizes.steps]


def step_spec(
    connection: dict[str, Any], plan: StepPlan, clients: int, seed: int
) -> dict[str, Any]:
    """The loadgen step spec (schema/step-spec.schema.json) of one step."""
    return {
        "engine": connection,
        "workload": "insert",
        "step": plan.step,
        "clients": clients,
        "seed": seed,
        "insert": plan.insert,
    }


def engine_sizes(sizes: InsertSizes, memory_bytes: int) -> Sizes:
    """Cache sized so the data fits (the seeds' cached `byrx` mode), capped at a quarter
    of the host's memory; WAL large enough that checkpoints come from time, not size."""
    data_mb = sizes.total_rows * BYTES_PER_ROW / 2**20
    cache_mb = max(MIN_CACHE_MB, math.ceil(data_mb * 1.5 / 64) * 64)
    cache_mb = min(cache_mb, max(MIN_CACHE_MB, memory_bytes // 4 // 2**20))
    return Sizes(cache_mb=cache_mb, wal_mb=max(WAL_MIN_MB, 2 * cache_mb))
