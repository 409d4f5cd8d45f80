"""Spawns dbregress-loadgen with a step spec and reads its event stream (schema/)."""

from __future__ import annotations

import contextlib
import json
import os
import queue
import shutil
import signal
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any, Final

from dbregress.engines.process import die_with_parent
from dbregress.model.errors import LoadgenError
from dbregress.shapes.spec import StepSpec

SPEC_VERSION: Final = 3  # the only version the loadgen reads: workload tagged by kind
EVENT_VERSION = 2
BINARY = "dbregress-loadgen"
# Longest close() waits for the output reader to reach the end of a dead loadgen's pipe.
READER_JOIN_S = 5.0


def find_binary() -> Path:
    """$DBREGRESS_LOADGEN, else the workspace's release build, else PATH."""
    env = os.environ.get("DBREGRESS_LOADGEN")
    if env:
        return Path(env)
    here = Path(__file__).resolve()
    for parent in here.parents:
        candidate = parent / "target" / "release" / BINARY
        if candidate.is_file():
            return candidate
    found = shutil.which(BINARY)
    if found:
        return Path(found)
    raise LoadgenError(f"{BINARY} not found: run `make build` (or set DBREGRESS_LOADGEN)")


class Loadgen:
    """One loadgen process running one step, under the caller's control on its stdin.

    The spec asks for the handshake: the loadgen prints `ready` once set up and waits
    for `go()`; it prints `stopped` when its timed part ends and waits for `check()`
    before its end-of-step checks. So the caller reads the counters at exactly those
    boundaries. It also holds its connections open after the summary until stdin closes
    (`release()`), so the caller can read the server's counters while its backends live.
    """

    def __init__(
        self,
        spec: StepSpec,
        spec_path: Path,
        stderr_path: Path,
        cpus: frozenset[int] | None,
        wrapper: tuple[str, ...] = (),
    ) -> None:
        """`wrapper` is a command prefix the loadgen runs under (a profiler's); the
        process it starts must become the loadgen (exec), so `pid` stays the loadgen's."""
        spec = {
            **spec,
            "spec_version": SPEC_VERSION,
            "handshake": True,
            "wait_before_close": True,
        }
        spec_path.write_text(json.dumps(spec, indent=1) + "\n")
        self.stderr_path = stderr_path
        self._stderr = stderr_path.open("wb")
        self._lines: queue.Queue[str | None] = queue.Queue()

        def pin() -> None:
            die_with_parent()
            if cpus is not None:
                os.sched_setaffinity(0, cpus)

        try:
            self.proc = subprocess.Popen(
                [*wrapper, str(find_binary()), str(spec_path.resolve())],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=self._stderr,
                preexec_fn=pin,
                start_new_session=True,  # Ctrl-C reaches us only; we stop it in order
            )
        except OSError as e:
            self._stderr.close()
            raise LoadgenError(f"cannot start {BINARY}: {e}") from e
        assert self.proc.stdout is not None
        self._reader = threading.Thread(target=self._read, args=(self.proc.stdout,), daemon=True)
        self._reader.start()

    @property
    def pid(self) -> int:
        return self.proc.pid

    def _read(self, stream: IO[bytes]) -> None:
        try:
            for raw in stream:
                self._lines.put(raw.decode(errors="replace"))
        except (OSError, ValueError):  # closed under it (close() waits, but not forever)
            pass
        finally:
            self._lines.put(None)  # the end of the events, however the stream ended

    def events(self, poll_s: float = 0.5) -> Iterator[dict[str, Any] | None]:
        """Yields each event as it arrives, and None every poll_s without one, so the
        caller can check deadlines and the engine. Ends when stdout closes."""
        while True:
            try:
                line = self._lines.get(timeout=poll_s)
            except queue.Empty:
                yield None
                continue
            if line is None:
                return
            line = line.strip()
            if not line:
                continue
            try:
                event = json.loads(line)
            except json.JSONDecodeError:
                raise LoadgenError(
                    f"{BINARY} printed a line that is not JSON: {line[:200]!r}"
                ) from None
            if not isinstance(event, dict) or "type" not in event:
                raise LoadgenError(f"{BINARY} printed an event without a type: {line[:200]!r}")
            yield event

    def go(self) -> None:
        """Starts the step's clock (after `ready`)."""
        self._say("go")

    def check(self) -> None:
        """Lets the end-of-step checks run (after `stopped`)."""
        self._say("check")

    def answer(self, edge: str) -> None:
        """Lets the Q calls go on past an edge of a profiler's window (`open`, `close`)."""
        self._say(edge)

    def _say(self, line: str) -> None:
        # A loadgen that died cannot hear it; its event stream's end reports that.
        if self.proc.stdin and not self.proc.stdin.closed:
            with contextlib.suppress(BrokenPipeError):
                self.proc.stdin.write(line.encode() + b"\n")
                self.proc.stdin.flush()

    def release(self, timeout_s: float = 30.0) -> int:
        """Closes stdin (the loadgen then disconnects and exits) and waits for it."""
        if self.proc.stdin and not self.proc.stdin.closed:
            with contextlib.suppress(BrokenPipeError):
                self.proc.stdin.close()
        try:
            return self.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.kill()
            return self.proc.wait()

    def kill(self) -> None:
        """Ends the loadgen at once; safe to call any time, any number of times."""
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        self.close()

    def close(self) -> None:
        # The reader thread owns stdout until it ends: closed under it, a read would
        # raise in that thread. Once the loadgen is gone its pipe ends at once.
        if self.proc.poll() is not None:
            self._reader.join(timeout=READER_JOIN_S)
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream and not stream.closed:
                with contextlib.suppress(OSError):
                    stream.close()
        self._stderr.close()

    def exit_description(self) -> str:
        code = self.proc.poll()
        if code is None:
            return "still running"
        if code < 0:
            return f"killed by signal {signal.Signals(-code).name}"
        return f"exited with status {code}"

    def stderr_tail(self, lines: int = 10) -> str:
        try:
            text = self.stderr_path.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])
