"""What every server engine does with its processes, whatever the database.

A server runs as our own child in a session of its own (as `nobody` when we are root:
PostgreSQL and MySQL refuse to run as root), pinned to the lab's CPUs, with its output
going to a log file we opened. Stopping it means waking a stopped tree, asking for a
clean shutdown, and killing the whole tree, then any orphans, if that does not finish.
"""

from __future__ import annotations

import ctypes
import os
import pwd
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import IO

from dbregress.collect.proc import PROC, ServerUser, thread_states, tree_pids, walk_tree
from dbregress.model.errors import EngineError

RUN_AS_WHEN_ROOT = "nobody"


def run_as() -> tuple[int, int] | None:
    """(uid, gid) to run a server as, or None to run it as ourselves."""
    if os.geteuid() != 0:
        return None
    entry = pwd.getpwnam(RUN_AS_WHEN_ROOT)
    return entry.pw_uid, entry.pw_gid


def as_server_user() -> ServerUser:
    """subprocess keyword arguments that run a child as the server user (uid, gid, no
    supplementary groups); empty unless we are root."""
    ids = run_as()
    return {"user": ids[0], "group": ids[1], "extra_groups": []} if ids else {}


def chown_to_server(*paths: Path) -> None:
    """Give `paths` to the user the server runs as (a no-op unless we are root)."""
    ids = run_as()
    if ids is not None:
        for path in paths:
            os.chown(path, *ids)


def describe_exit(status: int) -> str:
    if status < 0:
        try:
            return f"was killed by signal {signal.Signals(-status).name}"
        except ValueError:
            return f"was killed by signal {-status}"
    return f"exited with status {status}"


@contextmanager
def pinned(cpus: frozenset[int] | None) -> Iterator[None]:
    """Pin the calling thread while it spawns, so the child (and its children) inherit."""
    if cpus is None:
        yield
        return
    before = os.sched_getaffinity(0)
    try:
        os.sched_setaffinity(0, cpus)
    except OSError as e:
        raise EngineError(f"cannot pin the server to CPUs {sorted(cpus)}: {e}") from e
    try:
        yield
    finally:
        os.sched_setaffinity(0, before)


_PR_SET_PDEATHSIG = 1
_libc = ctypes.CDLL(None, use_errno=True)


def die_with_parent() -> None:
    """In a child before it execs: SIGKILL it when the thread that started it dies. A
    dbregress (or fleet worker) killed outright then leaves no server or loadgen running:
    they run in sessions of their own, which no signal to our process group reaches."""
    _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def spawn(
    args: list[str],
    *,
    log: IO[bytes] | None,
    cwd: Path,
    env: dict[str, str],
    cpus: frozenset[int] | None,
) -> subprocess.Popen[bytes]:
    """Start `args` as the server user, in its own session, pinned, output to `log`."""
    with pinned(cpus):
        return subprocess.Popen(
            args,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=cwd,
            env=env,
            start_new_session=True,
            preexec_fn=die_with_parent,
            **as_server_user(),
        )


# The guard's whole program. It waits for EOF on stdin, which comes when the engine
# was stopped (we close the pipe) or when the process that started it died, however it
# died: the kernel closes a dead process's descriptors. Then it SIGKILLs every process
# still working in the data directory. This matters for servers made of several
# processes, each in a session of its own (PostgreSQL's): the parent-death signal kills
# the postmaster only, and a child frozen by an interleaved turn (SIGSTOP) would never
# run again to notice that its postmaster is gone. The test is processes_in's (a
# data directory removed meanwhile reads "... (deleted)"), written out so the guard
# starts in milliseconds: importing dbregress would cost a CPU second at every start.
_GUARD = """
import os, signal, sys, time
target = sys.argv[1]
sys.stdin.buffer.read()
def here(pid):
    try:
        cwd = os.readlink("/proc/%s/cwd" % pid)
    except OSError:
        return False
    return cwd in (target, target + " (deleted)")
deadline = time.monotonic() + 10
while time.monotonic() < deadline:
    pids = [int(p) for p in os.listdir("/proc") if p.isdigit() and here(p)]
    if not pids:
        break
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    time.sleep(0.1)
"""


def guard(data_dir: Path) -> subprocess.Popen[bytes]:
    """A small process that kills whatever still runs in `data_dir` once we release it or
    die (see _GUARD). Its own session: a signal to our process group does not reach it."""
    return subprocess.Popen(
        [sys.executable, "-I", "-S", "-c", _GUARD, str(data_dir.resolve())],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )


def release(guard_proc: subprocess.Popen[bytes]) -> None:
    """Close the guard's pipe (the engine is stopped) and reap it."""
    assert guard_proc.stdin is not None
    guard_proc.stdin.close()
    try:
        guard_proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        guard_proc.kill()
        guard_proc.wait()


def prepare_workdir(workdir: Path, private_dirs: list[Path], what: str, binary_dir: Path) -> None:
    """Create an empty private (0700) `workdir` and `private_dirs`, owned by the server user.

    As root the server runs as nobody, who must be able to traverse every parent of the
    workdir and of the build's binaries: a clear error names the directory if not.
    """
    if workdir.exists() and any(workdir.iterdir()):
        raise EngineError(f"{what}: workdir {workdir} is not empty; give a new one")
    workdir.parent.mkdir(parents=True, exist_ok=True)
    workdir.mkdir(mode=0o700, exist_ok=True)
    workdir.chmod(0o700)
    for directory in private_dirs:
        directory.mkdir(mode=0o700)
    chown_to_server(workdir, *private_dirs)
    if run_as() is not None:
        check_reachable_by_others(workdir.parent, what)
        check_reachable_by_others(binary_dir, what)


def check_reachable_by_others(directory: Path, what: str) -> None:
    """As root the server runs as nobody, who must be able to traverse every parent."""
    for path in (directory.resolve(), *directory.resolve().parents):
        if not path.stat().st_mode & 0o001:
            raise EngineError(
                f"{what}: {path} is not traversable by user {RUN_AS_WHEN_ROOT!r}, who runs "
                f"the server when dbregress runs as root; `chmod o+x {path}` or use "
                "directories under a 0755 parent"
            )


def read_from(path: Path, offset: int) -> bytes:
    """The bytes of `path` from `offset` on (empty if it cannot be read)."""
    try:
        with open(path, "rb") as f:
            f.seek(offset)
            return f.read()
    except OSError:
        return b""


def stop_tree(proc: subprocess.Popen[bytes], shutdown: signal.Signals, timeout_s: float) -> None:
    """Wake the tree (a stopped server cannot shut down), send `shutdown` to the root,
    wait `timeout_s`, then SIGKILL every process of the tree."""
    if proc.poll() is not None:
        return
    thaw(tree_pids(proc.pid))
    with suppress(ProcessLookupError):
        os.kill(proc.pid, shutdown)
    try:
        proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        kill_tree(proc)


def kill_tree(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL `proc` and all its descendants, and reap it."""
    for pid in tree_pids(proc.pid):
        kill(pid)
    proc.wait()


def kill(pid: int) -> None:
    with suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)


# A task in one of these states spends no CPU: stopped, traced, a zombie, dead.
_STOPPED_STATES = frozenset("TtZX")
_FREEZE_PASSES = 5
FREEZE_SETTLE_S = 2.0


def freeze_tree(root_pid: int) -> list[int]:
    """SIGSTOP a process and all its descendants and wait until the kernel shows every
    thread stopped; the pids stopped, for thaw().

    The tree is walked from the root down, stopped in that order (the root first, so it
    forks no more), and walked again once the stops have taken hold, until a walk finds
    no new pid: a child forked between a walk and its parent's stop is found by the next
    walk, and a walk of a tree that is wholly stopped is final (a stopped process forks
    no more). A signal takes hold when its target next runs (a thread in uninterruptible
    IO when the IO ends), so each wait is bounded, FREEZE_SETTLE_S in all, and a freeze
    that does not settle in it is still returned, for the caller to thaw. The walks read
    only the tree's own /proc entries: this runs at every turn of an interleaved step,
    and a scan of all of /proc there cost a few milliseconds of the host's CPU each."""
    stopped: list[int] = []
    deadline = time.monotonic() + FREEZE_SETTLE_S
    for _ in range(_FREEZE_PASSES):
        fresh = [pid for pid in walk_tree(root_pid) if pid not in stopped]
        if not fresh:
            break
        for pid in fresh:
            with suppress(ProcessLookupError):
                os.kill(pid, signal.SIGSTOP)
                stopped.append(pid)
        while not all_stopped(stopped) and time.monotonic() < deadline:
            time.sleep(0.0005)
    return stopped


def thaw(pids: list[int]) -> None:
    """SIGCONT what freeze_tree() stopped."""
    for pid in pids:
        with suppress(ProcessLookupError):
            os.kill(pid, signal.SIGCONT)


def all_stopped(pids: list[int]) -> bool:
    """Whether every thread of these processes is stopped or gone."""
    return all(state in _STOPPED_STATES for pid in pids for state in thread_states(pid))


def processes_in(directory: Path) -> list[int]:
    """Pids of live processes whose working directory is `directory` (PostgreSQL's and
    MySQL's servers chdir into their data directory; zombies have no working directory)."""
    target = str(directory.resolve())
    found = []
    for entry in PROC.iterdir():
        if entry.name.isdigit():
            try:
                if os.readlink(entry / "cwd") == target:
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def kill_leftovers(directory: Path, what: str) -> None:
    """Kill server processes orphaned by a dead parent: they run in the data directory."""
    deadline = time.monotonic() + 10.0
    while pids := processes_in(directory):
        if time.monotonic() > deadline:
            raise EngineError(f"{what}: processes {pids} in {directory} survive SIGKILL")
        for pid in pids:
            kill(pid)
        time.sleep(0.05)


def disk_usage(directory: Path) -> int:
    """Bytes the files under `directory` occupy on disk (st_blocks * 512)."""
    total = 0
    for dirpath, _, filenames in os.walk(directory):
        for name in filenames:
            try:
                total += os.lstat(os.path.join(dirpath, name)).st_blocks * 512
            except FileNotFoundError:  # removed by the server meanwhile
                continue
    return total
