"""MySQL-family lifecycle (MariaDB, MySQL, Percona, FB MySQL): system tables, a my.cnf
from a profile, the server as our own child on a private unix socket.

`mysqld`/`mariadbd` is started directly (not through mysqld_safe) so its pid is ours to
watch and its exit status ours to read; as root it runs as `nobody`. Its error log is its
stderr, a file dbregress opened at options.log_path (so a root-owned results directory
works): no `log_error` is set, and then every version logs to stderr.

The server (not the system tables' install) runs under options.wrapper, a command prefix
that execs into it (dbregress explain's callgrind), so its pid is still the server's.
"""

from __future__ import annotations

import signal
import socket
import subprocess
from pathlib import Path

from dbregress import configs
from dbregress.configs import mysql as mysql_configs
from dbregress.engines import process
from dbregress.engines.base import EngineOptions, ReadPattern
from dbregress.engines.server import ServerEngine
from dbregress.model.errors import ConfigRejected, EngineError
from dbregress.provision import Build
from dbregress.provision import mysql as family
from dbregress.provision.mysql import ServerVersion
from dbregress.shapes.spec import EngineSpec

INSTALL_TIMEOUT_S = 300.0  # old versions' mysql_install_db takes ~10 s on 2 vCPUs
PROTOCOL_VERSION = 10  # first byte of the server's greeting packet since MySQL 3.21
MAX_SOCKET_PATH = 107  # sun_path is 108 bytes with the terminating NUL
# the server's own words for a setting it refuses (compared in lower case)
CONFIG_ERRORS = (
    "unknown variable",
    "unknown option",
    "unrecognized value",
    "unknown/unsupported storage engine",
    "error while setting value",
    "invalid value",
    "incorrect value",
    "ambiguous option",
    "option requires an argument",
    "can't open shared library",
)
# how the server warns of a `loose_` option it does not know (compared in lower case):
# skipping it is what `loose_` asks for, not a rejected setting
LOOSE_SKIPPED = ("unknown variable 'loose", "unknown option '--loose")
ROCKSDB_PLUGIN = "ha_rocksdb.so"
PLUGIN_DIRS = ("lib/plugin", "lib/mysql/plugin", "lib64/mysql/plugin")

# The counting replay's settings for the MySQL family (explain's and the cost lane's
# callgrind replays: MysqlEngine.COUNTING_SETTINGS), under a column's own settings. A
# `loose_` option is skipped, with a warning, by a server that does not know it.
QUIET_MYSQL = {
    # valgrind 3.19 has no io_uring: MariaDB 10.6+ linked with liburing (Debian's is)
    # hangs at InnoDB's start. Without native AIO InnoDB reads and writes with plain
    # pread/pwrite, as every version can; a read a statement waits for is a synchronous
    # read in its own thread either way.
    "innodb_use_native_aio": "OFF",
    # MariaDB 10.11.12+ and 11.4.6+ reserve address space for the largest buffer pool
    # the server may grow to, 8 TiB by default, which valgrind cannot map ("Cannot map
    # innodb_buffer_pool_size_max"). A value below innodb_buffer_pool_size is raised to
    # it: the pool is the configured one, it just cannot be grown at run time. Older
    # versions have no such option (`loose_`).
    "loose_innodb_buffer_pool_size_max": "8M",
    # Under valgrind one thread runs at a time, so a thread spinning on a latch that
    # another thread holds spins (and counts) its whole budget while the holder cannot
    # run, and how often a connection thread meets a latch held by purge or the page
    # cleaner is timing. One round, no delay: it waits on the futex at once; its work
    # is the same. Not 0: MariaDB 10.6+'s srw_mutex decrements before it tests
    # (`!--spin`), so 0 spins until the latch is free (one latch at commit counted 2.8
    # million instructions).
    "innodb_sync_spin_loops": "1",
    "innodb_spin_wait_delay": "0",
    # Persistent statistics recomputed in the background 10 s after a tenth of a
    # table changed: under valgrind that falls at other statements than in the run and
    # in another replay, and the optimizer's plans follow the statistics. Without it
    # they are those of CREATE TABLE and of the benchmarks' own ANALYZE TABLE (the
    # post-write cleanup), as PostgreSQL's with autovacuum off (QUIET_POSTGRES).
    "innodb_stats_auto_recalc": "OFF",
    # Adaptive flushing writes dirty pages back at a per-second rate once the redo
    # log is a tenth full: under valgrind those seconds fall at other statements, and a
    # page written back is clean again for the next statement that changes it. Off,
    # flushing follows the redo log's fill and the dirty pages' share, which the
    # statements themselves advance.
    "innodb_adaptive_flushing": "OFF",
}

# The statement dispatcher every MySQL-family server runs a client's command through
# (MySQL 5.x-9.x, MariaDB 10.x-11.x, Percona, FB MySQL): do_command() reads a command
# from the connection and calls dispatch_command(), which parses and executes it. A
# thread that ran one of them served a connection: explain/threads.py tells a counted
# window's connection threads from the server's background threads by them.
CONNECTION_FUNCTIONS = frozenset({"do_command", "dispatch_command"})


class MysqlEngine(ServerEngine):
    """One MySQL-family server in `options.workdir` (data/, socket/, tmp/, my.cnf)."""

    CONFIG_ERRORS = CONFIG_ERRORS
    STOP_SIGNAL = signal.SIGTERM  # mysqld's clean shutdown (InnoDB fast shutdown, then exit)
    COUNTING_SETTINGS = QUIET_MYSQL

    def __init__(self, build: Build, options: EngineOptions) -> None:
        super().__init__(build, options)
        parsed = family.parse_version_output(build.version_string)
        if parsed is None:
            raise EngineError(
                f"{build.spec}: {build.version_string!r} is not a MySQL-family version line"
            )
        self.server: ServerVersion = parsed
        binary = family.server_binary(build.basedir)
        if binary is None:
            raise EngineError(f"{build.spec}: no mysqld or mariadbd under {build.basedir}")
        self.binary = binary

    @property
    def socket_path(self) -> Path:
        return self.options.workdir / "socket" / "mysqld.sock"

    @property
    def config_path(self) -> Path:
        return self.options.workdir / "my.cnf"

    # -- settings -----------------------------------------------------------------------

    def read_pattern(self) -> ReadPattern:
        """An InnoDB page per read (innodb_page_size, 16 KiB unless set), with O_DIRECT
        when innodb_flush_method says so."""
        settings = self.settings_applied()
        page = settings.get("innodb_page_size", "16k").strip().lower()
        size = int(page[:-1]) * 1024 if page.endswith("k") else int(page)
        direct = "o_direct" in settings.get("innodb_flush_method", "").lower()
        return ReadPattern(size, direct, "InnoDB's innodb_page_size")

    def settings_applied(self) -> dict[str, str]:
        """Paths and socket, then the version's lines, the profile, the lab's overrides."""
        if self._settings is None:
            profile = configs.render(
                "mysql", self.options.config_name, self.options.sizes, self.options.settings
            )
            settings = {
                **self._base_settings(),
                **mysql_configs.version_settings(self.server, self.options.sizes),
            }
            settings.update(mysql_configs.canonical(profile))
            if mysql_configs.uses_rocksdb(settings):
                settings.update(self._rocksdb_settings())
            self._settings = settings
        return dict(self._settings)

    def _base_settings(self) -> dict[str, str]:
        workdir = self.options.workdir
        settings = {
            "basedir": str(self.build.basedir),
            "datadir": str(self.data_dir),
            "socket": str(self.socket_path),
            "pid_file": str(workdir / "mysqld.pid"),
            "skip_networking": "",
            # The clients come through the socket, never TLS. MariaDB 11.4+ otherwise makes
            # itself a certificate at every start: 3-13 s of key generation measured here.
            # (`loose_`: a MySQL that has dropped the option skips it.)
            "loose_skip_ssl": "",
            "tmpdir": str(workdir / "tmp"),
            "secure_file_priv": str(workdir / "tmp"),
        }
        for share in (self.build.basedir / "share" / "mysql", self.build.basedir / "share"):
            if (share / "english" / "errmsg.sys").is_file():
                settings["lc_messages_dir"] = str(share)
                break
        return settings

    def _rocksdb_settings(self) -> dict[str, str]:
        """Load MyRocks if the build has it as a plugin; ConfigRejected if it has none."""
        if "--rocksdb" in self._help_text():
            return {}  # compiled in (FB MySQL)
        for name in PLUGIN_DIRS:
            plugin_dir = self.build.basedir / name
            if (plugin_dir / ROCKSDB_PLUGIN).is_file():
                return {"plugin_dir": str(plugin_dir), "plugin_load_add": ROCKSDB_PLUGIN}
        raise ConfigRejected(
            f"{self.build.spec} has no MyRocks, which config profile "
            f"{self.options.config_name!r} needs: no rocksdb options in `{self.binary.name} "
            f"--verbose --help` and no {ROCKSDB_PLUGIN} in {', '.join(PLUGIN_DIRS)} under "
            f"{self.build.basedir} (for mariadb@system: `apt-get install mariadb-plugin-rocksdb`)"
        )

    def _help_text(self) -> str:
        try:
            done = subprocess.run(
                [str(self.binary), "--no-defaults", "--verbose", "--help"],
                env=family.build_env(self.build.basedir),
                capture_output=True,
                text=True,
                timeout=120,
                check=False,
                **process.as_server_user(),
            )
        except (OSError, subprocess.TimeoutExpired) as e:
            raise EngineError(f"{self.build.spec}: cannot run {self.binary} --help: {e}") from e
        return str(done.stdout)

    def _output_since_start(self) -> str:
        """The server's output since this start, without its warnings of the `loose_`
        options it skipped (QUIET_MYSQL has one that older versions lack):
        a failed start is then not blamed on them."""
        lines = super()._output_since_start().splitlines()
        return "\n".join(x for x in lines if not any(m in x.lower() for m in LOOSE_SKIPPED))

    def _write_config(self) -> None:
        lines = ["# written by dbregress", f"# profile {self.options.config_name!r}", "[mysqld]"]
        for key, value in self.settings_applied().items():
            lines.append(f"{key} = {value}" if value != "" else key)
        self.config_path.write_text("\n".join(lines) + "\n")
        process.chown_to_server(self.config_path)

    # -- start --------------------------------------------------------------------------

    def start(self) -> None:
        if self._proc is not None:
            raise EngineError(f"{self.build.spec}: start() called twice")
        self.settings_applied()  # an unknown profile fails before anything is created
        if len(str(self.socket_path).encode()) > MAX_SOCKET_PATH:
            raise EngineError(
                f"{self.build.spec}: the socket path {self.socket_path} is longer than "
                f"{MAX_SOCKET_PATH} bytes; use a shorter workdir"
            )
        family.check_libraries(self.binary, self.build.basedir)
        process.prepare_workdir(
            self.options.workdir,
            [self.socket_path.parent, self.options.workdir / "tmp"],
            str(self.build.spec),
            self.binary.parent,
        )
        self.options.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = open(self.options.log_path, "ab")  # noqa: SIM115 (closed by stop)
        self._log_offset = self.options.log_path.stat().st_size
        try:
            self._write_config()
            self._create_system_tables()
            self._spawn()
            self._wait_ready(self._greets)
        except BaseException:
            self.stop()
            raise

    def _popen(self, args: list[str]) -> subprocess.Popen[bytes]:
        assert self._log is not None
        self._log.flush()
        return process.spawn(
            args,
            log=self._log,
            cwd=self.options.workdir,
            env=family.build_env(self.build.basedir),
            cpus=self.options.cpus,
        )

    def _install_command(self) -> list[str]:
        """How this version creates its system tables, with root@localhost passwordless."""
        defaults = f"--defaults-file={self.config_path}"
        if not self.server.is_mariadb and self.server.at_least(5, 7, 6):
            init = self.options.workdir / "init.sql"
            init.write_text("CREATE DATABASE IF NOT EXISTS test;\n")  # as MariaDB has
            return [str(self.binary), defaults, "--initialize-insecure", f"--init-file={init}"]
        script = family.install_script(self.build.basedir)
        if script is None:
            raise EngineError(
                f"{self.build.spec}: no mariadb-install-db or mysql_install_db under "
                f"{self.build.basedir} (scripts/ or bin/) to create the system tables"
            )
        args = [str(script), defaults, f"--basedir={self.build.basedir}"]
        args += [f"--datadir={self.data_dir}", "--force"]  # --force: no DNS lookups
        if "auth-root-authentication-method" in script.read_text(errors="replace"):
            args.append("--auth-root-authentication-method=normal")  # 10.4+: no unix_socket
        return args

    def _create_system_tables(self) -> None:
        proc = self._popen(self._install_command())
        timeout_s = max(self.options.start_timeout_s, INSTALL_TIMEOUT_S)
        try:
            status = proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            process.kill_tree(proc)
            raise EngineError(
                f"{self.build.spec}: creating the system tables did not finish in "
                f"{timeout_s} s; log {self.options.log_path}:\n{self.log_tail()}"
            ) from None
        except BaseException:  # Ctrl-C: leave no bootstrap server behind
            process.kill_tree(proc)
            raise
        if status != 0:
            raise self._start_failure(status, "creating the system tables")

    def _spawn(self) -> None:
        # --defaults-file must be the server's first argument (after options.wrapper)
        server = [str(self.binary), f"--defaults-file={self.config_path}"]
        self._launch(server)

    def _greets(self) -> bool:
        """The socket accepts a connection and sends a protocol-10 greeting."""
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(2.0)
            try:
                sock.connect(str(self.socket_path))
                head = b""
                while len(head) < 5 and (chunk := sock.recv(5 - len(head))):
                    head += chunk
            except OSError:
                return False
        return len(head) == 5 and head[4] == PROTOCOL_VERSION

    # -- running ------------------------------------------------------------------------

    def connection(self) -> EngineSpec:
        settings = self.settings_applied()
        engine = settings.get("default_storage_engine", "InnoDB")
        return {
            "driver": "mysql",
            "socket": settings["socket"],
            "user": "root",
            "database": "test",
            "storage_engine": "RocksDB" if engine.lower() == "rocksdb" else "InnoDB",
        }
