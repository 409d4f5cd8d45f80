"""The interleaved schedule freezes the waiting engine: while the other side has its
turn, the waiting engine's whole process tree (PostgreSQL's postmaster and every child;
RocksDB's loadgen, which holds the embedded engine) spends no CPU time at all.

The run goes through the command line in this process, so the test can look at each
freeze from the follower that does it: right after the engine is stopped (every thread
of every process of its tree in the stopped state, read from /proc) and right before it
is continued, the tree's utime + stime from /proc/<pid>/stat. A stopped thread is not
scheduled, so the two readings are equal to the tick: the test waits for the stop to take
hold (SIGSTOP reaches a running thread at its next return to user mode) before the first
reading, so no tick of slack is needed and none is allowed."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from dbregress.cli.main import main
from dbregress.execution import step

# quiet: it judges timed figures, so it runs with the host to itself (Makefile, pytest)
pytestmark = [pytest.mark.engine, pytest.mark.quiet]

LAB = """\
name = "freeze"
placement = "separate"
repeats = 1
warmup_job = false
count = false
schedule = "interleaved"
slice_ms = 50

[[comparison]]
name = "kv"
benchmark = "kv"
[[comparison.column]]
label = "ka"
build = "rocksdb@10.2.1"
[[comparison.column]]
label = "kb"
build = "rocksdb@10.2.1"
[comparison.kv]
keys = 20000
seconds = 0.5
warmup_s = 0.1
steps = ["fillseq", "readrandom"]

[[comparison]]
name = "pg"
benchmark = "insert"
[[comparison.column]]
label = "pa"
build = "postgres@17.2.0"
[[comparison.column]]
label = "pb"
build = "postgres@17.2.0"
[comparison.insert]
clients = 1
load_rows = 5000
write_rows = 1000
query_seconds = 0.5
warmup_s = 0.1
steps = ["l.i0", "qr100"]
"""

STOPPED = {"T", "t", "Z", "X"}  # stopped, traced, or dead (a zombie spends nothing)


def _stat_fields(path: Path) -> list[str] | None:
    try:
        text = path.read_text()
    except OSError:  # gone
        return None
    return text[text.rindex(")") + 2 :].split()  # after "pid (comm) "


def _tree(root: int) -> set[int]:
    """The pids of root and its descendants, from /proc (ppid links)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and (f := _stat_fields(entry / "stat")) is not None:
            children.setdefault(int(f[1]), []).append(int(entry.name))
    out, todo = set(), [root]
    while todo:
        pid = todo.pop()
        if pid not in out:
            out.add(pid)
            todo += children.get(pid, [])
    return out


def _all_stopped(pids: set[int]) -> bool:
    for pid in pids:
        try:
            tasks = list(Path(f"/proc/{pid}/task").iterdir())
        except OSError:
            continue
        for task in tasks:
            f = _stat_fields(task / "stat")
            if f is not None and f[0] not in STOPPED:
                return False
    return True


def _alive(pid: int) -> bool:
    f = _stat_fields(Path(f"/proc/{pid}/stat"))
    return f is not None and f[0] not in ("Z", "X")


def _cpu_ticks(pids: set[int]) -> int:
    """utime + stime (clock ticks) summed over the processes (each over its threads)."""
    total = 0
    for pid in pids:
        f = _stat_fields(Path(f"/proc/{pid}/stat"))
        if f is not None:
            total += int(f[11]) + int(f[12])  # fields 14 and 15 of proc(5)
    return total


@dataclass
class Freeze:
    side: str  # which engine: kind and side of the turns
    root: int  # its root pid: the postmaster, or the step's loadgen (embedded RocksDB)
    tree: set[int]
    before: int  # the tree's ticks once every thread stopped
    others_before: dict[int, int]  # the other engines' ticks (by root) at that moment
    after: int | None = None
    tree_after: set[int] = field(default_factory=set)
    others_grew: int = 0


def test_the_waiting_engine_spends_no_cpu_during_the_other_sides_turn(
    tmp_path: Path, workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    roots: dict[int, str] = {}  # every engine's root pid seen freezing: its name
    pending: dict[int, Freeze] = {}  # id of the pid list freeze() returned -> its record
    done: list[Freeze] = []
    never_stopped: list[str] = []
    freeze, thaw = step._Follower.freeze, step.thaw

    def observed_freeze(self: Any) -> list[int]:
        pids: list[int] = freeze(self)
        root = self.loadgen.pid if self.server_pid is None else self.server_pid
        name = f"{'rocksdb' if self.server_pid is None else 'postgres'} side {self.side}"
        roots[root] = name
        tree = _tree(root)
        # wait for SIGSTOP to take hold in every thread (a thread in a system call stops
        # on its way out, one in uninterruptible IO when the IO ends); the generous
        # bound only ends the wait on a thread that never stops, which fails the test
        # (and later freezes are then not waited for)
        for _ in range(0 if never_stopped else 200_000):
            if _all_stopped(tree):
                break
            time.sleep(0.0005)
        else:
            never_stopped.append(f"{name}: {sorted(tree)}")
        others = {r: _cpu_ticks(_tree(r)) for r in roots if r != root and _alive(r)}
        pending[id(pids)] = Freeze(name, root, tree, _cpu_ticks(tree), others)
        return pids

    def observed_thaw(pids: list[int]) -> None:
        record = pending.pop(id(pids), None)
        if record is not None:  # read before SIGCONT: the tree is still stopped
            record.tree_after = _tree(record.root)
            record.after = _cpu_ticks(record.tree_after)
            record.others_grew = sum(
                max(0, _cpu_ticks(_tree(r)) - ticks)
                for r, ticks in record.others_before.items()
                if _alive(r)
            )
            done.append(record)
        thaw(pids)

    monkeypatch.setattr(step._Follower, "freeze", observed_freeze)
    monkeypatch.setattr(step, "thaw", observed_thaw)
    monkeypatch.setenv("DBREGRESS_WORKDIR", str(workdir))
    monkeypatch.chdir(tmp_path)
    lab = tmp_path / "lab.toml"
    lab.write_text(LAB)

    assert main(["run", str(lab)]) == 0
    assert not never_stopped, never_stopped
    # both engines of both comparisons waited, many times
    sides = {r.side for r in done}
    assert {"rocksdb side 0", "rocksdb side 1", "postgres side 0", "postgres side 1"} <= sides
    assert len(done) >= 20, len(done)
    for r in done:
        assert len(r.tree) >= 1 and r.tree_after == r.tree, (r.side, r.tree, r.tree_after)
        assert r.after == r.before, (r.side, r.before, r.after)  # not one tick while frozen
    # and the turns were real: the other engines spent CPU while these waited
    for kind in ("rocksdb", "postgres"):
        grew = sum(r.others_grew for r in done if r.side.startswith(kind))
        assert grew > 0, kind
    print(
        f"{len(done)} freezes over {len(sides)} engines, "
        f"{sum(len(r.tree) for r in done)} process-tree readings, 0 ticks while frozen; "
        f"the others meanwhile: {sum(r.others_grew for r in done)} ticks"
    )
