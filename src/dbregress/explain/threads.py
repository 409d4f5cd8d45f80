"""The MySQL family under callgrind: one server process, a thread per connection.

A threaded server has no session pids to tell its sessions' work from its own (as
PostgreSQL's backends are told apart), so its counting replay runs with a callgrind file
per thread (`--separate-threads=yes`), and a window's files are split by what each
thread ran: split_connection_threads(), by the functions engines/mysql.py names
(CONNECTION_FUNCTIONS). The settings the server needs under valgrind and those that keep
InnoDB's timed background work from falling differently between replays are the
engine's too (QUIET_MYSQL there); ReadViewHold keeps purge off the window's own history.
"""

from __future__ import annotations

import os
import re
import select
import subprocess
import time
from pathlib import Path
from typing import IO

from dbregress.engines.mysql import CONNECTION_FUNCTIONS
from dbregress.explain import callgrind
from dbregress.model.errors import DbregressError
from dbregress.shapes.spec import EngineSpec

# callgrind's suffixes on a function's name: `'2` for a second (recursive or re-entered)
# instance, ` [clone .cold]` and the like for a part the compiler split off
_SUFFIXES = re.compile(r"(?:'\d+|\s+\[clone [^\]]*\])+$")


def function_name(function: str) -> str:
    """A callgrind function's bare name: no parameters, clone or recursion suffix."""
    return callgrind.short_name(_SUFFIXES.sub("", function))


def runs_statements(profile: callgrind.Profile) -> bool:
    """Whether the thread ran the statement dispatcher (CONNECTION_FUNCTIONS)."""
    return any(function_name(fn) in CONNECTION_FUNCTIONS for _, fn in profile.functions)


def split_connection_threads(
    profiles: dict[Path, callgrind.Profile],
) -> tuple[list[Path], list[Path]] | None:
    """A MySQL-family server's window, a callgrind file per thread, as (the connection
    threads: those that ran the statement dispatcher, do_command() or
    dispatch_command(), in the window; the rest: InnoDB's background threads (purge,
    page cleaner, the timer and I/O threads), the signal handler, the listener).
    None when that cannot be told: one file, or none that ran the dispatcher (a server
    without symbols, whose functions callgrind names by address only).

    Why it is sound: a client's statement reaches the server only through its
    connection's do_command(), which reads the command and hands it to
    dispatch_command(). The loadgen's clients connect before the window opens and no
    statement is in flight at its edges, so every statement of the window is read,
    dispatched and answered inside it by the thread serving its connection (a thread
    per connection, or a pool thread that took it: both run the dispatcher), and that
    thread's file names the dispatcher. No background thread runs it: InnoDB's purge,
    flushing, statistics and I/O work below the SQL layer, and what SQL it runs goes
    through InnoDB's internal parser. What a statement hands to another thread and
    does not do in its own (the purge of what it deleted, a page written back later, a
    redo fsync on a timer) is background work, as PostgreSQL's autovacuum and
    checkpointer are there. A thread that ran nothing in the window (an empty file)
    falls with the rest and adds nothing. A file is a valgrind thread slot, which a
    later thread may reuse; a connection thread is not created inside a window (its
    client connected before), so no slot holds a connection and a background thread
    of the same window.
    """
    mine = [f for f, p in profiles.items() if runs_statements(p)]
    if len(profiles) < 2 or not mine:
        return None
    return mine, [f for f in profiles if f not in mine]


# -- purge held off the window's own history ------------------------------------------

CLIENTS = ("mariadb", "mysql")  # the build's command-line client, newest name first
HOLD_TIMEOUT_S = 120.0  # a statement of the client's against a server under valgrind
HELD = "dbregress-read-view-held"
# the view is opened at once (not at the first read), then the client says so
OPEN = f"START TRANSACTION WITH CONSISTENT SNAPSHOT;\nSELECT '{HELD}';\n"


class HoldError(DbregressError):
    """The client holding a read view could not start it or did not answer."""


def client_binary(basedir: Path) -> Path | None:
    """The build's command-line client (bin/mariadb or bin/mysql), if it has one."""
    for name in CLIENTS:
        path = basedir / "bin" / name
        if path.is_file() and os.access(path, os.X_OK):
            return path
    return None


class ReadViewHold:
    """A read view held open by a client session of its own, from a counted step's
    `ready` (before its warm-up calls) to its window's close.

    InnoDB's purge cannot remove history that a read view may still need, so while the
    view is open purge leaves the window's own transactions alone; it catches up after
    the window, outside the counts. Without it, MariaDB 10.11's purge ran at points of
    the window that valgrind's timing decided (a wake-up per second, per batch of
    history), and each time it emptied a rollback segment it freed that segment's
    cached undo log, so the next transaction given the segment (128 transactions on,
    round robin) created a new undo log in its own thread instead of reusing one: 45 to
    100% of a write window's transactions did, and the connection threads' counts of
    insert, update-index and update-nonindex moved 9-11% between three replays of the
    same step. Held, they moved 0.1-0.4%.

    The session's own thread works before the warm-up calls (START TRANSACTION WITH
    CONSISTENT SNAPSHOT) and after the window (COMMIT), so it is none of the window's
    connection threads (unless the window opens at once, skip_ops 0, while it still
    finishes its statement: a sliver). The statements' work is what it is with purge
    behind them by the warm-up and the window, as in a run at full speed, where purge
    wakes once a second.
    """

    def __init__(
        self,
        client: Path,
        connection: EngineSpec,
        env: dict[str, str] | None = None,
        timeout_s: float = HOLD_TIMEOUT_S,
    ) -> None:
        self.args = [
            str(client),
            "--no-defaults",
            f"--socket={connection['socket']}",
            f"--user={connection.get('user', 'root')}",
            *no_tls(client, env),
            "--batch",
            "--unbuffered",
            "--skip-column-names",
            str(connection["database"]),
        ]
        self.env, self.timeout_s = env, timeout_s
        self._proc: subprocess.Popen[str] | None = None

    def start(self) -> None:
        """Open the session and its read view; returns once the view exists."""
        if self._proc is not None:
            raise HoldError("the read view is already held")
        try:
            self._proc = subprocess.Popen(
                self.args,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                env=self.env,
            )
        except OSError as e:
            raise HoldError(f"cannot run {self.args[0]}: {e}") from e
        assert self._proc.stdin is not None and self._proc.stdout is not None
        try:
            self._proc.stdin.write(OPEN)
            self._proc.stdin.flush()
            line = _read_line(self._proc.stdout, self.timeout_s)
        except (OSError, HoldError) as e:
            err = self._end()
            raise HoldError(f"{self.args[0]} did not open a read view: {e} {err}") from e
        if line.strip() != HELD:
            err = self._end()
            raise HoldError(f"{self.args[0]} did not open a read view: {line.strip()} {err}")

    def release(self) -> None:
        """Commit and close the session (purge then catches up); safe to call twice."""
        if self._proc is None:
            return
        try:
            assert self._proc.stdin is not None
            self._proc.stdin.write("COMMIT;\n")
            self._proc.stdin.flush()
        except OSError:
            pass  # the session is gone: its view went with it
        self._end()

    def _end(self) -> str:
        """Close stdin, wait for the client (killing it past the timeout), say its stderr."""
        proc, self._proc = self._proc, None
        if proc is None:
            return ""
        try:
            _, err = proc.communicate(timeout=self.timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            _, err = proc.communicate()
        return err.strip()


def no_tls(client: Path, env: dict[str, str] | None = None) -> list[str]:
    """The client's option for a session without TLS over the server's socket (the
    servers dbregress starts have none): MariaDB 11.4's client requires TLS by default
    and ended "SSL is required, but the server does not support it", so no replay of
    11.4 could hold its read view. `--skip-ssl` where the client has `--ssl` (MariaDB's,
    MySQL 5.x's), `--ssl-mode=DISABLED` where it has that instead (MySQL 8's)."""
    try:
        done = subprocess.run(
            [str(client), "--no-defaults", "--help"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
            env=env,
        )
    except (OSError, subprocess.TimeoutExpired):
        return []  # starting the session will say why the client cannot run
    options = {ln.split()[0] for ln in done.stdout.splitlines() if ln.startswith("  --")}
    if "--ssl" in options:
        return ["--skip-ssl"]
    if any(o.startswith("--ssl-mode") for o in options):
        return ["--ssl-mode=DISABLED"]
    return []


def _read_line(stream: IO[str], timeout_s: float) -> str:
    """A line from a pipe, or HoldError if none comes within `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise HoldError(f"no answer in {timeout_s:.0f} s")
        ready, _, _ = select.select([stream], [], [], left)
        if ready:
            line = stream.readline()
            if not line:
                raise HoldError("the client ended")
            return line
