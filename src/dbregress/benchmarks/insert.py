"""The Insert Benchmark (docs/lab-file.md, Steps): lab sizes -> ordered step plans."""

from __future__ import annotations

import math

from dbregress.benchmarks.plan import PinnedPace, StepPlan
from dbregress.engines.base import Sizes
from dbregress.lab.file import InsertSizes
from dbregress.shapes.spec import EngineSpec, StepSpec

# Bytes a row costs with its three secondary indexes, from l.i0+l.x on PostgreSQL 17
# (about 120 B heap + 3 x 40 B index entries, rounded up for page fill).
BYTES_PER_ROW = 300
MIN_CACHE_MB = 128
WAL_MIN_MB = 1024


# Steps whose inserter has a deleter behind it (the Insert Benchmark's l.i1 and l.i2):
# in the counting replay the two take turns (the insert workload's lockstep), so a window
# holds its inserts and the deletes of the same rows. Without it the deleter fell behind
# under callgrind (a window held about half its deletes: PostgreSQL 17's l.i2 counted
# 180,000 instructions per row, 343,000 in lockstep), and how the two sessions overlapped
# changed what each left the other (index entries marked dead, or not): 2-3% between two
# explain runs of one build (docs/metrics.md).
LOCKSTEP_STEPS = ("l.i1", "l.i2")

# Rows per Q call of the fixed-work steps when the lab does not set rows_per_commit: the
# loadgen's defaults, which its spec schema states (tests/unit/test_step_modes.py checks
# these against it); every other fixed-work step's Q call carries one unit.
ROWS_PER_COMMIT = {"l.i0": 100, "l.i1": 50, "l.i2": 5}


# A q-step's insert and delete batches (the loadgen's default rows per commit of qr and
# qp; the lab's q-steps set none).
QUERY_ROWS_PER_COMMIT = 10
# The Q calls per second a q-step's counted window paces its writers at, in every build
# and on every host: a batch of inserts and one of deletes every 5,000 x 10 / rate Q
# calls (qr100: every 500 queries; qr500: 100; qr1000: 50). At the time lane's rate
# instead (the base's, as measured), the writes per query moved with the host's speed:
# 8,224 and 4,412 queries/s at two points of one bisection, so nearly twice the writes
# in one count per query as in the other.
COUNTED_Q_PER_S = 5_000.0


def counted_pace(plan: StepPlan) -> PinnedPace | None:
    """The writers of a q-step's counted window (PinnedPace); None for a step without
    paced writers."""
    rate = plan.section.get("insert_rate")
    if plan.step not in ("qr", "qp") or not rate:
        return None
    return PinnedPace.near(float(rate) / QUERY_ROWS_PER_COMMIT, COUNTED_Q_PER_S)


def plan(sizes: InsertSizes) -> list[StepPlan]:
    """The lab's steps; rows per commit take the loadgen's per-step defaults (100 for
    l.i0, 50 for l.i1, 5 for l.i2, 10 for the q-steps' inserts: the step spec's schema)."""
    steps: dict[str, StepPlan] = {
        "l.i0": StepPlan(
            "l.i0",
            "l.i0",
            {"rows": sizes.load_rows},
            work=sizes.load_rows * sizes.clients,
        ),
        "l.x": StepPlan("l.x", "l.x", work=sizes.load_rows * sizes.clients),
        "l.i1": StepPlan(
            "l.i1",
            "l.i1",
            {"rows": sizes.write_rows},
            work=2 * sizes.write_rows * sizes.clients,
        ),
        "l.i2": StepPlan(
            "l.i2",
            "l.i2",
            {"rows": sizes.write_rows // 4},
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
                {"duration_s": sizes.query_seconds, "insert_rate": rate},
                duration_s=sizes.query_seconds,
            )
    return [steps[name] for name in sizes.steps]


def step_spec(connection: EngineSpec, plan: StepPlan, clients: int, seed: int) -> StepSpec:
    """The loadgen step spec (schema/step-spec.schema.json) of one step."""
    return {
        "engine": connection,
        "workload": plan.workload("insert"),
        "clients": clients,
        "seed": seed,
    }


def engine_sizes(sizes: InsertSizes, memory_bytes: int) -> Sizes:
    """Cache sized so the data fits (the seeds' cached `byrx` mode), capped at a quarter
    of the host's memory; WAL large enough that checkpoints come from time, not size."""
    data_mb = sizes.total_rows * BYTES_PER_ROW / 2**20
    cache_mb = max(MIN_CACHE_MB, math.ceil(data_mb * 1.5 / 64) * 64)
    cache_mb = min(cache_mb, max(MIN_CACHE_MB, memory_bytes // 4 // 2**20))
    return Sizes(cache_mb=cache_mb, wal_mb=max(WAL_MIN_MB, 2 * cache_mb))
