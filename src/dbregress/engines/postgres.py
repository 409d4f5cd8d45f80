"""PostgreSQL lifecycle: initdb, a private unix socket, the postmaster as our own child.

The `postgres` binary is started directly (not through pg_ctl) so its pid is the root of
the server's process tree, its exit status is ours to read, and stop() can reach every
process. When we are root the server runs as `nobody` (PostgreSQL refuses root).
"""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path
from typing import IO, Any

from dbregress import configs
from dbregress.engines import process
from dbregress.engines.base import Engine, EngineOptions
from dbregress.engines.process import describe_exit, processes_in
from dbregress.errors import ConfigRejected, EngineCrashed, EngineError
from dbregress.provision import Build
from dbregress.provision.local import library_env

__all__ = ["PostgresEngine", "processes_in"]

PORT = 5432  # the socket directory is private, so a fixed port cannot collide
READY_POLL_S = 0.05
# the server's own words for a setting it refuses, most specific first
CONFIG_ERRORS = (
    "unrecognized configuration parameter",
    "invalid value for parameter",
    "outside the valid range for parameter",
    "requires a Boolean value",
    "requires a numeric value",
    "syntax error in file",
    "contains errors",
)
# the postmaster survived but a server process died: crash recovery, not a benchmark
CRASH_MARKS = ("was terminated by signal", "terminating any other active server processes")


class PostgresEngine(Engine):
    """One PostgreSQL server in `options.workdir` (data/ and socket/), logging to log_path."""

    def __init__(self, build: Build, options: EngineOptions) -> None:
        super().__init__(build, options)
        self._proc: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None
        self._log_offset = 0  # where this start's server output begins in the log
        self._crash_scan_from = 0  # check_alive has seen the log up to here
        self._settings: dict[str, str] | None = None

    @property
    def data_dir(self) -> Path:
        return self.options.workdir / "data"

    @property
    def socket_dir(self) -> Path:
        return self.options.workdir / "socket"

    # -- settings -----------------------------------------------------------------------

    def settings_applied(self) -> dict[str, str]:
        """Connection settings, then the profile with sizes, then the lab's overrides."""
        if self._settings is None:
            base = {
                "listen_addresses": "",
                "unix_socket_directories": str(self.socket_dir),
                "port": str(PORT),
            }
            profile = configs.render(
                "postgres", self.options.config_name, self.options.sizes, self.options.settings
            )
            self._settings = {**base, **profile}
        return dict(self._settings)

    def _write_config(self) -> None:
        lines = [f"# written by dbregress: profile {self.options.config_name!r}"]
        for key, value in self.settings_applied().items():
            lines.append(f"{key} = '{value.replace(chr(39), chr(39) * 2)}'")
        conf = self.data_dir / "dbregress.conf"
        conf.write_text("\n".join(lines) + "\n")
        with open(self.data_dir / "postgresql.conf", "a") as main:
            main.write("\ninclude 'dbregress.conf'\n")
        process.chown_to_server(conf)

    # -- start --------------------------------------------------------------------------

    def start(self) -> None:
        if self._proc is not None:
            raise EngineError(f"{self.build.spec}: start() called twice")
        self.settings_applied()  # an unknown profile fails before anything is created
        self._prepare_workdir()
        self.options.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = open(self.options.log_path, "ab")  # noqa: SIM115 (closed by stop)
        try:
            self._initdb()
            self._write_config()
            self._spawn()
            self._wait_ready()
        except BaseException:
            self.stop()
            raise

    def _prepare_workdir(self) -> None:
        process.prepare_workdir(
            self.options.workdir,
            [self.socket_dir],
            str(self.build.spec),
            self.build.bin("postgres").parent,
        )

    def _popen(self, args: list[str]) -> subprocess.Popen[bytes]:
        return process.spawn(
            args,
            log=self._log,
            cwd=self.options.workdir,
            env=library_env(self.build.basedir),
            cpus=self.options.cpus,
        )

    def _initdb(self) -> None:
        args = [str(self.build.bin("initdb")), "-D", str(self.data_dir)]
        args += ["-U", "postgres", "--auth=trust", "-E", "UTF8", "--locale=C"]
        proc = self._popen(args)
        try:
            status = proc.wait(timeout=self.options.start_timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            raise EngineError(
                f"{self.build.spec}: initdb did not finish in {self.options.start_timeout_s} s; "
                f"log {self.options.log_path}:\n{self.log_tail()}"
            ) from None
        if status != 0:
            raise EngineError(
                f"{self.build.spec}: initdb {describe_exit(status)}; "
                f"log {self.options.log_path}:\n{self.log_tail()}"
            )

    def _spawn(self) -> None:
        assert self._log is not None
        self._log.flush()
        self._log_offset = self.options.log_path.stat().st_size
        self._crash_scan_from = self._log_offset
        self._proc = self._popen([str(self.build.bin("postgres")), "-D", str(self.data_dir)])

    def _log_bytes(self, since: int) -> bytes:
        return process.read_from(self.options.log_path, since)

    def _server_output(self) -> str:
        """What the server has logged since this start."""
        return self._log_bytes(self._log_offset).decode(errors="replace")

    def _is_ready(self) -> bool:
        """What pg_ctl -w checks: line 8 of postmaster.pid says "ready" (PostgreSQL 10+).

        Older servers have no status line; their log says when they accept connections.
        """
        try:
            lines = (self.data_dir / "postmaster.pid").read_text().splitlines()
        except OSError:
            return False
        if len(lines) >= 8:
            return lines[7].strip() == "ready"
        return "ready to accept connections" in self._server_output()

    def _wait_ready(self) -> None:
        assert self._proc is not None
        deadline = time.monotonic() + self.options.start_timeout_s
        while not self._is_ready():
            status = self._proc.poll()
            if status is not None:
                raise self._start_failure(status)
            if time.monotonic() > deadline:
                raise EngineError(
                    f"{self.build.spec} was not ready after {self.options.start_timeout_s} s; "
                    f"log {self.options.log_path}:\n{self.log_tail()}"
                )
            time.sleep(READY_POLL_S)

    def _start_failure(self, status: int) -> EngineError:
        lines = self._server_output().splitlines()
        for marker in CONFIG_ERRORS:
            for line in lines:
                if marker in line:
                    overrides = self.options.settings
                    extra = f" with the lab's settings {overrides}" if overrides else ""
                    return ConfigRejected(
                        f"{self.build.spec} rejected config profile "
                        f"{self.options.config_name!r}{extra}: {line.strip()}"
                    )
        return EngineError(
            f"{self.build.spec} {describe_exit(status)} while starting; "
            f"log {self.options.log_path}:\n{self.log_tail()}"
        )

    # -- running ------------------------------------------------------------------------

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
        # scan only what is new, from the start of the last line seen (it may be partial)
        new = self._log_bytes(self._crash_scan_from)
        self._crash_scan_from += new.rfind(b"\n") + 1
        output = new.decode(errors="replace")
        for marker in CRASH_MARKS:
            if marker in output:
                raise EngineCrashed(
                    f"{self.build.spec}: a server process crashed and the server restarted "
                    f"({marker}); log {self.options.log_path}:\n{self.log_tail()}"
                )

    def connection(self) -> dict[str, Any]:
        settings = self.settings_applied()
        return {
            "driver": "postgres",
            "socket_dir": settings["unix_socket_directories"].split(",")[0].strip(),
            "port": int(settings["port"]),
            "user": "postgres",
            "database": "postgres",
        }

    def data_size_bytes(self) -> int:
        return process.disk_usage(self.data_dir)

    # -- stop ---------------------------------------------------------------------------

    def stop(self) -> None:
        if self._proc is not None:
            # SIGINT is a fast shutdown: abort transactions, checkpoint, exit
            process.stop_tree(self._proc, signal.SIGINT, self.options.stop_timeout_s)
        process.kill_leftovers(self.data_dir, str(self.build.spec))
        self._proc = None
        if self._log is not None:
            self._log.close()
            self._log = None
