"""An embedded engine's counting replay counts the loadgen's calls into the engine
(scope "engine-calls") or fails: a window whose callgrind files cannot be split into the
loadgen's threads and the engine's is not counted as whole threads (scope "engine", the
client's own loop and slowdown included) under the same name. A server's replay counts
the work serving the loadgen's sessions (scope "sessions": PostgreSQL's backends by
process, the MySQL family's connection threads) or fails alike, never the whole server
with its background. The failed replay is stored as failed and the cost lane runs it
again, as it does any failed replay."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from dbregress.cost import replay as cost_replay
from dbregress.explain import callgrind, counting
from dbregress.explain.window_split import embedded_split, server_split
from dbregress.provision import Build, BuildSpec
from dbregress.store.replays import save_replay
from tests.unit.test_cost_lane_retry import lane, planned, replay

BUILD = Build(BuildSpec.parse("rocksdb@10.2.1"), Path("."), "RocksDB 10.2.1")

LOADGEN = "/x/dbregress-loadgen"
ROCKSDB = "/c/librocksdbjni-linux64.so"


def _profile(*objects: str) -> callgrind.Profile:
    p = callgrind.Profile(files=1)
    for ob in objects:
        p.functions[(ob, "f")] = [10] + [0] * (len(p.events) - 1)
    return p


def _files(*profiles: callgrind.Profile) -> dict[Path, callgrind.Profile]:
    return {Path(f"callgrind.out.7.1-0{i}"): p for i, p in enumerate(profiles, start=2)}


def test_a_window_of_one_file_cannot_be_split_and_fails_the_replay() -> None:
    profiles = _files(_profile(LOADGEN, ROCKSDB))
    with pytest.raises(callgrind.CallgrindError) as e:
        embedded_split(profiles, "readrandom")
    assert "readrandom: cannot tell the loadgen's threads" in str(e.value)
    assert "1 callgrind file(s), 1 with dbregress-loadgen's code" in str(e.value)


def test_a_window_with_no_thread_of_the_loadgen_fails_the_replay() -> None:
    profiles = _files(_profile(ROCKSDB), _profile("/lib/libc.so.6"))
    with pytest.raises(callgrind.CallgrindError, match="2 callgrind file"):
        embedded_split(profiles, "fwdrange")


def test_a_window_that_splits_gives_the_loadgens_threads_and_the_engines() -> None:
    profiles = _files(_profile(LOADGEN, ROCKSDB), _profile(ROCKSDB))
    client, flush = profiles
    assert embedded_split(profiles, "readrandom") == ([client], [flush])


def test_a_failed_split_is_stored_as_a_failed_replay_and_run_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ln = lane(tmp_path)
    (comparison,) = ln.lab.comparisons
    column = comparison.columns[0]

    def count(job: Any, notify: Any) -> dict[str, Any]:
        # the window of a replay whose threads ran as one callgrind file
        embedded_split(_files(_profile(LOADGEN, ROCKSDB)), "readrandom")
        raise AssertionError("embedded_split returned")

    monkeypatch.setattr(counting, "count", count)
    record = cost_replay.count_replay(
        ln.lab,
        cost_replay.Replay(comparison, column, 1),
        build=BUILD,  # the replay never gets to run it
        choices={},
        work=tmp_path / "work",
        out=tmp_path / "out",
        cancelled=threading.Event(),
    )
    assert record is not None and record["status"] == "failed" and record["steps"] == {}
    assert record["error"]["type"] == "CallgrindError"
    assert "cannot tell the loadgen's threads" in record["error"]["message"]
    save_replay(ln.run, "a", 1, record)
    save_replay(ln.run, "a", 2, replay("a", 2, ok=True))
    for n in (1, 2):
        save_replay(ln.run, "b", n, replay("b", n, ok=True))
    # the failed replay stands for one of the first count_replays: run again, every step
    assert planned(ln) == [("a", 3, None)]


MARIADBD = "/usr/sbin/mariadbd"


def _server_profile(*functions: str) -> callgrind.Profile:
    p = callgrind.Profile(files=1)
    for fn in functions:
        p.functions[(MARIADBD, fn)] = [10] + [0] * (len(p.events) - 1)
    return p


def test_a_threaded_server_without_the_dispatcher_fails_the_replay() -> None:
    # a mysqld without symbols: callgrind names its functions by address only
    profiles = _files(_server_profile("0x0000000000a1b2c3"), _server_profile("0x00000000d00d"))
    with pytest.raises(callgrind.CallgrindError) as e:
        server_split(profiles, set(), threaded=True, step="points")
    message = str(e.value)
    assert message.startswith("points: cannot tell the work serving the loadgen's sessions")
    assert "no thread ran the statement dispatcher (dispatch_command, do_command)" in message
    assert "in 2 callgrind file(s)" in message
    assert "the whole server's work is not counted in its place" in message


def test_a_threaded_server_splits_its_connection_threads_from_the_background() -> None:
    profiles = _files(_server_profile("dispatch_command"), _server_profile("srv_purge_coordinator"))
    connection, purge = profiles
    assert server_split(profiles, set(), threaded=True, step="points") == ([connection], [purge])


def test_a_server_without_session_pids_fails_the_replay() -> None:
    # PostgreSQL's files, a file per process: no session pid reported at `ready`
    profiles = {Path(f"callgrind.out.{pid}"): _server_profile("PostgresMain") for pid in (41, 42)}
    with pytest.raises(callgrind.CallgrindError) as e:
        server_split(profiles, set(), threaded=False, step="l.i0")
    assert "none of 2 callgrind file(s) is of a process serving the loadgen's sessions" in str(
        e.value
    )
    assert "session pids: none reported" in str(e.value)
    # pids reported, but none of them left a file in the window
    with pytest.raises(callgrind.CallgrindError, match="session pids: 7"):
        server_split(profiles, {"7"}, threaded=False, step="l.i0")


def test_a_server_splits_its_sessions_backends_from_the_background() -> None:
    backend, checkpointer = Path("callgrind.out.41"), Path("callgrind.out.42")
    profiles = {backend: _server_profile("PostgresMain"), checkpointer: _server_profile("x")}
    found = server_split(profiles, {"41"}, threaded=False, step="l.i0")
    assert found == ([backend], [checkpointer])


def test_a_failed_server_split_is_stored_as_a_failed_replay(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ln = lane(tmp_path)
    (comparison,) = ln.lab.comparisons
    column = comparison.columns[0]

    def count(job: Any, notify: Any) -> dict[str, Any]:
        server_split(_files(_server_profile("0x1"), _server_profile("0x2")), set(), True, "q")
        raise AssertionError("server_split returned")

    monkeypatch.setattr(counting, "count", count)
    record = cost_replay.count_replay(
        ln.lab,
        cost_replay.Replay(comparison, column, 1),
        build=BUILD,  # the replay never gets to run it
        choices={},
        work=tmp_path / "work",
        out=tmp_path / "out",
        cancelled=threading.Event(),
    )
    assert record is not None and record["status"] == "failed" and record["steps"] == {}
    assert record["error"]["type"] == "CallgrindError"
    assert "no thread ran the statement dispatcher" in record["error"]["message"]
