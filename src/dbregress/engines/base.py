"""What the runner needs from every engine, whatever its family."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

from dbregress.provision import Build
from dbregress.shapes.spec import EngineSpec


@dataclass(frozen=True)
class Sizes:
    """Engine memory and log sizes derived from the lab's scale (see lab/file.py)."""

    cache_mb: int  # shared_buffers / buffer pool / block cache
    wal_mb: int  # max_wal_size / redo log capacity
    data_mb: int = 0  # estimated size of the benchmark's data; presets may size from it


@dataclass(frozen=True)
class EngineOptions:
    workdir: Path  # private directory for the data directory and the socket; created by start
    log_path: Path  # the server log, kept with the run
    config_name: str  # a profile shipped in dbregress/configs/<family>/<name>.conf
    settings: dict[str, str] = field(default_factory=dict)  # the lab's overrides
    sizes: Sizes = Sizes(cache_mb=128, wal_mb=1024)
    cpus: frozenset[int] | None = None  # CPUs the server and its children run on; None = unpinned
    start_timeout_s: float = 120.0
    stop_timeout_s: float = 60.0
    # A command prefix the server runs under (dbregress explain's profiler); it must exec
    # into the server, so the pid stays the server's. PostgreSQL and the MySQL family
    # honour it.
    wrapper: tuple[str, ...] = ()


@dataclass(frozen=True)
class ReadPattern:
    """How the engine reads its data from storage: the unit of a read and whether it
    bypasses the page cache. fio measures the device with the same (io_baseline.py)."""

    block_size: int  # bytes
    direct: bool  # O_DIRECT
    source: str  # where the block size comes from, in words


class Engine(ABC):
    """One server of one build with one config, for the lifetime of one job.

    An embedded engine (RocksDB) has no server process: the loadgen opens the database
    itself, so its process is the one measured and server_pid() is never called.
    """

    embedded: ClassVar[bool] = False
    # The settings a counting replay (explain's and the cost lane's, under callgrind)
    # starts the engine with, under a column's own: what the engine needs under valgrind
    # and what keeps its timed background work from falling differently between
    # replays. Each engine's say why; an engine needs none by default.
    COUNTING_SETTINGS: ClassVar[dict[str, str]] = {}

    @classmethod
    def counting_settings(cls, version: str) -> dict[str, str]:
        """The COUNTING_SETTINGS of a build that says `version` of itself (its
        version_string, or a BuildSpec's version where the build is not at hand): an
        engine whose settings depend on the version says how."""
        return dict(cls.COUNTING_SETTINGS)

    def __init__(self, build: Build, options: EngineOptions) -> None:
        self.build = build
        self.options = options

    @abstractmethod
    def start(self) -> None:
        """Initialize a fresh data directory, write the config, start, wait until ready.

        Raises ConfigRejected (server's message + profile name) or EngineError with the
        server log's tail.
        """

    @abstractmethod
    def stop(self) -> None:
        """Fast, clean shutdown; kills the process tree if that does not finish in time.
        Idempotent; safe to call after a crash."""

    def hurry(self) -> None:
        """SIGKILL every process of the engine now, without waiting or reaping (called
        from a signal handler while stop() may be waiting); stop() then finishes fast.
        An embedded engine has no process of its own: the loadgen is killed instead."""
        return None

    @abstractmethod
    def server_pid(self) -> int:
        """The pid at the root of the server's process tree."""

    @abstractmethod
    def check_alive(self) -> None:
        """Raise EngineCrashed (with the log's tail) if the server is no longer running."""

    @abstractmethod
    def connection(self) -> EngineSpec:
        """The `engine` section of a loadgen step spec for this server."""

    @abstractmethod
    def data_size_bytes(self) -> int:
        """Bytes the data directory occupies on disk now."""

    @abstractmethod
    def settings_applied(self) -> dict[str, str]:
        """The settings written for this server (profile + sizes + overrides)."""

    def read_pattern(self) -> ReadPattern | None:
        """How it reads its data (None: an engine that reads no storage)."""
        return None

    def log_tail(self, lines: int = 30) -> str:
        try:
            text = self.options.log_path.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])
