"""PostgreSQL lifecycle: initdb, a private unix socket, the postmaster as our own child.

The `postgres` binary is started directly (not through pg_ctl) so its pid is the root of
the server's process tree, its exit status is ours to read, and stop() can reach every
process. When we are root the server runs as `nobody` (PostgreSQL refuses root).
"""

from __future__ import annotations

import re
import signal
import subprocess
from pathlib import Path

from dbregress import configs
from dbregress.engines import process
from dbregress.engines.base import EngineOptions, ReadPattern
from dbregress.engines.process import describe_exit, processes_in
from dbregress.engines.server import ServerEngine
from dbregress.model.errors import EngineCrashed, EngineError
from dbregress.provision import Build
from dbregress.provision.libenv import library_env
from dbregress.shapes.spec import EngineSpec

PAGE_BYTES = 8192  # a heap or index page (the default BLCKSZ)


def major_version(version: str) -> int | None:
    """PostgreSQL's major version in what a build says of itself ("postgres
    (PostgreSQL) 18.1", "postgres (PostgreSQL) 19devel") or in a version as a lab
    names it ("17.2.0", "9.6.24"); None where it names none ("system", a path)."""
    found = re.search(r"\(PostgreSQL\)\s+(\d+)", version) or re.match(r"(\d+)(?:[.]|$)", version)
    return int(found.group(1)) if found else None


__all__ = ["PostgresEngine", "major_version", "processes_in"]

PORT = 5432  # the socket directory is private, so a fixed port cannot collide
# the server's own words for a setting it refuses, most specific first
CONFIG_ERRORS = (
    "unrecognized configuration parameter",
    "invalid value for parameter",
    "outside the valid range for parameter",
    "requires a boolean value",
    "requires a numeric value",
    "syntax error in file",
    "contains errors",
)
# the postmaster survived but a server process died: crash recovery, not a benchmark
CRASH_MARKS = ("was terminated by signal", "terminating any other active server processes")

# PostgreSQL's time-driven background work, off while callgrind counts (explain's and
# the cost lane's counting replays: PostgresEngine.COUNTING_SETTINGS): under valgrind's
# slowdown autovacuum and timed checkpoints fall at other points of the operations than
# in the run, and what they clean or log changes what the backends do (l.i1 and l.i2
# moved 5% between two explain runs of one build with them on; with them off l.i1 held
# to 0.001%, docs/metrics.md). A column's own settings still win.
#
# Parallel query and parallel index builds off too: valgrind runs one thread at a time,
# so parallel workers only move work from the session's backend to other processes, in
# shares that follow the scheduling (PostgreSQL 17's l.x counted 4.3% apart between
# three replays of one build with them on); with them off the session's backend does it
# all and its count is the step's work.
QUIET_POSTGRES = {
    "autovacuum": "off",
    "checkpoint_timeout": "1d",
    "max_parallel_maintenance_workers": "0",
    "max_parallel_workers_per_gather": "0",
}
# PostgreSQL 18 and later read through I/O workers by default (`io_method = worker`):
# a backend that misses shared buffers has a worker process read the block, so the
# sessions' backends, whose reads (/proc/PID/io) are the engine state a counting window
# is checked against (analysis/state.py), see no miss in either window and a colder
# counted state passes unmeasured; the read's work also moves out of the counted
# sessions into a background process. Counting replays of 18+ read in the backend
# itself (`io_method = sync`, as PostgreSQL 17 and earlier always did); older servers
# do not know the setting and refuse to start with it.
SYNC_IO = {"io_method": "sync"}
FIRST_IO_METHOD = 18  # the first major version with io_method


class PostgresEngine(ServerEngine):
    """One PostgreSQL server in `options.workdir` (data/ and socket/), logging to log_path."""

    CONFIG_ERRORS = CONFIG_ERRORS
    STOP_SIGNAL = signal.SIGINT  # a fast shutdown: abort transactions, checkpoint, exit
    COUNTING_SETTINGS = QUIET_POSTGRES

    @classmethod
    def counting_settings(cls, version: str) -> dict[str, str]:
        """QUIET_POSTGRES, with SYNC_IO for a server of major version 18 or later."""
        major = major_version(version)
        quiet = dict(QUIET_POSTGRES)
        return quiet | SYNC_IO if major is not None and major >= FIRST_IO_METHOD else quiet

    def __init__(self, build: Build, options: EngineOptions) -> None:
        super().__init__(build, options)
        self._crash_scan_from = 0  # check_alive has seen the log up to here

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

    def read_pattern(self) -> ReadPattern:
        """An 8 KiB page per read through the page cache (PostgreSQL reads buffered)."""
        return ReadPattern(PAGE_BYTES, False, "PostgreSQL's 8 KiB page")

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
            self._wait_ready(self._is_ready)
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
        server = [str(self.build.bin("postgres")), "-D", str(self.data_dir)]
        self._launch(server)

    def _log_bytes(self, since: int) -> bytes:
        return process.read_from(self.options.log_path, since)

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
        return "ready to accept connections" in self._output_since_start()

    # -- running ------------------------------------------------------------------------

    def check_alive(self) -> None:
        super().check_alive()
        # a crashed backend makes the postmaster restart everything: the step is void.
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

    def connection(self) -> EngineSpec:
        settings = self.settings_applied()
        return {
            "driver": "postgres",
            "socket_dir": settings["unix_socket_directories"].split(",")[0].strip(),
            "port": int(settings["port"]),
            "user": "postgres",
            "database": "postgres",
        }
