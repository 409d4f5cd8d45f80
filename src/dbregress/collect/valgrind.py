"""Running a program under callgrind with its instrumentation off, and switching it on,
zeroing, dumping and switching it off again from outside, through vgdb.

Every process starts uninstrumented (`--instr-atstart=no`: it runs several times slower,
not a hundred). A monitor command sent with vgdb is executed before vgdb returns, even
by a process blocked in a system call (vgdb wakes it with ptrace), so a command sent
while the loadgen waits at an edge of its window takes effect exactly there.

Two things make vgdb reach forked children (PostgreSQL's backends): `--trace-children=
yes`, without which a forked child never opens its FIFOs, and the same user name in the
FIFOs' names on both sides. Valgrind names them after $LOGNAME or $USER, which a server
that rewrites its process title clobbers in its children; so both the program and vgdb
run without those variables (the name is then `???` on both sides), and vgdb runs as
the program's user (as root it cannot open a FIFO the program then writes to).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from dbregress.collect.proc import ServerUser
from dbregress.model.errors import DbregressError

# A fixed simulated cache hierarchy, so figures compare across hosts (valgrind would
# otherwise copy the host's, which on virtual machines can be absurd: a 256 MB LL):
# 32 KiB 8-way L1s, an 8 MiB 16-way last level, 64-byte lines.
CACHES = ("--I1=32768,8,64", "--D1=32768,8,64", "--LL=8388608,16,64")
UNSET = ("USER", "LOGNAME", "HOST")
VGDB_TIMEOUT_S = 120.0
# How long vgdb waits for a process to poll for its command before it wakes the process
# with ptrace (vgdb's default, 100 ms). At a window's edge every target is blocked (the
# loadgen waits for its answer; the server's processes wait for it), so each command
# would wait the whole delay: four commands a step, on every process of the server.
VGDB_INVOKE_MS = 10


class ValgrindError(DbregressError):
    """valgrind or vgdb is missing, or vgdb could not reach a process."""


def require(who: str = "dbregress explain", fix: str = "") -> tuple[str, str]:
    """Paths of valgrind and vgdb; ValgrindError naming the package if missing."""
    valgrind, vgdb = shutil.which("valgrind"), shutil.which("vgdb")
    if not valgrind or not vgdb:
        raise ValgrindError(
            f"{who} needs valgrind (with vgdb): apt-get install valgrind "
            f"(make debian installs it){fix}"
        )
    return valgrind, vgdb


def version() -> str:
    out = subprocess.run(["valgrind", "--version"], capture_output=True, text=True, check=False)
    return out.stdout.strip()


@dataclass(frozen=True)
class Callgrind:
    """callgrind for one program and its children, writing into `out_dir`."""

    out_dir: Path
    server_user: ServerUser  # subprocess keyword arguments that run as the program's user
    # A file per thread (callgrind.out.PID[.N]-TID): for an engine embedded in the
    # loadgen, whose own background threads are then told from the client threads.
    separate_threads: bool = False

    @property
    def prefix(self) -> Path:
        return self.out_dir / "vgdb"

    def wrapper(self) -> list[str]:
        """The command prefix that runs a program under callgrind, instrumentation off."""
        valgrind, _ = require()
        return [
            "env",
            *(f"--unset={name}" for name in UNSET),
            valgrind,
            "--tool=callgrind",
            "--trace-children=yes",
            "--instr-atstart=no",
            "--cache-sim=yes",
            "--branch-sim=yes",
            "--collect-systime=yes",  # sysCount: system calls per operation
            *CACHES,
            f"--vgdb-prefix={self.prefix}",
            *(["--separate-threads=yes"] if self.separate_threads else []),
            f"--callgrind-out-file={self.out_dir}/callgrind.out.%p",
            f"--log-file={self.out_dir}/valgrind.%p.log",
        ]

    def control(self, pids: Iterable[int], command: str) -> list[int]:
        """Send a monitor command (`instrumentation on`, `zero`, `dump HINT`, ...) to
        every pid at once; returns the pids that took it. A pid without a FIFO (a
        process just forked, or gone) is skipped; any other failure raises."""
        _, vgdb = require()
        env = {k: v for k, v in os.environ.items() if k not in UNSET}

        def send(pid: int) -> tuple[int, int, str]:
            args = [
                vgdb,
                f"--max-invoke-ms={VGDB_INVOKE_MS}",
                f"--vgdb-prefix={self.prefix}",
                f"--pid={pid}",
                *command.split(),
            ]
            try:
                out = subprocess.run(
                    args,
                    env=env,
                    capture_output=True,
                    text=True,
                    timeout=VGDB_TIMEOUT_S,
                    check=False,
                    **self.server_user,
                )
            except subprocess.TimeoutExpired:
                return pid, -1, f"no answer in {VGDB_TIMEOUT_S:.0f} s"
            return pid, out.returncode, (out.stderr + out.stdout).strip()

        pids = sorted(set(pids))
        with ThreadPoolExecutor(max_workers=max(1, min(16, len(pids)))) as pool:
            results = list(pool.map(send, pids))
        took, failed = [], []
        for pid, code, text in results:
            if code == 0:
                took.append(pid)
            elif "no FIFO found" not in text and "invalid pid" not in text:
                failed.append(f"pid {pid}: {text.splitlines()[-1] if text else code}")
        if failed:
            raise ValgrindError(f"vgdb {command!r} failed: {'; '.join(failed)}")
        return took

    def prepare(self, owner: tuple[int, int] | None) -> None:
        """An empty output directory the program's user can write."""
        self.out_dir.mkdir(parents=True, exist_ok=True)
        if owner is not None:
            os.chown(self.out_dir, *owner)


# What valgrind writes into its log when the program ran an instruction it cannot
# decode (VEX's "unhandled instruction bytes", then SIGILL).
_UNHANDLED = "vex amd64->IR: unhandled instruction bytes:"
_SIGILL = "signal 4 (SIGILL)"


# What valgrind writes when it gives up on the program itself (its own "Valgrind:"
# lines, e.g. a debuginfo reader that cannot read clang 14's DWARF 5).
_GIVING_UP = "Giving up"


def _logs_saying(out: Path, marker: str) -> Iterator[str]:
    """The text of each valgrind log under `out` (valgrind.PID.log) that holds `marker`."""
    for log in sorted(out.rglob("valgrind.*.log")):
        try:
            text = log.read_text(errors="replace")
        except OSError:
            continue
        if marker in text:
            yield text


def gave_up(out: Path) -> str | None:
    """Why valgrind itself gave up on a program whose logs are under `out`, in one
    clause (its own "Valgrind:" lines, with the file they name), None when no log says
    so."""
    for text in _logs_saying(out, _GIVING_UP):
        said = [
            ln.split("Valgrind:", 1)[1].strip()
            for ln in text.splitlines()
            if "== Valgrind:" in ln and ln.split("Valgrind:", 1)[1].strip()
        ]
        return f"valgrind {version()} gave up: " + " ".join(said)
    return None


def sigill(out: Path) -> str | None:
    """Why a program run under valgrind with its logs under `out` (valgrind.PID.log)
    was killed by SIGILL, in one clause: the instruction's first bytes and where it
    was, saying AVX-512 when it is an EVEX instruction (first byte 0x62); None when no
    log says SIGILL."""
    for text in _logs_saying(out, _SIGILL):
        lines = text.splitlines()
        found = next((ln.split(_UNHANDLED, 1)[1].split() for ln in lines if _UNHANDLED in ln), [])
        where = next(
            (ln.split("at 0x", 1)[1].partition(": ")[2] for ln in lines if "   at 0x" in ln), ""
        )
        kind = "an AVX-512 (EVEX) instruction" if found[:1] == ["0x62"] else "an instruction"
        detail = f" (bytes {' '.join(found[:4])})" if found else ""
        at = f" in {where}" if where else ""
        return f"{kind}{detail}{at} that valgrind {version()} cannot run"
    return None
