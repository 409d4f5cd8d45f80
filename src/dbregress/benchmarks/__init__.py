"""Benchmarks: an ordered list of steps, each turned into a loadgen step spec.

One dispatcher, so the runner never branches on the benchmark's name.
"""

from __future__ import annotations

from dbregress.benchmarks import insert, kv, micro
from dbregress.benchmarks.plan import PinnedPace, StepPlan
from dbregress.engines.base import Sizes
from dbregress.lab.file import Comparison, InsertSizes, KvSizes, MicroSizes
from dbregress.shapes.spec import EngineSpec, StepSpec


def plans(comparison: Comparison) -> list[StepPlan]:
    if isinstance(comparison.sizes, InsertSizes):
        return insert.plan(comparison.sizes)
    if isinstance(comparison.sizes, MicroSizes):
        return micro.plan(comparison.sizes)
    return kv.plan(comparison.sizes)


def step_spec(
    comparison: Comparison, connection: EngineSpec, plan: StepPlan, seed: int
) -> StepSpec:
    if isinstance(comparison.sizes, InsertSizes):
        return insert.step_spec(connection, plan, comparison.sizes.clients, seed)
    if isinstance(comparison.sizes, MicroSizes):
        return micro.step_spec(connection, plan, comparison.sizes.clients, seed)
    return kv.step_spec(connection, plan, comparison.sizes.threads, seed)


def counted_pace(comparison: Comparison, plan: StepPlan) -> PinnedPace | None:
    """The writers of a paced step's counted window, the same in every build and on
    every host (PinnedPace); None for a step without paced writers."""
    if isinstance(comparison.sizes, InsertSizes):
        return insert.counted_pace(plan)
    if isinstance(comparison.sizes, KvSizes):
        return kv.counted_pace(comparison.sizes, plan)
    return None


def engine_sizes(comparison: Comparison, memory_bytes: int) -> Sizes:
    sizes = comparison.sizes
    if isinstance(sizes, KvSizes):  # the engine's preset sizes its cache from the data
        return Sizes(cache_mb=0, wal_mb=0, data_mb=sizes.data_mb)
    if isinstance(sizes, MicroSizes):
        return micro.engine_sizes(sizes, memory_bytes)
    return insert.engine_sizes(sizes, memory_bytes)
