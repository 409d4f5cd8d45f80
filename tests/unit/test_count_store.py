"""The store of counting replays (store/counted.py) and when the cost lane takes a
stored replay (cost/reuse.py): a change in any part of what a count depends on (the
simulated caches, the loadgen binary, a step's size, the build's flavor) takes nothing;
a corrupt entry is ignored with one line; windows the run could not have chosen, an
engine state that does not meet this run's timed one, an entry taken already and the
run's own replays are never taken."""

from __future__ import annotations

import copy
import dataclasses
import functools
import json
import os
import shutil
import tomllib
from pathlib import Path
from typing import Any, cast

import pytest

from dbregress import benchmarks, configs
from dbregress.analysis.state import CacheState
from dbregress.cost import planning, reuse
from dbregress.cost.planning import count_key, same_windows
from dbregress.engines.base import Sizes
from dbregress.engines.registry import engine_class
from dbregress.execution import prepare
from dbregress.explain.jobs import Choice
from dbregress.lab.file import Lab, parse_lab
from dbregress.report import history_moves
from dbregress.shapes.method import MethodIdentity
from dbregress.shapes.replay import ReplayRecord
from dbregress.store import counted
from dbregress.store.counted import CountStore, Prune
from dbregress.store.history import History, reindex
from tests.unit.test_cost_history_floor import _runs, cell

IDENTITY: MethodIdentity = {
    "dbregress": "v1",
    "loadgen_sha256": "aaaa",
    "valgrind": "valgrind-3.19.0",
    "libc": "glibc 2.36",
    "caches": "--I1=32768,8,64 --D1=32768,8,64 --LL=8388608,16,64",
    "cost_model": "l1+5ll+35ram",
    "counting_profile": "quiet-v4",
    "cpu_features": "haswell, cpuid 1234",
}
BUILD = {"source": "registry", "version": "10.2.1", "sha256": "feed"}


def _lab(tmp_path: Path, keys: int = 10000, top: str = "", threads: str = "") -> Lab:
    text = f"""\
name = "store"
benchmark = "kv"
{top}
[[column]]
label = "a"
build = "rocksdb@10.2.1"
[[column]]
label = "b"
build = "rocksdb@10.2.1"
[kv]
keys = {keys}
seconds = 0.3
warmup_s = 0.1
steps = ["fillseq", "readrandom"]
{threads}
"""
    return parse_lab(tomllib.loads(text), tmp_path / "lab.toml", text)


def _choices(lab: Lab, misses: float = 0.0, **window: Any) -> dict[str, Choice]:
    plans = benchmarks.plans(lab.comparisons[0])
    index, plan = next((i, p) for i, p in enumerate(plans, 1) if p.name == "readrandom")
    timed = CacheState(hits=1000.0, misses=misses, ops=1000.0)
    fields = {"skip_ops": 30_000, "ops": 1000, "q_per_s": 100_000.0} | window
    return {"readrandom": Choice(index, plan, timed=timed, **fields)}


def _paced(choice: Choice) -> Choice:
    """The step with a paced writer beside it (as kv's readwhilewriting has)."""
    section = dict(choice.plan.section, writer_mb_per_s=1.0)
    plan = dataclasses.replace(choice.plan, section=cast(Any, section))
    return dataclasses.replace(choice, plan=plan)


def _record(label: str = "a", misses: float = 0.0, timed: float = 0.0) -> ReplayRecord:
    step = {
        "per_op": {"instructions": 10_000.0, "estimated_cycles": 15_000.0},
        "divisor": 1000.0,
        "engine_state": {
            "counted": CacheState(1000.0, misses, 1000.0).to_json(),
            "timed": CacheState(1000.0, timed, 1000.0).to_json(),
            "tolerance_misses_per_op": 0.003,
        },
        "state_mismatch": None,
    }
    return cast(
        ReplayRecord,
        {
            "comparison": "store",
            "column": label,
            "replay": 1,
            "build": "rocksdb@10.2.1",
            "method_identity": dict(IDENTITY),
            "status": "ok",
            "steps": {"readrandom": step},
            "took_s": 6.0,
        },
    )


def _put(
    tmp_path: Path, lab: Lab, run: str = "run1", identity: MethodIdentity = IDENTITY
) -> reuse.Reuse:
    """A lane of `run` that counted one replay of column a, put into the store."""
    lane = reuse.Reuse(tmp_path / "results" / run, print, recount=False, band=0.01)
    comp = lab.comparisons[0]
    lane.keys["a"] = count_key(lab, comp, comp.columns[0], BUILD, identity)
    record = _record()
    record["method_identity"] = identity
    lane.put("a", "rocksdb@10.2.1", 1, record, _choices(lab))
    return lane


def _taker(
    tmp_path: Path,
    lab: Lab,
    identity: MethodIdentity = IDENTITY,
    build: dict[str, str] = BUILD,
    run: str = "run2",
) -> reuse.Reuse:
    lane = reuse.Reuse(tmp_path / "results" / run, print, recount=False, band=0.01)
    comp = lab.comparisons[0]
    for column in comp.columns:
        lane.keys[column.label] = count_key(lab, comp, column, build, identity)
    return lane


def test_a_stored_replay_is_taken_once_as_a_replay_of_this_run(tmp_path: Path) -> None:
    lab = _lab(tmp_path)
    _put(tmp_path, lab)
    lane = _taker(tmp_path, lab)
    got = lane.take("store", "b", 3, None, _choices(lab))
    assert got is not None
    assert (got["column"], got["replay"]) == ("b", 3)
    assert got["reused"]["run"] == "run1" and got["reused"]["column"] == "a"
    assert got["steps"]["readrandom"]["per_op"]["instructions"] == 10_000.0
    # taken once a run: column a of the same build finds nothing left
    assert lane.take("store", "a", 1, None, _choices(lab)) is None
    # a run never takes what it counted itself
    own = _taker(tmp_path, lab, run="run1")
    assert own.take("store", "a", 2, None, _choices(lab)) is None


@pytest.mark.parametrize(
    "part",
    ["caches", "loadgen", "valgrind", "cpu", "size", "flavor", "seed", "threads", "settings"],
)
def test_a_change_in_any_part_of_the_identity_takes_nothing(tmp_path: Path, part: str) -> None:
    lab = _lab(tmp_path)
    _put(tmp_path, lab)
    identity = dict(IDENTITY)
    build = dict(BUILD)
    if part == "caches":  # another simulated cache geometry
        identity["caches"] = "--I1=32768,8,64 --D1=49152,12,64 --LL=8388608,16,64"
    elif part == "loadgen":  # a rebuilt load generator
        identity["loadgen_sha256"] = "bbbb"
    elif part == "valgrind":
        identity["valgrind"] = "valgrind-3.20.0"
    elif part == "cpu":  # another processor as valgrind presents it
        identity["cpu_features"] = "skylake, cpuid 5678"
    elif part == "size":  # a step of another size
        lab = _lab(tmp_path, keys=20000)
    elif part == "flavor":  # the same tree built in another flavor
        build = {"source": "src", "commit": "abc", "flavor": "rel_o2nofp"}
    elif part == "seed":  # other keys drawn
        lab = _lab(tmp_path, top="seed = 7")
    elif part == "threads":  # more clients
        lab = _lab(tmp_path, threads="threads = 4")
    elif part == "settings":  # the test hook's settings in every replay
        lab = _lab(tmp_path)
        os.environ["DBREGRESS_TEST_REPLAY_SETTINGS"] = "block_cache_mb=1"
    try:
        lane = _taker(tmp_path, lab, cast(MethodIdentity, identity), build)
    finally:
        os.environ.pop("DBREGRESS_TEST_REPLAY_SETTINGS", None)
    assert lane.take("store", "a", 1, None, _choices(lab)) is None
    # and the unchanged identity would have taken it
    assert _taker(tmp_path, _lab(tmp_path)).take("store", "a", 1, None, _choices(lab)) is not None


def test_the_dbregress_version_is_not_part_of_what_a_count_depends_on(tmp_path: Path) -> None:
    lab = _lab(tmp_path)
    _put(tmp_path, lab)
    newer = cast(MethodIdentity, dict(IDENTITY, dbregress="v2"))
    assert _taker(tmp_path, lab, newer).take("store", "a", 1, None, _choices(lab)) is not None


def test_an_unpinned_build_is_never_stored(tmp_path: Path) -> None:
    lab = _lab(tmp_path)
    comp = lab.comparisons[0]
    path_build = {"source": "path", "path": "/opt/rocksdb"}  # no digest of its library
    assert count_key(lab, comp, comp.columns[0], path_build, IDENTITY) is None


def test_a_corrupt_or_partial_entry_is_ignored_with_one_line(tmp_path: Path) -> None:
    lab = _lab(tmp_path)
    lane = _put(tmp_path, lab)
    key = lane.keys["a"]
    assert key is not None
    store = lane.store
    (entry,) = store.get(key)
    text = entry.path.read_text()
    entry.path.write_text(text[: len(text) // 2])  # cut short
    copy_path = entry.path.with_name("other.a.r2.json")
    tampered = json.loads(text)
    tampered["windows"]["readrandom"]["ops"] = 999  # windows no longer match their digest
    copy_path.write_text(json.dumps(tampered))
    lines: list[str] = []
    assert CountStore(store.root, lines.append).get(key) == []
    assert len(lines) == 2
    assert any("unreadable" in line for line in lines)
    assert any("windows do not match" in line for line in lines)


def test_windows_the_run_could_not_have_chosen_are_not_adopted(tmp_path: Path) -> None:
    lab = _lab(tmp_path)
    _put(tmp_path, lab)
    warmup = lab.comparisons[0].sizes.warmup()
    stored = reuse.windows_of(_choices(lab))
    # readrandom has no paced writers: the pace moves nothing
    assert reuse.incompatible(stored, _choices(lab, q_per_s=150_000.0), warmup) is None
    paced = {s: _paced(c) for s, c in _choices(lab, q_per_s=200_000.0).items()}
    why = reuse.incompatible(stored, paced, warmup)
    assert why is not None and "pace" in why
    # the pinned pace: another pace is another method (1.4 times was taken before)
    near = {s: _paced(c) for s, c in _choices(lab, q_per_s=140_000.0).items()}
    assert reuse.incompatible(stored, near, warmup) is not None
    same = {s: _paced(c) for s, c in _choices(lab, q_per_s=100_000.00001).items()}
    assert reuse.incompatible(stored, same, warmup) is None
    why = reuse.incompatible(stored, _choices(lab, ops=5000), warmup)
    assert why is not None and "window of 1000 calls" in why
    lane = _taker(tmp_path, lab)
    # at this run's rate its timed window opens after 40,000 calls: the stored window
    # (after 30,000) lies before it
    late = {"skip_ops": 90_000, "q_per_s": 400_000.0}
    choices = {"a": _choices(lab, **late), "b": _choices(lab, **late)}
    lane.adopt("store", ["a", "b"], choices, warmup)
    assert choices["a"]["readrandom"].skip_ops == 90_000  # the fresh windows stay
    assert "store" in lane.refused
    # at windows it could have chosen, the stored ones are adopted, in every column
    choices = {"a": _choices(lab, skip_ops=31_000), "b": _choices(lab, skip_ops=31_000)}
    lane.adopt("store", ["a", "b"], choices, warmup)
    assert {c["readrandom"].skip_ops for c in choices.values()} == {30_000}
    assert lane.adopted == {"store": 1}


def test_an_engine_state_that_misses_this_runs_timed_state_is_not_taken(
    tmp_path: Path,
) -> None:
    lab = _lab(tmp_path)
    lane = _put(tmp_path, lab)
    key = lane.keys["a"]
    assert key is not None
    (entry,) = lane.store.get(key)
    # this run's timed window missed the cache on 5% of its gets; the stored replay's
    # counted window never did
    choices = _choices(lab, misses=50.0)
    record, why = reuse.rejudged(entry.record, choices, 0.01)
    assert why is not None and "readrandom" in why
    taker = _taker(tmp_path, lab)
    assert taker.take("store", "a", 1, None, choices) is None
    assert "a" in taker.refused
    # the stored record itself is untouched
    assert entry.record["steps"]["readrandom"]["state_mismatch"] is None
    assert record is not entry.record


def test_recount_takes_nothing(tmp_path: Path) -> None:
    lab = _lab(tmp_path)
    _put(tmp_path, lab)
    lane = _taker(tmp_path, lab)
    lane.recount = True
    assert lane.take("store", "a", 1, None, _choices(lab)) is None


def test_an_added_replay_takes_only_the_steps_it_counts(tmp_path: Path) -> None:
    lab = _lab(tmp_path)
    _put(tmp_path, lab)
    lane = _taker(tmp_path, lab)
    got = lane.take("store", "a", 4, frozenset({"readrandom"}), _choices(lab))
    assert got is not None and got["counts_only"] == ["readrandom"]
    # a stored replay that did not count a wanted step cannot stand for it
    lane2 = _taker(tmp_path, lab, run="run3")
    assert lane2.take("store", "a", 4, frozenset({"fwdrange"}), _choices(lab)) is None


def test_the_store_root_of_a_bisection_is_the_folder_holding_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(counted.ENV, raising=False)
    bisection = tmp_path / "results" / "bisect-1"
    (bisection / "runs").mkdir(parents=True)
    (bisection / "bisect.json").write_text("{}")
    assert counted.root_for(bisection / "runs" / "r1") == tmp_path / "results" / counted.FOLDER
    assert counted.root_for(tmp_path / "results" / "r1") == tmp_path / "results" / counted.FOLDER
    monkeypatch.setenv(counted.ENV, str(tmp_path / "shared"))
    assert counted.root_for(tmp_path / "results" / "r1") == tmp_path / "shared"


def test_a_failed_replay_is_not_stored(tmp_path: Path) -> None:
    lab = _lab(tmp_path)
    lane = _put(tmp_path, lab)
    failed = copy.deepcopy(_record())
    failed["status"] = "failed"
    failed["steps"] = {}
    lane.put("a", "rocksdb@10.2.1", 2, failed, _choices(lab))
    key = lane.keys["a"]
    assert key is not None
    assert len(lane.store.get(key)) == 1
    assert dataclasses.replace(key, build="other").name != key.name


def test_what_does_not_pin_a_build_is_not_in_its_key() -> None:
    fetched = dict(BUILD, fetched_at="2026-11-27T22:35:12Z")
    again = dict(BUILD, fetched_at="2026-11-28T01:00:00Z")
    assert reuse.build_key(fetched) == reuse.build_key(again)
    built = {"source": "src", "cache_key": "k1", "cache_hit": "no", "build_s": "225.0"}
    hit = dict(built, cache_hit="yes", build_s="", path="/elsewhere", tree="/checkout2")
    assert reuse.build_key(built) == reuse.build_key(hit)
    assert reuse.build_key(dict(built, cache_key="k2")) != reuse.build_key(built)


def test_one_stored_replay_of_another_timed_state_bars_them_all(tmp_path: Path) -> None:
    """Taking only the replays whose runs met this run's timed state would pick a
    cluster."""
    lab = _lab(tmp_path)
    lane = _put(tmp_path, lab)
    # a replay of a run whose timed window missed the cache on 5% of its gets
    cold = _record(misses=50.0, timed=50.0)
    cold["replay"] = 2
    lane.put("a", "rocksdb@10.2.1", 2, cold, _choices(lab))
    taker = _taker(tmp_path, lab)
    assert taker.take("store", "a", 1, None, _choices(lab)) is None
    assert "a" in taker.refused and taker.taken == []


@pytest.mark.parametrize("shape", ["no counted state", "steps of lists", "per_op", "window"])
def test_an_entry_of_another_shape_is_skipped_with_one_line_and_pruned(
    tmp_path: Path, shape: str
) -> None:
    """Issue 51 item 13: `"steps": {"s": []}` raised AttributeError in `rejudged` and
    crashed every run reading the store; `store prune --unusable` did not remove it."""
    lab = _lab(tmp_path)
    lane = _put(tmp_path, lab)
    key = lane.keys["a"]
    assert key is not None
    (entry,) = lane.store.get(key)
    value = json.loads(entry.path.read_text())
    step = value["record"]["steps"]["readrandom"]
    if shape == "no counted state":
        del step["engine_state"]["counted"]
    elif shape == "steps of lists":
        value["record"]["steps"] = {"readrandom": [], "s": []}
    elif shape == "per_op":
        step["per_op"] = ["10000"]
    else:  # a window of another shape, its digest made again
        value["windows"]["readrandom"]["ops"] = "1000"
        value["windows_digest"] = counted.digest(value["windows"])
    entry.path.write_text(json.dumps(value))
    lines: list[str] = []
    taker = reuse.Reuse(tmp_path / "results" / "run2", lines.append, recount=False, band=0.01)
    taker.keys["a"] = key
    choices = {"a": _choices(lab), "b": _choices(lab)}
    taker.adopt("store", ["a", "b"], choices, 0.1)
    assert taker.take("store", "a", 1, None, _choices(lab)) is None
    (said,) = [line for line in lines if "ignoring" in line]  # one line, however often read
    assert "of another shape" in said and "\n" not in said
    (found,) = lane.store.survey()
    assert found.why is not None and "of another shape" in found.why
    assert Prune(unusable=True).matches(found, now=0.0)
    lane.store.discard(found.path)
    assert lane.store.survey() == [] and not lane.store.folder(key).exists()


def test_a_resumed_run_counts_at_the_windows_its_first_session_chose(tmp_path: Path) -> None:
    lab = _lab(tmp_path)
    run = tmp_path / "results" / "run1"
    first = {"a": _choices(lab, skip_ops=30_000)}
    same_windows(run, first)
    later = {"a": _choices(lab, skip_ops=31_000)}  # the store offered other windows since
    same_windows(run, later)
    assert later["a"]["readrandom"].skip_ops == 30_000


def test_a_counted_state_that_missed_the_timed_one_is_taken_and_judged_again(
    tmp_path: Path,
) -> None:
    """A counted window that missed its own run's timed state and misses this run's is
    taken, judged against this run's: its verdict is withheld, as a fresh count's would
    be, rather than counting again what would miss again."""
    lab = _lab(tmp_path)
    lane = reuse.Reuse(tmp_path / "results" / "run1", print, recount=False, band=0.01)
    comp = lab.comparisons[0]
    lane.keys["a"] = count_key(lab, comp, comp.columns[0], BUILD, IDENTITY)
    cold = _record(misses=500.0)
    cold["steps"]["readrandom"]["state_mismatch"] = "counted windows missed 0.5 per operation"
    lane.put("a", "rocksdb@10.2.1", 1, cold, _choices(lab))
    got = _taker(tmp_path, lab).take("store", "a", 1, None, _choices(lab))
    assert got is not None
    assert "more than the timed window's" in str(got["steps"]["readrandom"]["state_mismatch"])


def test_a_refusal_is_said_once(tmp_path: Path) -> None:
    lab = _lab(tmp_path)
    _put(tmp_path, lab)
    lines: list[str] = []
    taker = reuse.Reuse(tmp_path / "results" / "run2", lines.append, recount=False, band=0.01)
    comp = lab.comparisons[0]
    taker.keys["a"] = count_key(lab, comp, comp.columns[0], BUILD, IDENTITY)
    assert taker.take("store", "a", 1, None, _choices(lab, misses=50.0)) is None
    taker.tell()
    taker.tell()
    said = [line for line in lines if "not taken, counted anew" in line]
    assert len(said) == 1 and said[0].startswith("cost lane: a: ")


def test_a_change_to_a_shipped_profiles_content_is_another_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 51 item 8: the key held the config's name, not the configuration the engine
    starts with, so an upgrade that changes a shipped profile reused the old counts."""
    lab = _lab(tmp_path)
    comp = lab.comparisons[0]
    column = comp.columns[0]
    before = count_key(lab, comp, column, BUILD, IDENTITY)
    shipped = tmp_path / "configs"
    shutil.copytree(configs.CONFIG_ROOT, shipped)
    monkeypatch.setattr(configs, "CONFIG_ROOT", shipped)
    assert count_key(lab, comp, column, BUILD, IDENTITY) == before  # the same content
    conf = shipped / "rocksdb" / f"{column.config}.conf"
    conf.write_text(conf.read_text().replace("bloom_bits = 10", "bloom_bits = 12"))
    changed = count_key(lab, comp, column, BUILD, IDENTITY)
    assert changed is not None and before is not None and changed.name != before.name
    # a comment is no part of the configuration
    conf.write_text(conf.read_text().replace("bloom_bits = 12", "bloom_bits = 10") + "# x\n")
    assert count_key(lab, comp, column, BUILD, IDENTITY) == before


def test_the_engines_counting_settings_and_settings_code_are_in_the_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lab = _lab(tmp_path)
    comp = lab.comparisons[0]
    column = comp.columns[0]
    before = count_key(lab, comp, column, BUILD, IDENTITY)
    engine = engine_class(column.build.engine)
    monkeypatch.setattr(engine, "COUNTING_SETTINGS", {"max_background_jobs": "1"})
    quieter = count_key(lab, comp, column, BUILD, IDENTITY)
    assert quieter is not None and before is not None and quieter.name != before.name
    monkeypatch.undo()
    monkeypatch.setattr(planning, "settings_code", lambda engine: "another version")
    recoded = count_key(lab, comp, column, BUILD, IDENTITY)
    assert recoded is not None and recoded.name != before.name
    # an unknown profile renders nothing: never stored
    other = dataclasses.replace(column, config="nosuchprofile")
    assert count_key(lab, comp, other, BUILD, IDENTITY) is None


def test_a_replay_is_stored_under_the_sizes_it_ran_with(tmp_path: Path) -> None:
    """Issue 51 item 12: on a fleet the key's engine sizes were the coordinator's while a
    worker counts with its own memory."""
    lab = _lab(tmp_path)
    comp = lab.comparisons[0]
    here = prepare.engine_sizes(comp)
    worker = Sizes(cache_mb=here.cache_mb + 512, wal_mb=here.wal_mb, data_mb=here.data_mb + 7)

    def lane_of(run: str) -> reuse.Reuse:
        lane = reuse.Reuse(tmp_path / "results" / run, print, recount=False, band=0.01)
        for column in comp.columns:
            key_for = functools.partial(count_key, lab, comp, column, BUILD, IDENTITY)
            lane.key_for[column.label] = key_for
            lane.keys[column.label] = key_for(here)
        return lane

    coordinator = lane_of("run1")
    record = _record()
    record["host"] = "w1"
    record["engine_sizes"] = {
        "cache_mb": worker.cache_mb,
        "wal_mb": worker.wal_mb,
        "data_mb": worker.data_mb,
    }
    coordinator.put("a", "rocksdb@10.2.1", 1, record, _choices(lab))
    key_here, key_there = coordinator.keys["a"], coordinator.key_for["a"](worker)
    assert key_here is not None and key_there is not None
    assert coordinator.store.get(key_here) == []
    (stored,) = coordinator.store.get(key_there)
    assert stored.origin["host"] == "w1"
    # a later run whose replays run at this host's sizes does not take it; at the
    # worker's, it does
    assert lane_of("run2").take("store", "a", 1, None, _choices(lab)) is None
    there = lane_of("run3")
    there.keys["a"] = key_there
    assert there.take("store", "a", 1, None, _choices(lab)) is not None
    # a worker's replay that does not say its sizes is not stored
    unsized = _record()
    unsized["host"] = "w2"
    coordinator.put("b", "rocksdb@10.2.1", 1, unsized, _choices(lab))
    assert len(coordinator.store.get(key_there)) == 1 and coordinator.store.get(key_here) == []


def test_a_reused_build_is_counted_anew_every_n_runs(tmp_path: Path) -> None:
    """Issue 51 item 9: a reused base froze one draw for every later run."""
    lab = _lab(tmp_path)
    _put(tmp_path, lab)  # run1 counts
    for n in range(2, 5):  # runs 2-4 take it (runs 2-5 with every = 5)
        lane = _taker(tmp_path, lab, run=f"run{n}")
        lane.every = 4
        assert lane.take("store", "a", 1, None, _choices(lab)) is not None
        assert lane.record([])["recount_every"] == 4
    lane = _taker(tmp_path, lab, run="run5")
    lane.every = 4
    assert lane.take("store", "a", 1, None, _choices(lab)) is None
    assert "recount_every = 4" in lane.refused["a"] and "last 3 run(s)" in lane.refused["a"]
    # a resumed run decides as its first session did: its own take is not counted
    again = _taker(tmp_path, lab, run="run4")
    again.every = 4
    assert again.take("store", "a", 1, None, _choices(lab)) is not None
    # run5 counts anew and stores it: the next runs take again
    lane.put("a", "rocksdb@10.2.1", 1, _record(), _choices(lab))
    after = _taker(tmp_path, lab, run="run6")
    after.every = 4
    assert after.take("store", "a", 1, None, _choices(lab)) is not None
    # every = 1 takes nothing
    always = _taker(tmp_path, lab, run="run7")
    always.every = 1
    assert always.take("store", "a", 1, None, _choices(lab)) is None


def test_a_bisections_points_share_their_ends_counts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every point of a bisection is judged against the same counts of its ends: the
    rule that recounts a reused build every N runs is for runs over time, not points."""
    monkeypatch.delenv(counted.ENV, raising=False)
    lab = _lab(tmp_path)
    bisection = tmp_path / "results" / "bisect-1"
    (bisection / "runs").mkdir(parents=True)
    (bisection / "bisect.json").write_text("{}")
    _put(tmp_path, lab, run="bisect-1/runs/p1")
    for n in range(2, 6):
        point = _taker(tmp_path, lab, run=f"bisect-1/runs/p{n}")
        point.every = reuse.Reuse(point.run, print, False, 0.01, 2).every
        assert point.take("store", "a", 1, None, _choices(lab)) is not None
    # a run beside the bisection asks the rule: the points' takes count
    nightly = _taker(tmp_path, lab, run="night")
    assert nightly.take("store", "a", 1, None, _choices(lab)) is None
    assert "recount_every = 5" in nightly.refused["a"]


def test_a_new_host_class_counts_anew(tmp_path: Path) -> None:
    lab = _lab(tmp_path)
    lane = _put(tmp_path, lab)
    key = lane.keys["a"]
    assert key is not None
    lane.host_class = "class1"
    lane.put("a", "rocksdb@10.2.1", 2, _record(), _choices(lab))
    other = _taker(tmp_path, lab)
    other.host_class = "class2"
    assert other.take("store", "a", 1, None, _choices(lab)) is None
    assert "host class (class2)" in other.refused["a"]
    same = _taker(tmp_path, lab, run="run3")
    same.host_class = "class1"
    assert same.take("store", "a", 1, None, _choices(lab)) is not None


def test_the_lane_says_how_many_replays_of_each_column_are_fresh(tmp_path: Path) -> None:
    lab = _lab(tmp_path)
    _put(tmp_path, lab)
    lane = _taker(tmp_path, lab)
    got = lane.take("store", "a", 1, None, _choices(lab))
    assert got is not None
    own = [_record("a"), _record("b"), _record("b")]
    failed = dict(_record("b"), status="failed")
    used = lane.record([got, *own, cast(ReplayRecord, failed)])
    assert used.get("fresh") == {"a": 1, "b": 2}
    assert used.get("taken") == {"a": 1, "b": 0}


def test_the_history_floor_leaves_out_the_replays_a_run_took(tmp_path: Path) -> None:
    """Issue 51 item 9: a reused base was floored by its own replays: the floor pooled
    the originals of the very replays the verdict pooled."""
    root = tmp_path / "results"
    _runs(root, tmp_path, 0.01, "aaaa", 0)  # run-0, run-1, run-2, each base and head r1-r3
    assert reindex(root) == []
    name = cell("aaaa").name
    with History(root) as h:
        assert h.cost_floors([cell("aaaa")], but="run-3").runs[name] == (
            "run-0",
            "run-1",
            "run-2",
        )
        taken = {("run-2", label, n) for label in ("base", "head") for n in (1, 2, 3)}
        floor = h.cost_floors([cell("aaaa")], but="run-3", taken=taken)
        assert floor.runs[name] == ("run-0", "run-1")
    replays = [
        cast(ReplayRecord, {"reused": {"run": r, "column": c, "replay": n}})
        for r, c, n in sorted(taken)
    ]
    assert history_moves.taken(replays) == taken
