"""The method identity: what it holds, that its versioned parts cannot change unnoticed,
and that the history never sets runs of two methods against each other."""

from __future__ import annotations

import hashlib
import inspect
import json
from pathlib import Path

from dbregress.analysis import state
from dbregress.benchmarks import insert, kv
from dbregress.collect.valgrind import CACHES
from dbregress.cost.planning import LANE_SIZING
from dbregress.engines.mysql import QUIET_MYSQL
from dbregress.engines.postgres import QUIET_POSTGRES, SYNC_IO
from dbregress.explain import count_figures
from dbregress.explain.explainer import pinned_window
from dbregress.lab.micro_names import WRITES
from dbregress.method import identity as method
from dbregress.store.files import write_json
from dbregress.store.history import History, reindex
from dbregress.store.run import read_record
from tests.unit.test_history import history_cli, make_run

# The counting replays' adjustments as of COUNTING_PROFILE. When this test fails, the
# profile changed: raise method.COUNTING_PROFILE's version and put the new digest here.
PROFILE_DIGEST = "0189d2ec31a82878"


def profile_digest() -> str:
    profile = {
        "postgres": QUIET_POSTGRES,
        "mysql": QUIET_MYSQL,
        "lockstep": list(insert.LOCKSTEP_STEPS),
        "settle_kv": list(kv.SETTLE_STEPS),
        "settle_micro": sorted(WRITES),
        "sizing": repr(LANE_SIZING),
        "warm_until": [state.PROBE_EVERY, state.UNTIL_MARGIN],
        "postgres_18": SYNC_IO,
        "pinned_pace": [insert.COUNTED_Q_PER_S, insert.QUERY_ROWS_PER_COMMIT, kv.COUNTED_Q_PER_S],
        "pinned_window": inspect.getsource(pinned_window),
    }
    return hashlib.sha256(json.dumps(profile, sort_keys=True).encode()).hexdigest()[:16]


def test_the_counting_profile_is_versioned() -> None:
    assert profile_digest() == PROFILE_DIGEST, (
        f"the counting replays' adjustments changed: raise the version of "
        f"method.COUNTING_PROFILE ({method.COUNTING_PROFILE}) and set PROFILE_DIGEST to "
        f"{profile_digest()!r}"
    )


def test_the_cost_model_and_caches_are_the_counters() -> None:
    assert f"l1+{count_figures.CYCLES_LL}ll+{count_figures.CYCLES_RAM}ram" == method.COST_MODEL
    assert method.identity()["caches"] == " ".join(CACHES)


def test_identity_key_and_differences(tmp_path: Path) -> None:
    a = method.identity()
    assert set(a) == set(method.FIELDS) and a["libc"] and a["dbregress"]
    binary = tmp_path / "loadgen"
    binary.write_bytes(b"not the same binary")
    b = method.identity(binary)
    assert method.key(a) == method.key(dict(a)) and method.key(a) != method.key(b)
    assert method.key(None) is None
    (what,) = method.differences(a, b)
    assert what.startswith("loadgen binary ") and b["loadgen_sha256"] in what
    assert method.differences(None, b) == ["method not recorded before"]


def _relabel(run: Path, loadgen: str) -> None:
    record = read_record(run)
    record["method_identity"] = {**record["method_identity"], "loadgen_sha256": loadgen}
    write_json(run / "run.json", record)


def test_history_draws_the_boundary_and_finds_no_change_across_it(tmp_path: Path) -> None:
    root = tmp_path / "results"
    for i in range(6):
        head = 1000.0 if i < 3 else 800.0  # head's QPS drops 20% where the method changes
        run = make_run(
            root,
            tmp_path,
            f"run-{i}",
            f"2026-01-0{i + 1}T03:00:00+0000",
            {"base": 1000.0, "head": head},
            seed=i,
        )
        _relabel(run, "aaaa" if i < 3 else "bbbb")
    assert reindex(root) == []
    with History(root) as h:
        (series,) = [s for s in h.series("nightly", step="l.i0") if s.column == "head"]
        assert len({p.method for p in series.points}) == 2
    out = history_cli(["nightly", "--results", str(root), "--step", "l.i0"])
    assert "**method changed**: loadgen binary aaaa -> bbbb" in out
    lines = out.splitlines()
    boundary = next(i for i, line in enumerate(lines) if line.startswith("| - | **method"))
    assert "| run-2 |" in lines[boundary - 1] and "| run-3 |" in lines[boundary + 1]
    rows = "".join(line for line in lines if line.startswith("| 2026"))
    assert "▼" not in rows and "▲" not in rows  # the 20% drop is not a change point


def test_within_one_method_the_change_is_still_found(tmp_path: Path) -> None:
    root = tmp_path / "results"
    for i in range(6):
        head = 1000.0 if i < 3 else 800.0
        run = make_run(
            root,
            tmp_path,
            f"run-{i}",
            f"2026-01-0{i + 1}T03:00:00+0000",
            {"base": 1000.0, "head": head},
            seed=i,
        )
        _relabel(run, "aaaa")
    assert reindex(root) == []
    out = history_cli(["nightly", "--results", str(root), "--step", "l.i0"])
    rows = "".join(line for line in out.splitlines() if line.startswith("| 2026"))
    assert "| - | **method" not in out and rows.count("▼") == 1


def test_a_commit_of_dbregress_cuts_the_time_series_but_not_the_cost_series(
    tmp_path: Path,
) -> None:
    """Counts do not depend on dbregress's own version (method.COUNT_FIELDS): the cost
    lane's series run on across it, the time lane's draw a boundary."""
    from tests.unit.test_noise_floor import a_run

    root = tmp_path / "results"
    for i in range(4):
        identity = {**method.identity(), "dbregress": f"0.1.0+v0.1-{i // 2}-gabc"}
        a_run(root, tmp_path, f"run-{i}", i + 1, {"base": [1e4] * 3}, identity=identity)
    assert reindex(root) == []
    with History(root) as h:
        (cost,) = h.series("nightly", step="l.i0", lane="cost")
        time = [s for s in h.series("nightly", step="l.i0") if s.column == "base"]
    assert len({p.method for p in cost.points}) == 1
    assert [len({p.method for p in s.points}) for s in time] == [2]
