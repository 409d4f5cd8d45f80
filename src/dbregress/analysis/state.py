"""The engine's state at a counted window, beside the state at the timed step's measured
window: does the counting replay count the work the time lane timed?

A counting replay runs a window of a few hundred Q calls under callgrind; the time lane
measured seconds of them after a warm-up. Where the engine's caches differ between the
two, the counts judge work the time lane never ran: RocksDB's readrandom at small sizes
missed its block cache on ~70% of the gets of a window opened after 500 warm-up gets
(each miss reads a block and checks its checksum), while the timed window, after 0.5 s
of warm-up, hit it on every get. So both windows' engine counters are kept and
compared: RocksDB's block-cache data hits and misses (its statistics, read by the
loadgen at the window's edges and over the timed step's measured window). A counted
window whose hit rate lies more than TOLERANCE from the timed one's is marked
`state_mismatch`, and its step gets no cost verdict (analysis/cost.py).

Other engines report no such counters to the loadgen yet: their windows carry no state
and are not checked.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TypedDict, TypeVar, cast

from dbregress.shapes.events import EngineStats
from dbregress.shapes.explain import CacheStateJson, EngineState
from dbregress.shapes.replay import ReplayRecord
from dbregress.shapes.run import RunJson
from dbregress.shapes.step_result import StepResultJson

HITS = "rocksdb.block.cache.data.hit"
MISSES = "rocksdb.block.cache.data.miss"
# Most a counted window's block-cache data hit rate may lie from the timed window's (in
# rate, 0.05 = 5 points): a window of a few hundred calls samples the rate roughly, and
# a cold cache is far off (30% against 100%).
TOLERANCE = 0.05
# Warming until the state matches: the counting window may open as soon as the engine's
# block cache is about as warm as the base's timed window had it, rather than after all
# the calls the time lane made up to the middle of its measured window. The loadgen
# probes the hit rate every PROBE_EVERY Q calls (at valgrind's uninstrumented speed, the
# cost of each probe is a statistics read) and opens the window at the first probe whose
# stretch hit at least the base's timed rate less UNTIL_MARGIN. RocksDB's readrandom at
# the quickstart's sizes reaches it after about a sixth of the calls to the middle. A
# margin well inside TOLERANCE: a window that opens there is not withheld for its state.
PROBE_EVERY = 1000
UNTIL_MARGIN = 0.01


def until_rate(base_timed: CacheState | None) -> float:
    """The hit rate a window warms to (0: no probing; the window opens at its
    skip_ops): the base's timed rate less UNTIL_MARGIN."""
    rate = base_timed.hit_rate if base_timed is not None else None
    if rate is None:
        return 0.0
    return max(0.0, rate - UNTIL_MARGIN)


@dataclass(frozen=True)
class CacheState:
    """Block-cache data hits and misses over `ops` Q calls."""

    hits: float
    misses: float
    ops: int

    @property
    def hit_rate(self) -> float | None:
        total = self.hits + self.misses
        return self.hits / total if total else None

    def to_json(self) -> CacheStateJson:
        rate = self.hit_rate
        return {
            "block_cache_data_hits": self.hits,
            "block_cache_data_misses": self.misses,
            "ops": self.ops,
            "hit_rate": None if rate is None else round(rate, 5),
            "misses_per_op": round(self.misses / self.ops, 5) if self.ops else None,
        }


def of_stats(engine_stats: EngineStats | None, ops: int) -> CacheState | None:
    """The state in a loadgen's engine statistics (a summary's `engine_stats` or
    `window_engine_stats`) over `ops` Q calls; None without RocksDB's counters."""
    statistics = (engine_stats.get("statistics") if engine_stats else None) or {}
    if not any(k.startswith("rocksdb.") for k in statistics):
        return None
    return CacheState(float(statistics.get(HITS, 0)), float(statistics.get(MISSES, 0)), ops)


def _count(result: StepResultJson) -> int:
    """The Q calls a step result's measured window counted (a measured step has them)."""
    return int(cast(int, result.get("q", {}).get("count", 0)))


def timed(results: Iterable[StepResultJson]) -> CacheState | None:
    """The timed state of one column's step: its repeats' measured windows pooled
    (stored step results, typed or as read, whose `engine_stats` cover the measured
    window)."""
    states = [s for r in results if (s := of_stats(r.get("engine_stats"), _count(r))) is not None]
    if not states:
        return None
    return CacheState(
        sum(s.hits for s in states), sum(s.misses for s in states), sum(s.ops for s in states)
    )


class Judged(TypedDict, total=False):
    """What a counted step's figures keep of its state (none when the engine reports
    none): both windows' states, and why they differ (None: they agree)."""

    engine_state: EngineState
    state_mismatch: str | None


def judged(
    window_engine_stats: EngineStats | None,
    ops: int,
    timed_state: CacheState | None,
    tolerance: float = TOLERANCE,
) -> Judged:
    """A counted step's record of its state: `engine_state` (the counted window's and
    the timed window's) and `state_mismatch` (None, or why the two differ); {} when the
    engine reports no state."""
    counted = of_stats(window_engine_stats, ops)
    if counted is None:
        return {}
    record: Judged = {
        "engine_state": {
            "counted": counted.to_json(),
            "timed": timed_state.to_json() if timed_state is not None else None,
            "tolerance": tolerance,
        },
        "state_mismatch": None,
    }
    mine, theirs = counted.hit_rate, timed_state.hit_rate if timed_state else None
    if mine is not None and theirs is not None and abs(mine - theirs) > tolerance:
        record["state_mismatch"] = (
            f"counted window's block-cache data hit rate {mine:.1%} is not the timed "
            f"window's {theirs:.1%} (within {tolerance * 100:.0f} points): the count "
            "judges a cache state the time lane did not run"
        )
    return record


# -- for the verdicts: each side's state over its replays ------------------------------

Key = tuple[str, str, str]  # (comparison, column, step)
_C = TypeVar("_C")


@dataclass(frozen=True)
class SideState:
    """One column's counted windows of a step against its timed window: the mean
    counted hit rate over its ok replays, the timed one, and the first mismatch."""

    counted: float | None
    timed: float | None
    mismatch: str | None
    replays: int


def _side(replays: list[ReplayRecord], column: str, step: str) -> SideState | None:
    counted: list[float] = []
    timed: float | None = None
    mismatch: str | None = None
    for r in replays:
        figures = r["steps"].get(step) if r.get("column") == column else None
        if figures is None or (state := figures.get("engine_state")) is None:
            continue
        if (rate := state["counted"]["hit_rate"]) is not None:
            counted.append(float(rate))
        if (timed_state := state.get("timed")) is not None:
            timed = timed_state["hit_rate"]
        mismatch = mismatch or figures.get("state_mismatch")
    if not counted and mismatch is None:
        return None
    mean = sum(counted) / len(counted) if counted else None
    return SideState(mean, timed, mismatch, len(counted))


def sides(
    record: RunJson, replays: list[ReplayRecord]
) -> dict[Key, tuple[SideState | None, SideState | None]]:
    """(base's, column's) state of every (comparison, column, step) the replays count."""
    ok = [r for r in replays if r.get("status") == "ok"]
    steps = {s for r in ok for s in r["steps"]}
    out = {}
    for comp in record["comparisons"]:
        base, *others = comp["labels"]
        for label in others:
            for step in steps:
                pair = (_side(ok, base, step), _side(ok, label, step))
                if pair != (None, None):
                    out[(comp["name"], label, step)] = pair
    return out


def withheld(verdict: _C, pair: tuple[SideState | None, SideState | None] | None) -> _C:
    """A cost verdict (analysis/cost.py's CostComparison) with the sides' states, made
    `undecided` when a side's counted window did not meet its timed window's state."""
    if pair is None:
        return verdict
    found = dataclasses.replace(verdict, state=pair)  # type: ignore[type-var]
    for who, side in zip(("base", "column"), pair, strict=True):
        if side is not None and side.mismatch is not None:
            return dataclasses.replace(  # type: ignore[type-var]
                found, verdict="undecided", reason=f"the {who}'s {side.mismatch}"
            )
    return found
