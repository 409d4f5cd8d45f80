"""CPU, context switches and IO of a process tree, from /proc.

Method: a tree is the root and all its descendants (by the ppid field of
/proc/<pid>/stat). Its CPU total is the sum over live members of utime+stime+cutime+cstime
and its IO total the sum of read_bytes/write_bytes in /proc/<pid>/io. Linux adds a reaped
child's CPU to its parent's cutime/cstime and its IO to the parent's io counters, so the
difference of two totals is exact for CPU and IO even when processes exit in between.
Context switches (voluntary + nonvoluntary in /proc/<pid>/status) are not handed to the
parent: those of processes that exit between two samples are lost. Processes found in
the later sample but not the earlier count from zero. Processes vanishing while being
read are skipped. A process that leaves the tree (reparented to init) takes its CPU and
IO with it; such a step would show less than it spent.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypedDict

from dbregress.shapes import step_result as shapes

PROC = Path("/proc")


class ServerUser(TypedDict, total=False):
    """subprocess keyword arguments that run a child as the server's user (engines/
    process.py as_server_user): all or none of them."""

    user: int
    group: int
    extra_groups: list[int]


TICKS_PER_S = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class ProcStat:
    pid: int
    ppid: int
    state: str
    starttime: int  # clock ticks after boot; with pid, identifies a process across reuse
    cpu_ticks: tuple[int, int, int, int]  # utime, stime, cutime, cstime


def read_stat(pid: int) -> ProcStat | None:
    """Parse /proc/<pid>/stat; None if the process is gone."""
    try:
        text = (PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    fields = _stat_fields(text)
    utime, stime, cutime, cstime = (int(v) for v in fields[11:15])
    return ProcStat(pid, int(fields[1]), fields[0], int(fields[19]), (utime, stime, cutime, cstime))


def _stat_fields(text: str) -> list[str]:
    """A stat file's fields after the command name, from the state on."""
    # the command name is in parentheses and may itself contain spaces and parentheses
    return text[text.rindex(")") + 2 :].split()


def thread_states(pid: int) -> list[str]:
    """The state letter of each live thread of `pid` (none if it is gone)."""
    try:
        tasks = list((PROC / str(pid) / "task").iterdir())
    except OSError:
        return []
    states = []
    for task in tasks:
        try:
            states.append(_stat_fields((task / "stat").read_text())[0])
        except (OSError, ValueError, IndexError):  # the thread ended meanwhile
            continue
    return states


def all_stats() -> dict[int, ProcStat]:
    stats: dict[int, ProcStat] = {}
    for entry in PROC.iterdir():
        if entry.name.isdigit():
            stat = read_stat(int(entry.name))
            if stat is not None:
                stats[stat.pid] = stat
    return stats


def tree_stats(root_pid: int, stats: dict[int, ProcStat] | None = None) -> list[ProcStat]:
    """The root and all its live descendants (root first); empty if the root is gone."""
    stats = all_stats() if stats is None else stats
    if root_pid not in stats:
        return []
    children: dict[int, list[int]] = {}
    for stat in stats.values():
        children.setdefault(stat.ppid, []).append(stat.pid)
    members, queue = [], [root_pid]
    while queue:
        pid = queue.pop()
        members.append(stats[pid])
        queue.extend(children.get(pid, []))
    return members


def tree_pids(root_pid: int) -> list[int]:
    return [stat.pid for stat in tree_stats(root_pid)]


def walk_tree(root_pid: int) -> list[int]:
    """tree_pids, parents first, read from each thread's `children` file: only the
    tree's own /proc entries, where tree_pids scans all of /proc (kept for kernels
    without those files)."""
    if not _HAS_CHILDREN_FILES:
        return tree_pids(root_pid)
    if not (PROC / str(root_pid)).exists():
        return []
    found, queue = [], [root_pid]
    while queue:
        pid = queue.pop(0)
        found.append(pid)
        try:
            tasks = [t.name for t in (PROC / str(pid) / "task").iterdir()]
        except OSError:  # gone meanwhile
            continue
        for tid in tasks:
            try:
                text = (PROC / str(pid) / "task" / tid / "children").read_text()
            except OSError:  # the thread ended meanwhile
                continue
            queue.extend(int(c) for c in text.split() if int(c) not in found)
    return found


_HAS_CHILDREN_FILES = (PROC / "self" / "task" / str(os.getpid()) / "children").exists()


def _status_ctx_switches(pid: int) -> int | None:
    try:
        text = (PROC / str(pid) / "status").read_text()
    except OSError:
        return None
    names = ("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches")
    return sum(int(line.split()[1]) for line in text.splitlines() if line.split(":")[0] in names)


def _io_bytes(pid: int) -> tuple[int, int] | None:
    try:
        text = (PROC / str(pid) / "io").read_text()
    except OSError:  # gone, or not ours to read (another user, without root)
        return None
    values = dict(line.split(": ", 1) for line in text.splitlines() if ": " in line)
    return int(values["read_bytes"]), int(values["write_bytes"])


@dataclass(frozen=True)
class Usage:
    """What a process tree spent between two samples."""

    user_s: float
    system_s: float
    ctx_switches: int
    read_bytes: int  # bytes the tree caused to be read from storage
    write_bytes: int  # bytes the tree caused to be written to storage
    wall_s: float
    io_complete: bool  # False if some member's /proc/<pid>/io could not be read
    root_alive: bool  # False if the root was gone in either sample: totals are partial

    def to_json(self) -> shapes.UsageJson:
        return {
            "user_s": self.user_s,
            "system_s": self.system_s,
            "ctx_switches": self.ctx_switches,
            "read_bytes": self.read_bytes,
            "write_bytes": self.write_bytes,
            "wall_s": self.wall_s,
            "io_complete": self.io_complete,
            "root_alive": self.root_alive,
        }


@dataclass(frozen=True)
class TreeSample:
    root_pid: int
    taken_at: float  # time.monotonic()
    user_ticks: int
    system_ticks: int
    read_bytes: int
    write_bytes: int
    ctx_switches: dict[tuple[int, int], int] = field(default_factory=dict)  # (pid, start)
    io_complete: bool = True

    @property
    def root_alive(self) -> bool:
        return any(key[0] == self.root_pid for key in self.ctx_switches)

    def delta(self, later: TreeSample) -> Usage:
        """Usage of the tree from this sample to `later` (see the module docstring)."""
        before = self.ctx_switches
        ctx = sum(max(0, n - before.get(key, 0)) for key, n in later.ctx_switches.items())
        return Usage(
            user_s=max(0, later.user_ticks - self.user_ticks) / TICKS_PER_S,
            system_s=max(0, later.system_ticks - self.system_ticks) / TICKS_PER_S,
            ctx_switches=ctx,
            read_bytes=max(0, later.read_bytes - self.read_bytes),
            write_bytes=max(0, later.write_bytes - self.write_bytes),
            wall_s=later.taken_at - self.taken_at,
            io_complete=self.io_complete and later.io_complete,
            root_alive=self.root_alive and later.root_alive,
        )


def snapshot_tree(root_pid: int, stats: dict[int, ProcStat] | None = None) -> TreeSample:
    """Totals of the tree rooted at `root_pid` now (an empty sample if the root is gone).
    `stats`, from all_stats(), lets several trees share one pass over /proc."""
    taken_at = time.monotonic()
    user = system = read = write = 0
    io_complete = True
    ctx: dict[tuple[int, int], int] = {}
    # all stat files are read first, close together, so a child reaped meanwhile is
    # counted once: either in its own stat or in its parent's cutime/cstime
    for stat in tree_stats(root_pid, stats):
        utime, stime, cutime, cstime = stat.cpu_ticks
        user += utime + cutime
        system += stime + cstime
        switches = _status_ctx_switches(stat.pid)
        if switches is None:  # vanished since its stat was read
            continue
        ctx[(stat.pid, stat.starttime)] = switches
        io = _io_bytes(stat.pid)
        if io is None:
            io_complete = False
        else:
            read, write = read + io[0], write + io[1]
    return TreeSample(root_pid, taken_at, user, system, read, write, ctx, io_complete)
