"""A counted window's callgrind files: which are the window's (window_files), and how
they split into the work serving the loadgen's sessions and the engine's background (a
server's by process or connection thread, an embedded engine's by the loadgen's threads
and their calls into its library). Apart from counting.py, which runs the replay, as
these read only files and profiles.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from dbregress.engines.mysql import CONNECTION_FUNCTIONS
from dbregress.explain import callgrind
from dbregress.explain.threads import split_connection_threads
from dbregress.provision import Build


def window_files(out_dir: Path, hint: str, opened: float, closed: float) -> list[Path]:
    """The callgrind files of one window: every process's dump at the close, and the
    final file of each process that ended inside the window (not of one that took the
    dump: its final file holds what it did after)."""
    dumped, ended = [], []
    for f in sorted(out_dir.glob("callgrind.out.*")):
        trigger = callgrind.trigger(f)
        if trigger == f"dump {hint}":
            dumped.append(f)
        elif trigger.startswith("Program termination") and (
            opened <= f.stat().st_mtime <= closed + 1.0
        ):
            ended.append(f)
    pids = {_pid(f) for f in dumped}
    return dumped + [f for f in ended if _pid(f) not in pids]


def split_sessions(files: list[Path], sessions: set[str]) -> tuple[list[Path], list[Path]] | None:
    """A window's files as (those of the processes serving the loadgen's sessions, the
    rest: the server's background processes); None when no file is a session's (no
    session pids reported, or none of their processes left a file)."""
    mine = [f for f in files if _pid(f) in sessions]
    if not mine:
        return None
    return mine, [f for f in files if _pid(f) not in sessions]


def server_split(
    profiles: dict[Path, callgrind.Profile], sessions: set[str], threaded: bool, step: str
) -> tuple[list[Path], list[Path]]:
    """A server's window as (the work serving the loadgen's sessions, the rest): by
    thread for the MySQL family (split_connection_threads), by process otherwise
    (split_sessions); CallgrindError when it cannot be split. A counting replay counts
    the sessions' work (scope "sessions") or fails: the whole server's work (background
    processes and threads with it) would be another measure under the same name, so the
    replay fails and the cost lane runs it again, as it does any failed replay."""
    files = list(profiles)
    if threaded:
        split = split_connection_threads(profiles)
        why = (
            f"no thread ran the statement dispatcher ({', '.join(sorted(CONNECTION_FUNCTIONS))}) "
            f"in {len(profiles)} callgrind file(s): a server without symbols, or one file"
        )
    else:
        split = split_sessions(files, sessions)
        why = (
            f"none of {len(files)} callgrind file(s) is of a process serving the "
            f"loadgen's sessions (session pids: {', '.join(sorted(sessions)) or 'none reported'})"
        )
    if split is None:
        raise callgrind.CallgrindError(
            f"{step}: cannot tell the work serving the loadgen's sessions from the server's "
            f"background: {why}; the whole server's work is not counted in its place"
        )
    return split


# The loadgen's own code, as callgrind names its object.
LOADGEN_OBJECT = "dbregress-loadgen"


def split_threads(
    profiles: dict[Path, callgrind.Profile],
) -> tuple[list[Path], list[Path]] | None:
    """An embedded engine's window, a file per thread, as (the loadgen's threads: those
    that ran any of the loadgen's own code in the window, its clients among them; the
    rest: the engine's background threads, RocksDB's flushes and compactions); None
    when that cannot be told (one file, or none with the loadgen's code). Of the
    loadgen's threads only their calls into the engine count (engine_work())."""
    mine = [
        f
        for f, p in profiles.items()
        if any(callgrind.object_name(ob) == LOADGEN_OBJECT for ob, _ in p.functions)
    ]
    if len(profiles) < 2 or not mine:
        return None
    return mine, [f for f in profiles if f not in mine]


def embedded_split(
    profiles: dict[Path, callgrind.Profile], step: str
) -> tuple[list[Path], list[Path]]:
    """split_threads, or CallgrindError when the window's files cannot be split: an
    embedded engine is counted as the loadgen's calls into it (scope "engine-calls") or
    not at all. Counting whole threads instead (the client's loop, its timing and any
    injected slowdown with the engine's work) would be another measure under the same
    name, so the counting replay fails and the cost lane runs it again, as it does any
    failed replay."""
    split = split_threads(profiles)
    if split is None:
        threads = sum(
            any(callgrind.object_name(ob) == LOADGEN_OBJECT for ob, _ in p.functions)
            for p in profiles.values()
        )
        raise callgrind.CallgrindError(
            f"{step}: cannot tell the loadgen's threads from the engine's in the window "
            f"({len(profiles)} callgrind file(s), {threads} with {LOADGEN_OBJECT}'s code): "
            f"the engine's calls cannot be counted apart from the client's own work"
        )
    return split


# The scope of an embedded engine's figures: the loadgen's calls into its library.
ENGINE_CALLS = "engine-calls"


def engine_objects(build: Build) -> Callable[[str], bool]:
    """Whether an object (as callgrind names it: the mapped file's path) is the
    embedded engine's library: the build's library file by name (or the file it links
    to), else any librocksdb* (a library loaded under another path)."""
    names = set()
    if build.library is not None:
        names = {build.library.name, build.library.resolve().name}

    def is_engine(ob: str) -> bool:
        name = callgrind.object_name(ob)
        return name in names or name.startswith("librocksdb")

    return is_engine


def engine_work(build: Build, profile: callgrind.Profile, step: str) -> callgrind.EngineCalls:
    """The embedded engine's work in the loadgen's threads' profile: the calls from the
    loadgen's object into the engine's library, inclusive (callgrind.EngineCalls)."""
    found = callgrind.engine_calls(
        profile, engine_objects(build), lambda ob: callgrind.object_name(ob) == LOADGEN_OBJECT
    )
    if not any(found.total):
        raise callgrind.CallgrindError(
            f"{step}: callgrind recorded no call from {LOADGEN_OBJECT} into the engine's "
            f"library ({build.library}) in the window: nothing to count"
        )
    return found


def _pid(f: Path) -> str:
    """The pid in callgrind.out.PID, callgrind.out.PID.N or (a file per thread)
    callgrind.out.PID.N-TID."""
    return f.name.split(".")[2].split("-")[0]
