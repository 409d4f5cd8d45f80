"""The state check judges exactly the replays a verdict pools, withholds a verdict whose
engine should have reported its state but did not (MyRocks' too), and the
cost series pool what the cost verdicts pool (analysis/state.py, cost.py, series.py)."""

from __future__ import annotations

from typing import Any

import pytest

from dbregress.analysis import state
from dbregress.analysis.cost import cost_verdicts
from dbregress.analysis.series import cost_samples

PER_OP = {"estimated_cycles": 300_000.0, "instructions": 180_000.0}
# the tolerance of those counts at a 1% band: 0.0025 x 180,000 / 2,100 = 0.214 per query
TOL = state.tolerance("postgres", PER_OP, 0.01)
TIMED = state.CacheState(None, 0.0, 100_000, "postgres")


def pg(blocks: float) -> dict[str, Any]:
    return {"statistics": {state.PG_READ_BYTES: blocks * state.PG_BLOCK}}


def replay(
    column: str,
    n: int,
    misses_per_op: float | None,
    cycles: float = 300_000.0,
    scope: str = "sessions",
    step: str = "qp100",
) -> dict[str, Any]:
    """A settled replay of one PostgreSQL step over 500 queries (None: no counters),
    against a timed window that read no block."""
    per_op = {"estimated_cycles": cycles, "instructions": cycles * 0.6}
    figures: dict[str, Any] = {"divisor": 500.0, "per_op": per_op, "scope": scope}
    if misses_per_op is not None:
        figures |= state.judged(pg(misses_per_op * 500), 500, TIMED)
    state.settle(figures, 0.01)  # type: ignore[arg-type]
    return {"column": column, "replay": n, "status": "ok", "steps": {step: figures}}


def record(builds: dict[str, str], config: str = "ci", jobs: Any = None) -> Any:
    labels = list(builds)
    return {
        "comparisons": [{"name": "c", "labels": labels}],
        "columns": [
            {"label": lb, "comparison": "c", "build": b, "config": config, "settings": {}}
            for lb, b in builds.items()
        ],
        "jobs": jobs or {},
    }


PG2 = record({"a": "postgres@12.20", "b": "postgres@17.2"})
KEY = ("c", "b", "qp100")


def test_a_side_is_judged_over_the_replays_its_verdict_pools_only() -> None:
    assert TOL is not None and 0.3 > TOL > 0.15
    base = [replay("a", n, 0.0, 300_000.0 + n) for n in (1, 2, 3)]
    # the kept group (scope `sessions`, counted on both sides) misses 0.3 per query
    # against none timed; the group left out (scope `engine`, the column's only) none:
    # pooled, the mean 0.15 lies within the tolerance
    kept = [replay("b", n, 0.3, 330_000.0 + n) for n in (1, 2, 3)]
    left_out = [replay("b", n, 0.0, 900_000.0 + n, scope="engine") for n in (4, 5, 6)]
    found = cost_verdicts(PG2, base + kept + left_out)
    assert found is not None
    head = found.headline()[KEY]
    assert head.replays == (3, 3) and "3 replay(s) left out" in head.left_out
    assert head.verdict == "undecided", head
    assert head.reason.startswith("the column's counted windows missed 0.3000 per operation")
    column = head.state[1]
    assert column is not None and column.replays == 3
    assert column.counted_misses == pytest.approx(0.3)
    # without a choice of group (every ok replay) the pooled mean passes: what was wrong
    pooled = state.sides(PG2, base + kept + left_out, 0.01)[KEY][1]
    assert pooled is not None and pooled.mismatch is None
    assert pooled.counted_misses == pytest.approx(0.15)


def test_an_engine_that_should_report_its_state_but_did_not_is_withheld() -> None:
    base = [replay("a", n, 0.0, 300_000.0 + n) for n in (1, 2, 3)]
    bare = [replay("b", n, None, 330_000.0 + n) for n in (1, 2, 3)]
    found = cost_verdicts(PG2, base + bare)
    assert found is not None
    for metric in ("estimated_cycles", "instructions"):
        c = found.metrics[metric][KEY]
        assert c.verdict == "undecided", c
        assert c.reason.startswith("the column's engine state was not measured: 3 of 3")
        assert "PostgreSQL 8 KB blocks" in c.reason
        assert c.ratio == pytest.approx(1.1, rel=1e-4)  # still shown, not judged
    # one replay of three without counters is enough: its window was not checked
    some = bare[:1] + [replay("b", n, 0.0, 330_000.0 + n) for n in (2, 3)]
    c = cost_verdicts(PG2, base + some).headline()[KEY]  # type: ignore[union-attr]
    assert c.verdict == "undecided" and "1 of 3 counted window(s)" in c.reason
    # a counted state without its timed one, even where the window asked the cache
    # nothing (RocksDB's puts), is not passed either
    kv = record({"a": "rocksdb@7.10.2", "b": "rocksdb@10.2.1"})
    puts = {"statistics": {state.HITS: 0.0, state.MISSES: 0.0}}
    replays = []
    for column, timed in (("a", state.CacheState(10.0, 0.0, 100)), ("b", None)):
        for n in (1, 2, 3):
            figures: dict[str, Any] = {"divisor": 500.0, "per_op": dict(PER_OP)}
            figures |= state.judged(puts, 500, timed)  # type: ignore[arg-type]
            state.settle(figures, 0.01)  # type: ignore[arg-type]
            replays.append({"column": column, "replay": n, "status": "ok", "steps": {"p": figures}})
    c = cost_verdicts(kv, replays).headline()[("c", "b", "p")]  # type: ignore[union-attr]
    assert c.verdict == "undecided"
    assert c.reason.startswith("the column's engine state was not measured at the timed window")
    assert c.state[0] is not None and c.state[0].mismatch is None  # the base's: puts


def myrocks_replay(column: str, n: int, misses: float | None, cycles: float) -> dict[str, Any]:
    """A settled MyRocks replay of qp100 over 500 calls (None: no counters, as runs
    counted before the loadgen read them), against a timed window that hit 9,000 times
    and missed twice in 10,000 calls."""
    per_op = {"estimated_cycles": cycles, "instructions": cycles * 0.6}
    figures: dict[str, Any] = {"divisor": 500.0, "per_op": per_op, "scope": "sessions"}
    if misses is not None:
        stats = {"statistics": {state.MYROCKS_HITS: 450.0, state.MYROCKS_MISSES: misses}}
        timed = state.CacheState(9_000.0, 2.0, 10_000, state.MYROCKS)
        figures |= state.judged(stats, 500, timed)  # type: ignore[arg-type]
    state.settle(figures, 0.01)  # type: ignore[arg-type]
    return {"column": column, "replay": n, "status": "ok", "steps": {"qp100": figures}}


def test_myrocks_is_judged_by_its_block_cache_and_withheld_without_it() -> None:
    myrocks = record({"a": "mysql@8.0.32", "b": "mysql@8.4.0"}, config="myrocks")
    assert state.engine_kind(myrocks, "a") == state.MYROCKS
    # counted windows that missed as the timed one did (0.0002 per call): judged
    rows = [myrocks_replay("a", n, 0.1, 300_000.0 + n) for n in (1, 2, 3)]
    rows += [myrocks_replay("b", n, 0.1, 330_000.0 + n) for n in (1, 2, 3)]
    c = cost_verdicts(myrocks, rows).headline()[KEY]  # type: ignore[union-attr]
    assert c.verdict == "slower", c
    assert c.state[0] is not None and c.state[0].kind == state.MYROCKS
    assert c.state[0].counted_misses == pytest.approx(0.0002)
    # a colder counted window (a block-cache miss every call) is withheld, with why
    tol = state.tolerance(state.MYROCKS, PER_OP, 0.01)
    assert tol is not None and tol < 1.0
    cold = rows[:3] + [myrocks_replay("b", n, 500.0, 330_000.0 + n) for n in (1, 2, 3)]
    c = cost_verdicts(myrocks, cold).headline()[KEY]  # type: ignore[union-attr]
    assert c.verdict == "undecided" and "MyRocks block-cache data blocks" in c.reason, c
    # replays without its counters (counted before the loadgen read them): withheld
    bare = [myrocks_replay(col, n, None, 300_000.0 + n) for col in "ab" for n in (1, 2, 3)]
    c = cost_verdicts(myrocks, bare).headline()[KEY]  # type: ignore[union-attr]
    assert c.verdict == "undecided"
    assert c.reason.startswith("the base's engine state was not measured: 3 of 3"), c.reason
    assert "MyRocks block-cache data blocks" in c.reason


def test_counters_of_another_engine_than_the_columns_tables_judge_nothing() -> None:
    """A profile that says MyRocks over windows that read InnoDB's buffer pool (or the
    reverse) is withheld: the state read is not the tables'."""
    innodb_stats = {"statistics": {state.INNODB_REQUESTS: 1_000.0, state.INNODB_READS: 0.0}}
    rows = []
    for column in "ab":
        for n in (1, 2, 3):
            per_op = {"estimated_cycles": 300_000.0 + n, "instructions": 180_000.0}
            figures: dict[str, Any] = {"divisor": 500.0, "per_op": per_op}
            timed = state.CacheState(9_000.0, 0.0, 10_000, "innodb")
            figures |= state.judged(innodb_stats, 500, timed)  # type: ignore[arg-type]
            state.settle(figures, 0.01)  # type: ignore[arg-type]
            rows.append(
                {"column": column, "replay": n, "status": "ok", "steps": {"qp100": figures}}
            )
    myrocks = record({"a": "mariadb@10.11", "b": "mariadb@11.4"}, config="myrocks")
    c = cost_verdicts(myrocks, rows).headline()[KEY]  # type: ignore[union-attr]
    assert c.verdict == "undecided", c
    assert "read InnoDB buffer-pool pages, where the column's tables keep MyRocks" in c.reason
    innodb = record({"a": "mariadb@10.11", "b": "mariadb@11.4"})
    c = cost_verdicts(innodb, rows).headline()[KEY]  # type: ignore[union-attr]
    assert c.verdict == "same", c


def test_the_kind_of_state_each_engine_reports() -> None:
    # MyRocks by the settings the engine applied (another profile, RocksDB by default)
    jobs = {f"{c}/r1": {"settings": {"default-storage-engine": "RocksDB"}} for c in "ab"}
    by_settings = record({"a": "mariadb@10.11", "b": "mariadb@11.4"}, jobs=jobs)
    assert state.engine_kind(by_settings, "b") == state.MYROCKS
    # InnoDB, PostgreSQL and RocksDB report theirs too; the null engine has none
    innodb = record({"a": "mariadb@10.11", "b": "mysql@8.0.32"})
    assert [state.engine_kind(innodb, c) for c in "ab"] == ["innodb", "innodb"]
    assert state.engine_kind(PG2, "a") == "postgres"
    assert state.engine_kind(record({"a": "rocksdb@7.10.2"}), "a") == "rocksdb"
    null = record({"a": "null@1", "b": "null@2"})
    assert state.engine_kind(null, "a") is None
    assert state.engine_kind(PG2, "nobody") is None
    bare = [replay(col, n, None, 300_000.0 + n) for col in "ab" for n in (1, 2, 3)]
    c = cost_verdicts(null, bare).headline()[KEY]  # type: ignore[union-attr]
    assert c.verdict == "same" and c.state == (None, None)


def test_a_series_pools_one_group_and_leaves_out_a_withheld_column() -> None:
    series = record({"v1": "postgres@15.0", "v2": "postgres@16.0", "v3": "postgres@17.0"})
    replays = [replay(c, n, 0.0, 300_000.0 + n) for c in ("v1", "v2", "v3") for n in (1, 2, 3)]
    # v2 also has replays counted at another scope (2x the count: another method)
    replays += [replay("v2", n, 0.0, 600_000.0 + n, scope="engine") for n in (4, 5, 6)]
    found = cost_samples(series, replays, 0.01)
    assert found[("c", "qp100")] == [[300_001.0, 300_002.0, 300_003.0]] * 3
    # v3 counted in a colder state than timed: its column holds nothing, as its
    # verdict would be withheld; v1 and v2 stay
    cold = [r for r in replays if r["column"] != "v3"]
    cold += [replay("v3", n, 0.5, 300_000.0 + n) for n in (1, 2, 3)]
    found = cost_samples(series, cold, 0.01)
    assert found[("c", "qp100")] == [[300_001.0, 300_002.0, 300_003.0]] * 2 + [[]]
    # and a column whose engine recorded no state
    bare = [r for r in replays if r["column"] != "v1"]
    bare += [replay("v1", n, None, 300_000.0 + n) for n in (1, 2, 3)]
    assert cost_samples(series, bare, 0.01)[("c", "qp100")][0] == []


def test_a_state_that_cannot_be_compared_is_never_read_as_agreeing() -> None:
    timed_state = state.CacheState(None, 0.0, 100, "postgres")
    assert state.mismatch("postgres", 0.0, timed_state, 0.1) is None  # compared: met
    for mine, tol in ((None, 0.1), (0.0, None)):
        why = state.mismatch("postgres", mine, timed_state, tol)
        assert why is not None and why.startswith("engine state could not be checked")
