"""The store of counting replays (store/counted.py) and when the cost lane takes a
stored replay (cost/reuse.py): a change in any part of what a count depends on (the
simulated caches, the loadgen binary, a step's size, the build's flavor) takes nothing;
a corrupt entry is ignored with one line; windows the run could not have chosen, an
engine state that does not meet this run's timed one, an entry taken already and the
run's own replays are never taken."""

from __future__ import annotations

import copy
import dataclasses
import json
import os
import tomllib
from pathlib import Path
from typing import Any, cast

import pytest

from dbregress import benchmarks
from dbregress.analysis.state import CacheState
from dbregress.cost import reuse
from dbregress.cost.planning import count_key, same_windows
from dbregress.explain.jobs import Choice
from dbregress.lab.file import Lab, parse_lab
from dbregress.shapes.method import MethodIdentity
from dbregress.shapes.replay import ReplayRecord
from dbregress.store import counted
from dbregress.store.counted import CountStore

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
    near = {s: _paced(c) for s, c in _choices(lab, q_per_s=140_000.0).items()}
    assert reuse.incompatible(stored, near, warmup) is None
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


def test_an_entry_of_another_shape_is_skipped_not_fatal(tmp_path: Path) -> None:
    lab = _lab(tmp_path)
    lane = _put(tmp_path, lab)
    key = lane.keys["a"]
    assert key is not None
    (entry,) = lane.store.get(key)
    value = json.loads(entry.path.read_text())
    del value["record"]["steps"]["readrandom"]["engine_state"]["counted"]
    entry.path.write_text(json.dumps(value))
    lines: list[str] = []
    taker = reuse.Reuse(tmp_path / "results" / "run2", lines.append, recount=False, band=0.01)
    taker.keys["a"] = key
    assert taker.take("store", "a", 1, None, _choices(lab)) is None
    assert any("ignoring" in line and "KeyError" in line for line in lines)


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
