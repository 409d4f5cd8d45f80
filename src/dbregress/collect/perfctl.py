"""A perf command (`perf stat` or `perf record`) attached to running processes with its
events disabled, then switched on and off through its control FIFO, each command
acknowledged before it returns.

Attaching takes perf tens of milliseconds, longer than some measured windows; attached
early (at a step's `ready`, while the loadgen waits for go) and enabled at the window's
first edge, perf counts or samples the whole window and nothing outside it.
"""

from __future__ import annotations

import os
import select
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path

from dbregress.model.errors import DbregressError

ACK_TIMEOUT_S = 30.0


class PerfError(DbregressError):
    """perf did not start, attach or answer."""


class PerfControl:
    """`perf <args> -D -1 --control fifo:... -p PIDS`, with its FIFOs and its stderr in
    a private temporary folder that `close` removes."""

    def __init__(self, args: list[str], pids: Iterable[int]) -> None:
        self.args = args
        self.pids = ",".join(str(p) for p in pids)
        self.proc: subprocess.Popen[bytes] | None = None
        self._ctl = self._ack = -1
        self._dir: Path | None = None

    def start(self, timeout_s: float = ACK_TIMEOUT_S) -> None:
        """Starts perf and returns once it is attached and listening (events off)."""
        if not self.pids:
            raise PerfError("perf: no process to attach to")
        try:
            self._dir = Path(tempfile.mkdtemp(prefix="dbregress-perf-"))
            ctl, ack = self._dir / "ctl", self._dir / "ack"
            for fifo in (ctl, ack):
                os.mkfifo(fifo, 0o600)
            # O_RDWR: a FIFO opened so never blocks, whoever opens the other end when
            self._ctl, self._ack = os.open(ctl, os.O_RDWR), os.open(ack, os.O_RDWR)
            args = ["perf", *self.args, "-D", "-1", "--control", f"fifo:{ctl},{ack}"]
            with open(self._dir / "err", "wb") as err:
                self.proc = subprocess.Popen(
                    [*args, "-p", self.pids],
                    stdout=subprocess.DEVNULL,
                    stderr=err,
                    start_new_session=True,
                )
        except OSError as e:
            self.close()
            raise PerfError(f"perf {self.args[0]} could not start: {e}") from e
        self.command("disable", timeout_s)  # acknowledged once perf is attached

    def command(self, word: str, timeout_s: float = ACK_TIMEOUT_S) -> None:
        if self._ctl < 0:
            raise PerfError(f"perf {self.args[0]} is not running")
        os.write(self._ctl, word.encode() + b"\n")
        deadline = time.monotonic() + timeout_s
        while True:  # in slices, so a perf that exited (could not attach) is seen at once
            ready, _, _ = select.select([self._ack], [], [], 0.1)
            if ready and b"ack" in os.read(self._ack, 64):
                return
            exited = self.proc is not None and self.proc.poll() is not None
            if exited or time.monotonic() > deadline:
                tail = self._stderr()[-500:].strip()
                what = "exited" if exited else f"did not acknowledge {word!r} in {timeout_s:.0f} s"
                raise PerfError(f"perf {self.args[0]} {what}" + (f": {tail}" if tail else ""))

    def enable(self) -> None:
        self.command("enable")

    def disable(self) -> None:
        self.command("disable")

    def finish(self) -> str:
        """Stops perf (SIGINT: it writes its data or prints its counts) and returns
        what it printed on stderr."""
        self._stop()
        text = self._stderr()
        self.close()
        return text

    def close(self) -> None:
        """Stops perf, closes the FIFOs and removes the folder; safe to call twice, and
        after a failed start."""
        self._stop()
        for fd in (self._ctl, self._ack):
            if fd >= 0:
                os.close(fd)
        self._ctl = self._ack = -1
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None

    def _stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def _stderr(self) -> str:
        if self._dir is None:
            return ""
        try:
            return (self._dir / "err").read_text(errors="replace")
        except OSError:
            return ""
