"""sysbench-style microbenchmarks (docs/lab-file.md, The micro benchmark): lab sizes ->
ordered step plans.

Order: load, the reads, the writes, the post-write cleanup, the reads again, then delete
and insert. The reads before the writes are reported as `<name>.pre`. Microbenchmarks
whose range is longer than a table (read-only-range10000 on small tables) are left out.
"""

from __future__ import annotations

from dbregress.benchmarks.plan import StepPlan
from dbregress.engines.base import Sizes
from dbregress.lab.file import MicroSizes
from dbregress.lab.micro_names import PRE, READS, WRITES, loadgen_step
from dbregress.shapes.spec import EngineSpec, StepSpec, WorkloadFields

LAST = ("delete", "insert")  # they change the table's size, so they run at the very end


def _timed(name: str, sizes: MicroSizes) -> StepPlan:
    step, range_size = loadgen_step(name)
    section: WorkloadFields = {
        "tables": sizes.tables,
        "rows": sizes.rows,
        "duration_s": sizes.seconds,
    }
    if range_size is not None:
        section["range_size"] = range_size
    return StepPlan(name, step, section, duration_s=sizes.seconds)


def plan(sizes: MicroSizes) -> list[StepPlan]:
    def chosen(names: tuple[str, ...]) -> list[str]:
        # a range longer than the table is not the microbenchmark its name promises
        fits = [n for n in names if (loadgen_step(n)[1] or 0) <= sizes.rows]
        return [n for n in fits if not sizes.only or n in sizes.only]

    reads, writes = chosen(READS), chosen(WRITES)
    base: WorkloadFields = {"tables": sizes.tables, "rows": sizes.rows}
    plans = [StepPlan("load", "load", base.copy(), reported=False, work=sizes.total_rows)]
    if sizes.reads_before_writes:
        plans += [_timed(n + PRE, sizes) for n in reads]
    plans += [_timed(n, sizes) for n in writes if n not in LAST]
    plans.append(
        StepPlan(
            "cleanup",
            "cleanup",
            base.copy(),
            reported=False,
            wait_after_s=sizes.cleanup_wait(),
            work=sizes.total_rows,
        )
    )
    plans += [_timed(n, sizes) for n in reads]
    plans += [_timed(n, sizes) for n in writes if n in LAST]
    return plans


def step_spec(connection: EngineSpec, plan: StepPlan, clients: int, seed: int) -> StepSpec:
    """The loadgen step spec (schema/step-spec.schema.json) of one microbenchmark step."""
    return {
        "engine": connection,
        "workload": plan.workload("micro"),
        "clients": clients,
        "seed": seed,
    }


# sbtest rows: id, k, c char(120), pad char(60), plus the k index: about 250 bytes each.
BYTES_PER_ROW = 250


def engine_sizes(sizes: MicroSizes, memory_bytes: int) -> Sizes:
    """Cached (byrx): the data fits in the engine's cache, capped at a quarter of memory."""
    data_mb = sizes.total_rows * BYTES_PER_ROW // 2**20
    cache_mb = max(128, min(data_mb * 3 // 2 // 64 * 64 + 64, memory_bytes // 4 // 2**20))
    return Sizes(cache_mb=cache_mb, wal_mb=max(1024, 2 * cache_mb), data_mb=data_mb)
