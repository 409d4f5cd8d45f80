"""The engine's state at a counted window, beside the state at the timed step's measured
window: does the counting replay count the work the time lane timed?

A counting replay runs a window of a few hundred Q calls under callgrind; the time lane
measured seconds of them after a warm-up. Where the engine's caches differ between the
two, the counts judge work the time lane never ran: RocksDB's readrandom at small sizes
missed its block cache on ~70% of the gets of a window opened after 500 warm-up gets
(each miss reads a block and checks its checksum), while the timed window, after 0.5 s
of warm-up, hit it on every get. So both windows' cache counters are kept (the loadgen
reads them at each window's edges: loadgen/src/engine_stats.rs) and compared, per
operation of the step's Q unit:

- RocksDB: block-cache data hits and misses (its statistics);
- PostgreSQL: the 8 KB blocks the sessions' backends read (/proc/PID/io), each a
  shared-buffer miss; its hits make no system call and its own statistics are flushed
  too lazily to read at a window's edge, so it has misses only (no hit rate);
- InnoDB: buffer-pool page requests and the pages read in (SHOW GLOBAL STATUS);
- MyRocks: its RocksDB's block-cache data hits and misses (SHOW GLOBAL STATUS).

The tolerance is derived, not fixed: the misses per operation that would move the
step's count by a quarter of the cost band, at the engine's measured cost per miss
(COST_PER_MISS). A side whose counted windows lie further than that from its timed
window's, or that has no timed state, or whose windows recorded no state or another
engine's than its tables' (`engine_kind`), is withheld: undecided, with the reason. A
side is judged over the replays its verdict pools only (`sides`' `keep`). Counters are
global (background lookups count too): a counted window that asked the cache nothing
(RocksDB's puts) is not judged (`looked_up`). A side within its tolerance may still be
biased by up to a quarter of the band: `SideState.bias` keeps it, and state_bias.py
widens a ratio's interval by it (docs/verdicts.md, "The engine's state").
"""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TypedDict, TypeVar, cast

from dbregress.configs import family_of
from dbregress.configs import mysql as mysql_configs
from dbregress.lab.file import VerdictPolicy
from dbregress.shapes.events import EngineStats
from dbregress.shapes.explain import CacheStateJson, EngineState
from dbregress.shapes.replay import ReplayRecord
from dbregress.shapes.run import RunJson
from dbregress.shapes.step_result import StepResultJson

HITS = "rocksdb.block.cache.data.hit"
MISSES = "rocksdb.block.cache.data.miss"
PG_READ_BYTES = "postgres.backend.read_bytes"
PG_READ_CALLS = "postgres.backend.read_calls"
INNODB_REQUESTS = "innodb.buffer_pool_read_requests"
INNODB_READS = "innodb.buffer_pool_reads"
# The MySQL family's MyRocks: its RocksDB's block-cache data tickers (SHOW GLOBAL STATUS)
MYROCKS = "myrocks"
MYROCKS_HITS = "myrocks.block_cache_data_hit"
MYROCKS_MISSES = "myrocks.block_cache_data_miss"
# PostgreSQL's block size (BLCKSZ) in the builds dbregress makes and fetches: a miss
# reads this many bytes (PostgreSQL 17 may read neighbours in one call: bytes count
# them all).
PG_BLOCK = 8192

# What each kind of state counts, for the reports.
COUNTED = {
    "rocksdb": "RocksDB block-cache data blocks",
    "postgres": "PostgreSQL 8 KB blocks read by the sessions' backends",
    "innodb": "InnoDB buffer-pool pages",
    "myrocks": "MyRocks block-cache data blocks",
}
# A miss's cost in the lane's count, per kind and metric: the extra work one more miss
# adds, measured as the slope between counting replays with the lab's cache and with a
# tiny one (the test hook DBREGRESS_TEST_REPLAY_SETTINGS); the largest slope measured
# is kept, so the tolerance is the strictest the measurements support. The labs, the
# commands and every slope: docs/verdicts.md, "The engine's state".
COST_PER_MISS: dict[str, dict[str, float]] = {
    "rocksdb": {"estimated_cycles": 19_300.0, "instructions": 12_200.0},
    "postgres": {"estimated_cycles": 3_300.0, "instructions": 2_100.0},
    "innodb": {"estimated_cycles": 9_100.0, "instructions": 3_800.0},
    "myrocks": {"estimated_cycles": 10_800.0, "instructions": 5_100.0},
}
# The share of the cost band the state may move the count by.
BAND_SHARE = 0.25

# Warming until the state matches: the counting window may open as soon as the engine's
# block cache is about as warm as the base's timed window had it, rather than after all
# the calls the time lane made up to the middle of its measured window. The loadgen
# probes the hit rate every PROBE_EVERY Q calls (at valgrind's uninstrumented speed, the
# cost of each probe is a statistics read) and opens the window at the first probe whose
# stretch hit at least the base's timed rate less UNTIL_MARGIN. RocksDB (embedded, one
# client) only: the loadgen probes nothing else. The margin is below a stretch's
# resolution (one miss in PROBE_EVERY calls): against a timed window that never missed,
# a stretch without a miss. A margin of 1 point opened windows that hit 99.1-99.5%
# against 99.9-100% timed; one of 0.1 point, windows that still missed 0.002 per get
# against none timed, near the tolerance (a few thousandths per get: `tolerance`). A
# window that never reaches it opens at the middle.
PROBE_EVERY = 1000
UNTIL_MARGIN = 0.0002


def until_rate(base_timed: CacheState | None) -> float:
    """The hit rate a window warms to (0: no probing; the window opens at its
    skip_ops): the base's timed rate less UNTIL_MARGIN, for RocksDB's block cache."""
    if base_timed is None or base_timed.kind != "rocksdb":
        return 0.0
    rate = base_timed.hit_rate
    if rate is None:
        return 0.0
    return max(0.0, rate - UNTIL_MARGIN)


@dataclass(frozen=True)
class CacheState:
    """The engine's cache hits (None where it does not count them) and misses over `ops`
    of the step's Q units."""

    hits: float | None
    misses: float
    ops: float
    kind: str = "rocksdb"

    @property
    def hit_rate(self) -> float | None:
        if self.hits is None:
            return None
        total = self.hits + self.misses
        return self.hits / total if total else None

    @property
    def misses_per_op(self) -> float | None:
        return self.misses / self.ops if self.ops else None

    @property
    def looked_up(self) -> bool:
        """Whether the window asked anything of the cache (unknown without hits). An
        engine whose counters are global (RocksDB's statistics, InnoDB's and MyRocks'
        status) counts its background work's lookups too: a window of puts asks none,
        and the misses of the timed window's flushes and compactions are none of its
        count's (the count is of the calls' own threads)."""
        return self.hits is None or self.hits + self.misses > 0

    def per(self, ops: float) -> CacheState:
        """The same counters over `ops` units (a window's rows, where it counts rows)."""
        return dataclasses.replace(self, ops=ops)

    def to_json(self) -> CacheStateJson:
        rate, per_op = self.hit_rate, self.misses_per_op
        return {
            "kind": self.kind,
            "hits": self.hits,
            "misses": self.misses,
            "ops": int(self.ops),
            "hit_rate": None if rate is None else round(rate, 5),
            "misses_per_op": None if per_op is None else round(per_op, 6),
        }

    @staticmethod
    def from_json(j: CacheStateJson) -> CacheState:
        """As stored (and as RocksDB's records stored it before `kind`)."""
        if "misses" in j:
            return CacheState(j.get("hits"), float(j["misses"]), j["ops"], j.get("kind", "rocksdb"))
        hits = j.get("block_cache_data_hits")
        return CacheState(hits, float(j.get("block_cache_data_misses", 0.0)), j["ops"])


def of_stats(engine_stats: EngineStats | None, ops: float) -> CacheState | None:
    """The state in a loadgen's engine statistics (a summary's `engine_stats` or
    `window_engine_stats`) over `ops` Q units; None without cache counters."""
    statistics = (engine_stats.get("statistics") if engine_stats else None) or {}
    if PG_READ_BYTES in statistics:
        return CacheState(None, float(statistics[PG_READ_BYTES]) / PG_BLOCK, ops, "postgres")
    if INNODB_REQUESTS in statistics and INNODB_READS in statistics:
        reads = float(statistics[INNODB_READS])
        return CacheState(float(statistics[INNODB_REQUESTS]) - reads, reads, ops, "innodb")
    if MYROCKS_HITS in statistics and MYROCKS_MISSES in statistics:
        hits, misses = float(statistics[MYROCKS_HITS]), float(statistics[MYROCKS_MISSES])
        return CacheState(hits, misses, ops, MYROCKS)
    if not any(k.startswith("rocksdb.") for k in statistics):
        return None
    return CacheState(float(statistics.get(HITS, 0)), float(statistics.get(MISSES, 0)), ops)


def _count(result: StepResultJson) -> int:
    """The Q units a step result's measured window counted (a measured step has them)."""
    return int(cast(int, result.get("q", {}).get("count", 0)))


def timed(results: Iterable[StepResultJson]) -> CacheState | None:
    """The timed state of one column's step: its repeats' measured windows pooled
    (stored step results, typed or as read, whose `engine_stats` cover the measured
    window)."""
    states = [s for r in results if (s := of_stats(r.get("engine_stats"), _count(r))) is not None]
    if not states:
        return None
    hits = [s.hits for s in states]
    return CacheState(
        None if None in hits else sum(h for h in hits if h is not None),
        sum(s.misses for s in states),
        sum(s.ops for s in states),
        states[0].kind,
    )


def tolerance(kind: str, per_op: Mapping[str, float], band: float) -> float | None:
    """The misses per operation that would move a count of `per_op` (a replay's
    figures per operation) by BAND_SHARE of the cost band at the engine's cost per
    miss: the smaller over the metrics COST_PER_MISS has. None without them."""
    costs = COST_PER_MISS.get(kind, {})
    found = [
        BAND_SHARE * band * float(per_op[m]) / cost
        for m, cost in costs.items()
        if m in per_op and per_op[m] > 0
    ]
    return min(found) if found else None


class Judged(TypedDict, total=False):
    """What a counted step's figures keep of its state (none when the engine reports
    none): both windows' states, and why they differ (None: they agree)."""

    engine_state: EngineState
    state_mismatch: str | None


def judged(
    window_engine_stats: EngineStats | None, ops: int, timed_state: CacheState | None
) -> Judged:
    """A counted step's record of its state: `engine_state` (the counted window's and
    the timed window's) and `state_mismatch` (None until `settle` judges it from the
    count); {} when the engine reports no state."""
    counted = of_stats(window_engine_stats, ops)
    if counted is None:
        return {}
    return {
        "engine_state": {
            "counted": counted.to_json(),
            "timed": timed_state.to_json() if timed_state is not None else None,
            "tolerance_misses_per_op": None,
        },
        "state_mismatch": None,
    }


class Counted(TypedDict, total=False):
    """The parts of a counted window's figures (CountFigures, or a replay's ReplayStep)
    `settle` reads and writes."""

    divisor: float
    per_op: dict[str, float]
    engine_state: EngineState
    state_mismatch: str | None


def settle(figures: Counted, band: float) -> None:
    """Judge a counted window's state (its figures, as `judged` left them) once its
    count is known: the counted state per unit of the count (rows, where it counts
    rows), its tolerance from the count (`tolerance`) and `state_mismatch`."""
    state = figures.get("engine_state")
    if state is None:
        return
    counted = CacheState.from_json(state["counted"]).per(figures["divisor"])
    timed_json = state.get("timed")
    timed_state = CacheState.from_json(timed_json) if timed_json else None
    tol = tolerance(counted.kind, figures["per_op"], band)
    state["counted"] = counted.to_json()
    state["tolerance_misses_per_op"] = None if tol is None else round(tol, 6)
    figures["state_mismatch"] = (
        mismatch(counted.kind, counted.misses_per_op, timed_state, tol)
        if counted.looked_up
        else None
    )


def mismatch(
    kind: str, mine: float | None, timed_state: CacheState | None, tol: float | None
) -> str | None:
    """Why counted windows that missed `mine` per operation did not meet the timed
    state (None: within the tolerance `tol`, misses per operation)."""
    what = COUNTED.get(kind, kind)
    theirs = timed_state.misses_per_op if timed_state is not None else None
    if theirs is None:
        return (
            f"engine state was not measured at the timed window ({what}): the time lane's "
            "step recorded none, so the counted window has no timed state to be checked "
            "against"
        )
    if mine is None or tol is None:  # never read as "the states agree"
        return (
            f"engine state could not be checked ({what}): the counted windows have "
            f"{'no misses per operation' if mine is None else 'no count to size a tolerance'}"
        )
    if abs(mine - theirs) <= tol:
        return None
    colder = "more" if mine > theirs else "fewer"
    return (
        f"counted windows missed {mine:.4f} per operation ({what}), {colder} than the "
        f"timed window's {theirs:.4f} by more than {tol:.4f}, the misses that would move "
        "the count by a quarter of the cost band: the count judges a cache state the "
        "time lane did not run"
    )


# -- for the verdicts: each side's state over its replays ------------------------------

Key = tuple[str, str, str]  # (comparison, column, step)
# Whether a replay's count of a key's step is one the key's verdict pools (cost.py
# `keeps`: the one counting method and scope the verdict keeps)
Keep = Callable[[Key, ReplayRecord], bool]
_C = TypeVar("_C")


@dataclass(frozen=True)
class SideState:
    """One column's counted windows of a step against its timed window: the mean
    counted hit rate and misses per operation over its ok replays, the timed ones, the
    tolerance (misses per operation, from the replays' mean count) and why they do not
    meet (None: they do)."""

    counted: float | None  # hit rate
    timed: float | None
    mismatch: str | None
    replays: int
    kind: str = "rocksdb"
    counted_misses: float | None = None  # per operation
    timed_misses: float | None = None
    tolerance: float | None = None  # misses per operation
    # How far the state's difference may move this side's count, per metric with a
    # COST_PER_MISS: (counted - timed misses per operation) x the cost per miss / the
    # replays' mean count, signed (above 0: the count may hold more than the timed
    # state's work). state_bias.py's ratio_bias turns both sides' into a ratio's.
    bias: Mapping[str, float] = dataclasses.field(default_factory=dict)


def _mean(values: list[float]) -> float | None:
    return statistics.fmean(values) if values else None


def engine_kind(record: RunJson, column: str) -> str | None:
    """The state a column's engine reports (a COUNTED kind), MYROCKS for a MySQL-family
    column whose tables are MyRocks (its profile `myrocks`, or settings that need it),
    None for an engine that has no cache to report (the null engine) or a
    column the record does not name."""
    entry = next((c for c in record.get("columns", []) if c["label"] == column), None)
    if entry is None:
        return None
    engine = entry["build"].partition("@")[0]
    if engine in ("postgres", "rocksdb"):
        return engine
    if family_of(engine) != "mysql":
        return None
    settings = dict(entry.get("settings") or {})
    for name, job in record.get("jobs", {}).items():  # as the engine applied them
        if name.partition("/")[0] == column:
            settings |= job.get("settings") or {}
    rocks = mysql_configs.uses_rocksdb(mysql_configs.canonical(settings))
    return MYROCKS if rocks or entry.get("config") == MYROCKS else "innodb"


def _unmeasured(kind: str, missing: int, n: int) -> str:
    return (
        f"engine state was not measured: {missing} of {n} counted window(s) recorded no "
        f"{COUNTED[kind]} (replays counted before dbregress read them, or counters the "
        "loadgen did not get)"
    )


def _another_engine(
    kind: str, counted: list[CacheState], timed: list[CacheState | None]
) -> str | None:
    """Why windows that read another engine's counters than the column's tables keep
    (InnoDB's where the profile says MyRocks, or the reverse) judge nothing; None when
    they read the tables' own."""
    kinds = {c.kind for c in counted} | {t.kind for t in timed if t is not None}
    if kinds == {kind}:
        return None
    read = ", ".join(COUNTED.get(k, k) for k in sorted(kinds))
    return (
        f"engine state was not measured: its windows read {read}, where the column's "
        f"tables keep {COUNTED.get(kind, kind)} (its profile and settings)"
    )


def side_state(
    record: RunJson, replays: Iterable[ReplayRecord], column: str, step: str, band: float
) -> SideState | None:
    """A column's state at a step over `replays` (those its verdict pools; the ok ones
    are read): None where its engine reports no state and none was recorded. An engine
    that should report one (engine_kind) but whose windows recorded none gets a
    SideState whose mismatch says the state was not measured."""
    kind = engine_kind(record, column)
    counted: list[CacheState] = []
    per_op: dict[str, list[float]] = {}
    timed_states: list[CacheState | None] = []
    n = 0
    for r in replays:
        ok = r.get("status") == "ok" and r.get("column") == column
        figures = r["steps"].get(step) if ok else None
        if figures is None:
            continue
        n += 1
        if (state := figures.get("engine_state")) is None:
            continue
        # settled (the cost lane's): per unit of the count; else per Q call
        counted.append(CacheState.from_json(state["counted"]))
        for metric, value in figures["per_op"].items():
            per_op.setdefault(metric, []).append(value)
        t = state.get("timed")
        timed_states.append(CacheState.from_json(t) if t is not None else None)
    if n and kind is not None and len(counted) < n:
        return SideState(None, None, _unmeasured(kind, n - len(counted), n), n, kind)
    if not counted:
        return None
    if kind is not None and (other := _another_engine(kind, counted, timed_states)):
        return SideState(None, None, other, n, kind)
    kind = counted[0].kind
    # every window is checked against a timed state: one without leaves none to use
    timed_state = None if None in timed_states else timed_states[-1]
    rates = [h for s in counted if (h := s.hit_rate) is not None]
    misses = [m for s in counted if (m := s.misses_per_op) is not None]
    mean_per_op = {m: v for m, vs in per_op.items() if (v := _mean(vs)) is not None}
    tol = tolerance(kind, mean_per_op, band)
    # judged where a counted window asked the cache anything (looked_up); a missing
    # timed state is never passed
    looked = any(s.looked_up for s in counted) or timed_state is None
    why = mismatch(kind, _mean(misses), timed_state, tol) if looked else None
    timed_misses = timed_state.misses_per_op if timed_state is not None else None
    return SideState(
        _mean(rates),
        timed_state.hit_rate if timed_state is not None else None,
        why,
        len(counted),
        kind,
        _mean(misses),
        timed_misses,
        tol,
        # a window that asked the cache nothing: its count holds no miss's work
        count_bias(kind, _mean(misses), timed_misses, mean_per_op)
        if looked
        else dict.fromkeys(COST_PER_MISS.get(kind, {}), 0.0),
    )


def count_bias(
    kind: str, counted: float | None, timed: float | None, per_op: Mapping[str, float]
) -> dict[str, float]:
    """How far a side's count per operation (`per_op`, its replays' mean) may be from
    the count in its timed state, as a signed fraction per metric: its counted windows'
    misses per operation less the timed window's, at the engine's cost per miss
    (COST_PER_MISS: the largest measured, so the bias is at most this)."""
    if counted is None or timed is None:
        return {}
    costs = COST_PER_MISS.get(kind, {})
    return {
        m: (counted - timed) * cost / per_op[m]
        for m, cost in costs.items()
        if m in per_op and per_op[m] > 0
    }


def sides(
    record: RunJson,
    replays: list[ReplayRecord],
    band: float | None = None,
    keep: Keep | None = None,
) -> dict[Key, tuple[SideState | None, SideState | None]]:
    """(base's, column's) state of every (comparison, column, step) the replays count,
    judged against the cost band `band` (None: the run's policy's), each over only the
    replays `keep` says the key's verdict pools (None: every ok replay)."""
    if band is None:
        band = VerdictPolicy.of_record(record).cost_band
    ok = [r for r in replays if r.get("status") == "ok"]
    steps = {s for r in ok for s in r["steps"]}
    out = {}
    for comp in record["comparisons"]:
        base, *others = comp["labels"]
        for label in others:
            for step in steps:
                key = (comp["name"], label, step)
                kept = [r for r in ok if keep is None or keep(key, r)]
                pair = (
                    side_state(record, kept, base, step, band),
                    side_state(record, kept, label, step, band),
                )
                if pair != (None, None):
                    out[key] = pair
    return out


def withheld(verdict: _C, pair: tuple[SideState | None, SideState | None] | None) -> _C:
    """A cost verdict (analysis/cost.py's CostComparison) with the sides' states, made
    `undecided` when a side's counted windows did not meet its timed window's state."""
    if pair is None:
        return verdict
    found = dataclasses.replace(verdict, state=pair)  # type: ignore[type-var]
    for who, side in zip(("base", "column"), pair, strict=True):
        if side is not None and side.mismatch is not None:
            return dataclasses.replace(  # type: ignore[type-var]
                found, verdict="undecided", reason=f"the {who}'s {side.mismatch}"
            )
    return found
