"""Every engine's state, counted against timed with a tolerance derived from the band:
PostgreSQL's blocks read by the sessions, InnoDB's buffer pool and RocksDB's block
cache (analysis/state.py), the cost lane's test hook that makes a replay colder on
purpose (cost/replay.py), and what the verdicts and the report say of it."""

from __future__ import annotations

from typing import Any

import pytest

from dbregress.analysis import state
from dbregress.analysis.cost import cost_verdicts
from dbregress.cost import replay as cost_replay
from dbregress.lab.columns import Column
from dbregress.model.errors import LabError
from dbregress.provision import BuildSpec
from dbregress.report import verdict_tables

PG = state.PG_READ_BYTES
BLOCK = state.PG_BLOCK


def pg(blocks: float) -> dict[str, Any]:
    """A PostgreSQL summary's engine_stats: the sessions' backends read `blocks`."""
    stats = {PG: blocks * BLOCK, "postgres.backend.read_calls": blocks}
    return {"write_amp": None, "stall_pct": None, "lsm_bytes": None, "statistics": stats}


def innodb(requests: float, reads: float) -> dict[str, Any]:
    stats = {state.INNODB_REQUESTS: requests, state.INNODB_READS: reads}
    return {"write_amp": None, "stall_pct": None, "lsm_bytes": None, "statistics": stats}


def test_each_engines_counters_make_its_state() -> None:
    # PostgreSQL: bytes read by the sessions' backends, in 8 KB blocks; no hits counted
    s = state.of_stats(pg(50), 1000)
    assert s == state.CacheState(None, 50.0, 1000, "postgres")
    assert s.hit_rate is None and s.misses_per_op == 0.05
    # a small non-block read (a signal descriptor's 128 bytes) is a fraction of a block
    small = state.of_stats({"statistics": {PG: 128.0}}, 1000)
    assert small is not None and small.misses == 128 / 8192
    # InnoDB: page requests include the pages read in
    s = state.of_stats(innodb(10_000, 100), 500)
    assert s == state.CacheState(9_900.0, 100.0, 500, "innodb")
    assert s.hit_rate == 0.99 and s.misses_per_op == 0.2
    # RocksDB as before; and nothing without counters
    rocks = {"statistics": {state.HITS: 90.0, state.MISSES: 10.0}}
    assert state.of_stats(rocks, 100) == state.CacheState(90.0, 10.0, 100)  # type: ignore[arg-type]
    assert state.of_stats(None, 10) is None
    assert state.of_stats({"statistics": {"rocksdb.other": 1.0}}, 10) == state.CacheState(0, 0, 10)  # type: ignore[arg-type]
    # a window that read nothing still has a state: zero misses
    assert state.of_stats(pg(0), 10) == state.CacheState(None, 0.0, 10, "postgres")


def test_the_timed_state_pools_repeats_and_a_missing_hit_count_stays_missing() -> None:
    results = [
        {"q": {"count": 1000}, "engine_stats": pg(10)},
        {"q": {"count": 3000}, "engine_stats": pg(2)},
    ]
    timed = state.timed(results)  # type: ignore[arg-type]
    assert timed == state.CacheState(None, 12.0, 4000, "postgres")
    assert timed.to_json() == {
        "kind": "postgres",
        "hits": None,
        "misses": 12.0,
        "ops": 4000,
        "hit_rate": None,
        "misses_per_op": 0.003,
    }
    # records made before `kind`: RocksDB's names
    old = {"block_cache_data_hits": 9.0, "block_cache_data_misses": 1.0, "ops": 10}
    assert state.CacheState.from_json(old) == state.CacheState(9.0, 1.0, 10)  # type: ignore[arg-type]
    assert state.CacheState.from_json(timed.to_json()) == timed


def test_the_tolerance_is_a_quarter_of_the_band_at_the_cost_per_miss() -> None:
    cost = state.COST_PER_MISS["postgres"]
    per_op = {"estimated_cycles": 200_000.0, "instructions": 120_000.0, "d1_read_misses": 5.0}
    tol = state.tolerance("postgres", per_op, 0.01)
    expected = min(0.25 * 0.01 * per_op[m] / cost[m] for m in cost)
    assert tol == pytest.approx(expected)
    # that many misses more move the count by exactly a quarter of the band in the
    # metric that limits it, and by no more in the other
    moved = {m: tol * cost[m] / per_op[m] for m in cost}
    assert max(moved.values()) == pytest.approx(0.0025)
    assert min(moved.values()) <= 0.0025
    # twice the band, twice the tolerance; a cheaper step, a smaller one
    assert state.tolerance("postgres", per_op, 0.02) == pytest.approx(2 * tol)
    half = {k: v / 2 for k, v in per_op.items()}
    assert state.tolerance("postgres", half, 0.01) == pytest.approx(tol / 2)
    # nothing to derive it from
    assert state.tolerance("postgres", {"d1_read_misses": 5.0}, 0.01) is None
    assert state.tolerance("other", per_op, 0.01) is None


def test_settle_counts_per_unit_of_the_count_and_judges_both_directions() -> None:
    per_op = {"estimated_cycles": 100_000.0, "instructions": 60_000.0}
    tol = state.tolerance("postgres", per_op, 0.01)
    assert tol is not None
    timed = state.CacheState(None, 100.0, 100_000, "postgres")  # 0.001 per row

    def settled(blocks: float, calls: int = 10, rows: float = 1000.0) -> dict[str, Any]:
        figures: dict[str, Any] = {"divisor": rows, "per_op": per_op}
        figures |= state.judged(pg(blocks), calls, timed)
        state.settle(figures, 0.01)  # type: ignore[arg-type]
        return figures

    # a load step counts rows: 10 calls of 100 rows, 1 block read: 0.001 per row
    same = settled(1)
    assert same["engine_state"]["counted"]["ops"] == 1000
    assert same["engine_state"]["counted"]["misses_per_op"] == 0.001
    assert same["engine_state"]["tolerance_misses_per_op"] == round(tol, 6)
    assert same["state_mismatch"] is None
    # just inside, then just outside, the tolerance above the timed state
    assert settled((0.001 + tol * 0.99) * 1000)["state_mismatch"] is None
    colder = settled((0.001 + tol * 1.01) * 1000)["state_mismatch"]
    assert colder is not None and "more than the timed window's 0.0010" in colder
    assert "PostgreSQL 8 KB blocks read by the sessions' backends" in colder
    # a window warmer than the timed one is a mismatch too (far enough below it)
    warm_timed = state.CacheState(None, 10 * tol * 1000, 1000, "postgres")
    figures: dict[str, Any] = {"divisor": 1000.0, "per_op": per_op}
    figures |= state.judged(pg(0), 1000, warm_timed)
    state.settle(figures, 0.01)  # type: ignore[arg-type]
    assert figures["state_mismatch"] is not None and "fewer than" in figures["state_mismatch"]
    # no timed state to check against: withheld, never passed silently
    figures = {"divisor": 1000.0, "per_op": per_op, **state.judged(pg(0), 1000, None)}
    state.settle(figures, 0.01)  # type: ignore[arg-type]
    assert "no timed state" in figures["state_mismatch"]
    # figures without a state are left alone
    bare: dict[str, Any] = {"divisor": 1.0, "per_op": per_op}
    state.settle(bare, 0.01)  # type: ignore[arg-type]
    assert bare == {"divisor": 1.0, "per_op": per_op}


def _replay(column: str, n: int, blocks: float, cycles: float, timed_blocks: float) -> Any:
    per_op = {"estimated_cycles": cycles, "instructions": cycles * 0.6}
    figures: dict[str, Any] = {"divisor": 500.0, "per_op": per_op, "scope": "sessions"}
    timed = state.CacheState(None, timed_blocks, 100_000, "postgres")
    figures |= state.judged(pg(blocks), 500, timed)
    state.settle(figures, 0.01)  # type: ignore[arg-type]
    return {"column": column, "replay": n, "status": "ok", "steps": {"qp100": figures}}


RECORD: Any = {"comparisons": [{"name": "pg", "labels": ["pg12", "pg17"]}]}
KEY = ("pg", "pg17", "qp100")


def test_a_postgres_side_within_its_tolerance_is_judged_and_its_figures_kept() -> None:
    replays = [
        _replay(c, n, 0.2, v, 0.0)
        for c, base in (("pg12", 284_000.0), ("pg17", 301_000.0))
        for n, v in ((1, base), (2, base + 50), (3, base - 40))
    ]
    found = cost_verdicts(RECORD, replays)
    assert found is not None
    head = found.headline()[KEY]
    assert head.verdict == "slower", head
    base, column = head.state
    assert base is not None and column is not None
    assert column.kind == "postgres" and column.counted is None and column.timed is None
    assert column.counted_misses == pytest.approx(0.2 / 500)
    assert column.timed_misses == 0.0
    assert column.replays == 3 and column.mismatch is None
    mean = (301_000.0 + 301_050.0 + 300_960.0) / 3
    assert column.tolerance == pytest.approx(state.tolerance("postgres", _mean_per_op(mean), 0.01))
    # the report's row: misses per op counted / timed, and the tolerance
    cells = verdict_tables._state(head)
    assert cells[0] == "0.0004 / 0.0000" and cells[1] == "0.0004 / 0.0000"
    assert "met the timed window's state (tolerance ±" in cells[-1]
    assert verdict_tables._state_label(head).startswith("PostgreSQL 8 KB blocks")


def _mean_per_op(cycles: float) -> dict[str, float]:
    return {"estimated_cycles": cycles, "instructions": cycles * 0.6}


def test_a_colder_postgres_replay_makes_every_metric_undecided_with_the_reason() -> None:
    warm = [_replay("pg12", n, 0.2, 284_000.0 + n, 0.0) for n in (1, 2, 3)]
    # the column's replays read 5 blocks per query where the time lane read none
    cold = [_replay("pg17", n, 2_500.0, 300_000.0 + n, 0.0) for n in (1, 2, 3)]
    found = cost_verdicts(RECORD, warm + cold)
    assert found is not None
    for metric in ("estimated_cycles", "instructions", "system_calls"):
        c = found.metrics[metric].get(KEY)
        if c is None:
            continue  # a metric the figures do not have
        assert c.verdict == "undecided", c
        assert c.reason.startswith("the column's counted windows missed 5.0000 per operation")
        assert "a quarter of the cost band" in c.reason
        assert c.ratio is not None  # still shown, not judged
    # the mean over a side's replays is judged, so one replay's stray block does not
    # withhold a side whose mean stays within the tolerance
    tol = state.tolerance("postgres", _mean_per_op(284_000.0), 0.01)
    assert tol is not None
    spike = [_replay("pg12", 1, tol * 500 * 2.5, 284_000.0, 0.0)]
    spike += [_replay("pg12", n, 0.0, 284_000.0, 0.0) for n in (2, 3, 4, 5, 6)]
    side = state.sides(RECORD, spike + cold, 0.01)[KEY][0]
    assert side is not None and side.mismatch is None
    assert side.counted_misses == pytest.approx(tol * 2.5 / 6)


def test_innodb_sides_carry_their_hit_rates() -> None:
    def replay(column: str, n: int, reads: float) -> Any:
        figures: dict[str, Any] = {"divisor": 1000.0, "per_op": _mean_per_op(90_000.0)}
        timed = state.CacheState(999_000.0, 1_000.0, 100_000, "innodb")
        figures |= state.judged(innodb(100_000, reads), 1000, timed)
        state.settle(figures, 0.01)  # type: ignore[arg-type]
        return {"column": column, "replay": n, "status": "ok", "steps": {"qp100": figures}}

    sides = state.sides(RECORD, [replay(c, n, 10.0) for c in ("pg12", "pg17") for n in (1, 2)])
    _, column = sides[KEY]
    assert column is not None and column.kind == "innodb"
    assert column.counted == pytest.approx(0.9999) and column.timed == pytest.approx(0.999)
    assert column.counted_misses == 0.01 and column.timed_misses == 0.01
    assert column.mismatch is None


def test_only_rocksdbs_block_cache_is_probed_for_an_early_window() -> None:
    # the loadgen probes an embedded RocksDB's statistics only; another engine's
    # window opens at its skip_ops (asking it to probe would fail the step)
    assert state.until_rate(state.CacheState(999.0, 1.0, 1000)) == pytest.approx(
        0.999 - state.UNTIL_MARGIN
    )
    assert state.until_rate(state.CacheState(999.0, 1.0, 1000, "innodb")) == 0.0
    assert state.until_rate(state.CacheState(None, 1.0, 1000, "postgres")) == 0.0


def test_the_lanes_test_hook_sets_replay_settings_and_refuses_bad_input(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    column = Column("pg17", BuildSpec.parse("postgres@17.2.0"), "ci", {"work_mem": "4MB"})
    monkeypatch.delenv(cost_replay.TEST_SETTINGS_ENV, raising=False)
    assert cost_replay.hook_settings() == {}
    assert cost_replay.replay_column(column) is column
    monkeypatch.setenv(cost_replay.TEST_SETTINGS_ENV, " shared_buffers=1MB , work_mem=1MB")
    assert cost_replay.hook_settings() == {"shared_buffers": "1MB", "work_mem": "1MB"}
    hooked = cost_replay.replay_column(column)
    assert hooked.settings == {"work_mem": "1MB", "shared_buffers": "1MB"}
    assert column.settings == {"work_mem": "4MB"}  # the lab's column is left alone
    for bad in ("shared_buffers", "=1MB", "shared_buffers="):
        monkeypatch.setenv(cost_replay.TEST_SETTINGS_ENV, bad)
        with pytest.raises(
            LabError, match=f"{cost_replay.TEST_SETTINGS_ENV}: .* is not name=value"
        ):
            cost_replay.hook_settings()


def test_a_window_that_asked_the_cache_nothing_is_not_judged_on_global_counters() -> None:
    """RocksDB's and InnoDB's counters are global: a timed window of puts counts its
    flushes' and compactions' lookups (overwriteandwait read 0.12 blocks per put timed),
    which a counted window of puts, asking the cache nothing, is not checked against.
    PostgreSQL's are the sessions' own: a window that read nothing is judged."""
    per_op = {"estimated_cycles": 40_000.0, "instructions": 20_000.0}
    busy = state.CacheState(1_000.0, 12_000.0, 100_000)  # 0.12 misses per put, timed
    puts = {"divisor": 1000.0, "per_op": per_op}
    puts |= state.judged({"statistics": {state.HITS: 0.0, state.MISSES: 0.0}}, 1000, busy)  # type: ignore[typeddict-item]
    state.settle(puts, 0.01)  # type: ignore[arg-type]
    assert puts["state_mismatch"] is None
    assert puts["engine_state"]["counted"]["misses_per_op"] == 0.0  # still recorded
    record: Any = {"comparisons": [{"name": "kv", "labels": ["a", "b"]}]}
    replays = [
        {"column": c, "replay": 1, "status": "ok", "steps": {"overwriteandwait": puts}}
        for c in "ab"
    ]
    base, _ = state.sides(record, replays, 0.01)[("kv", "b", "overwriteandwait")]
    assert base is not None and base.mismatch is None and base.timed_misses == 0.12
    # the same against PostgreSQL's per-session counters is a mismatch
    cold_timed = state.CacheState(None, 12_000.0, 100_000, "postgres")
    pg_puts = {"divisor": 1000.0, "per_op": per_op, **state.judged(pg(0), 1000, cold_timed)}
    state.settle(pg_puts, 0.01)  # type: ignore[arg-type]
    assert pg_puts["state_mismatch"] is not None
