"""Process-tree counters from /proc: real child processes and a synthetic /proc."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from dbregress.collect import proc

BUSY = "import time\nend = time.process_time() + {s}\nwhile time.process_time() < end: pass\n"


@pytest.fixture
def sleeper() -> Iterator[subprocess.Popen[bytes]]:
    """A parent that, once told `go` on stdin, runs a busy child to completion (and reaps
    it), says `done`, then sleeps."""
    script = (
        "import subprocess, sys, time\n"
        "sys.stdin.readline()\n"
        f"subprocess.run([sys.executable, '-c', {BUSY.format(s=0.3)!r}])\n"
        "print('done', flush=True)\n"
        "time.sleep(30)\n"
    )
    parent = subprocess.Popen(
        [sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    yield parent
    parent.kill()
    parent.wait()
    for stream in (parent.stdin, parent.stdout):
        if stream is not None:
            stream.close()


SLEEPS = 50


def test_sleeps_and_busy_cpu_are_counted() -> None:
    # The child waits on stdin before each part, so each falls wholly between two
    # samples however slow or busy the host is: first SLEEPS short sleeps (one
    # voluntary context switch each), then 0.3 s of process time.
    script = (
        "import sys, time\nsys.stdin.readline()\n"
        f"for _ in range({SLEEPS}): time.sleep(0.001)\n"
        "print('slept', flush=True)\nsys.stdin.readline()\n"
        + BUSY.format(s=0.3)
        + "print('done', flush=True)\ntime.sleep(30)\n"
    )
    child = subprocess.Popen(
        [sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    assert child.stdin is not None and child.stdout is not None

    def step(word: bytes, answer: bytes) -> proc.TreeSample:
        assert child.stdin is not None and child.stdout is not None
        child.stdin.write(word + b"\n")
        child.stdin.flush()
        assert child.stdout.readline() == answer + b"\n"
        return proc.snapshot_tree(child.pid)

    try:
        outer_start = time.monotonic()
        first = proc.snapshot_tree(child.pid)
        slept = step(b"go", b"slept")
        done = step(b"burn", b"done")
        outer = time.monotonic() - outer_start
    finally:
        child.kill()
        child.wait()
        child.stdin.close()
        child.stdout.close()
    sleeping, busy = first.delta(slept), slept.delta(done)
    # one switch per sleep at least; at most a handful per sleep (its own, preemptions
    # around its wake-up: about 4 on a host loaded 9 times over) and a few for the pipe.
    # A misparsed status (a kB figure) or other processes' switches are far above that.
    assert SLEEPS <= sleeping.ctx_switches <= 10 * SLEEPS + 20
    busy_cpu_s = busy.user_s + busy.system_s
    assert busy_cpu_s >= 0.28  # 0.3 s of process time, less up to two truncated ticks
    assert busy.user_s > 0
    assert sleeping.user_s + sleeping.system_s < busy_cpu_s  # each part in its own window
    assert sleeping.root_alive and busy.root_alive
    # each window is the time between its samples: positive, and the two together
    # inside the time this test measured around all three
    for usage, (a, b) in ((sleeping, (first, slept)), (busy, (slept, done))):
        assert usage.wall_s == b.taken_at - a.taken_at > 0
    assert sleeping.wall_s + busy.wall_s <= outer


def test_reaped_grandchild_cpu_stays_in_the_tree(sleeper: subprocess.Popen[bytes]) -> None:
    before = proc.snapshot_tree(sleeper.pid)
    assert sleeper.stdin is not None and sleeper.stdout is not None
    sleeper.stdin.write(b"go\n")  # the busy child starts only after the first sample
    sleeper.stdin.flush()
    assert sleeper.stdout.readline() == b"done\n"  # the busy child has exited and been reaped
    after = proc.snapshot_tree(sleeper.pid)
    assert len(after.ctx_switches) == 1  # only the parent is left
    usage = before.delta(after)
    assert usage.user_s + usage.system_s >= 0.25  # the child burned 0.3 s of process time


def test_tree_follows_descendants() -> None:
    shell = subprocess.Popen(["sh", "-c", "sleep 30 & sleep 30 & wait"], start_new_session=True)
    try:
        deadline = time.monotonic() + 5
        while len(proc.tree_pids(shell.pid)) < 3 and time.monotonic() < deadline:
            time.sleep(0.02)
        pids = proc.tree_pids(shell.pid)
    finally:
        # the whole group at once: killing the children one by one from a listing could
        # miss one (a busy host once left the shell waiting out its 30 s sleep)
        os.killpg(shell.pid, signal.SIGKILL)
        shell.wait()
    assert pids[0] == shell.pid
    assert len(pids) == 3


def test_vanished_root_gives_partial_usage() -> None:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    sample = proc.snapshot_tree(child.pid)
    assert not sample.root_alive
    assert (sample.user_ticks, sample.read_bytes) == (0, 0)
    assert sample.delta(sample).root_alive is False


def _fake_proc(
    root: Path,
    pid: int,
    ppid: int,
    comm: str,
    ticks: tuple[int, ...],
    cs: int,
    io: tuple[int, int] | None,
) -> None:
    d = root / str(pid)
    d.mkdir(exist_ok=True)
    utime, stime, cutime, cstime = ticks
    rest = [ppid, 1, 1, 0, -1, 0, 0, 0, 0, 0, utime, stime, cutime, cstime, 20, 0, 1, 0, 777]
    (d / "stat").write_text(f"{pid} ({comm}) S " + " ".join(map(str, rest)) + " 0 0\n")
    (d / "status").write_text(
        f"Name:\t{comm}\nvoluntary_ctxt_switches:\t{cs}\nnonvoluntary_ctxt_switches:\t1\n"
    )
    if io is not None:
        (d / "io").write_text(f"rchar: 5\nread_bytes: {io[0]}\nwrite_bytes: {io[1]}\n")


def test_synthetic_proc(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(proc, "PROC", tmp_path)
    tick = proc.TICKS_PER_S
    _fake_proc(tmp_path, 10, 1, "post) (master", (tick, 0, 0, 0), 5, (0, 4096))
    _fake_proc(tmp_path, 11, 10, "backend", (tick, tick, 0, 0), 7, (8192, 0))
    _fake_proc(tmp_path, 12, 1, "stranger", (99 * tick, 0, 0, 0), 100, (1, 1))
    before = proc.snapshot_tree(10)
    assert before.user_ticks == 2 * tick and before.system_ticks == tick

    # the backend exits and is reaped (its CPU and IO move into the parent), a new one starts
    for name in ("stat", "status", "io"):
        (tmp_path / "11" / name).unlink()
    (tmp_path / "11").rmdir()
    _fake_proc(tmp_path, 10, 1, "post) (master", (tick, 0, 2 * tick, tick), 9, (8192, 8192))
    _fake_proc(tmp_path, 13, 10, "backend", (tick, 0, 0, 0), 3, None)
    usage = before.delta(proc.snapshot_tree(10))
    assert usage.user_s == pytest.approx(2.0)  # 1 s more by the reaped backend, 1 s new one
    assert usage.system_s == pytest.approx(0.0)
    assert usage.ctx_switches == 4 + 4  # parent +4, new backend counts from 0 (3+1)
    assert (usage.read_bytes, usage.write_bytes) == (0, 4096)
    assert usage.io_complete is False  # pid 13's io was unreadable
    assert set(usage.to_json()) >= {"user_s", "system_s", "ctx_switches", "read_bytes"}
