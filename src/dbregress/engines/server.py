"""What every engine with a server process shares: the child process and its log, the
wait until it is ready, the diagnosis of a failed start, the liveness check, the stop.

Subclasses say how the server starts, when it is ready, which log lines mean a rejected
config (CONFIG_ERRORS) and which signal is its clean shutdown (STOP_SIGNAL).
"""

from __future__ import annotations

import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, ClassVar

from dbregress.collect.proc import tree_pids
from dbregress.engines import process
from dbregress.engines.base import Engine, EngineOptions
from dbregress.engines.process import describe_exit
from dbregress.model.errors import ConfigRejected, EngineCrashed, EngineError
from dbregress.provision import Build

READY_POLL_S = 0.05


class ServerEngine(Engine):
    CONFIG_ERRORS: ClassVar[tuple[str, ...]] = ()  # lower-case markers of a rejected setting
    STOP_SIGNAL: ClassVar[signal.Signals] = signal.SIGTERM

    def __init__(self, build: Build, options: EngineOptions) -> None:
        super().__init__(build, options)
        self._proc: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None
        self._log_offset = 0  # where this start's server output begins in the log
        self._settings: dict[str, str] | None = None
        self._guard: subprocess.Popen[bytes] | None = None

    @property
    def data_dir(self) -> Path:
        return self.options.workdir / "data"

    def _output_since_start(self) -> str:
        return process.read_from(self.options.log_path, self._log_offset).decode(errors="replace")

    def _wait_ready(self, ready: Callable[[], bool]) -> None:
        assert self._proc is not None
        deadline = time.monotonic() + self.options.start_timeout_s
        while not ready():
            status = self._proc.poll()
            if status is not None:
                raise self._start_failure(status)
            if time.monotonic() > deadline:
                raise EngineError(
                    f"{self.build.spec} was not ready after {self.options.start_timeout_s} s; "
                    f"log {self.options.log_path}:\n{self.log_tail()}"
                )
            time.sleep(READY_POLL_S)

    def _start_failure(self, status: int, doing: str = "starting") -> EngineError:
        """ConfigRejected with the server's own line if the log shows a rejected setting,
        else EngineError with the log's tail."""
        for line in self._output_since_start().splitlines():
            if any(marker in line.lower() for marker in self.CONFIG_ERRORS):
                overrides = self.options.settings
                extra = f" with the lab's settings {overrides}" if overrides else ""
                return ConfigRejected(
                    f"{self.build.spec} rejected config profile "
                    f"{self.options.config_name!r}{extra}: {line.strip()}"
                )
        return EngineError(
            f"{self.build.spec} {describe_exit(status)} while {doing}; "
            f"log {self.options.log_path}:\n{self.log_tail()}"
        )

    def server_pid(self) -> int:
        if self._proc is None:
            raise EngineError(f"{self.build.spec} is not running")
        return self._proc.pid

    def check_alive(self) -> None:
        if self._proc is None:
            raise EngineCrashed(f"{self.build.spec} is not running (never started or stopped)")
        status = self._proc.poll()
        if status is not None:
            raise EngineCrashed(
                f"{self.build.spec} (pid {self._proc.pid}) {describe_exit(status)}; "
                f"log {self.options.log_path}:\n{self.log_tail()}"
            )

    def data_size_bytes(self) -> int:
        return process.disk_usage(self.data_dir)

    def hurry(self) -> None:
        if self._proc is not None:
            for pid in tree_pids(self._proc.pid):
                process.kill(pid)
        for pid in process.processes_in(self.data_dir):
            process.kill(pid)

    def _popen(self, args: list[str]) -> subprocess.Popen[bytes]:
        """Start `args` as the server's user, with the engine's environment."""
        raise NotImplementedError

    def _launch(self, server: list[str]) -> None:
        """Start the server (under options.wrapper, a profiler's prefix), and the guard
        that kills what still runs in its data directory if we die (process.guard)."""
        self._proc = self._popen([*self.options.wrapper, *server])
        if self._guard is None:
            self._guard = process.guard(self.data_dir)

    def stop(self) -> None:
        if self._proc is not None:
            process.stop_tree(self._proc, self.STOP_SIGNAL, self.options.stop_timeout_s)
        process.kill_leftovers(self.data_dir, str(self.build.spec))
        self._proc = None
        if self._guard is not None:
            process.release(self._guard)
            self._guard = None
        if self._log is not None:
            self._log.close()
            self._log = None
