"""Ctrl-C and SIGTERM: the first stops the lab cleanly, a second one at once.

Once `install`ed (by `dbregress run` and `calibrate`), the first SIGINT or SIGTERM raises
KeyboardInterrupt where the lab is: the running step is recorded as interrupted, the
engine is stopped, run.json is written. Cleanup runs inside `shielded`, which a signal
cannot cut short (a server left running would outlive us): a first signal there is
raised when the block ends. Every signal after the first calls the `hurry` of the
running job instead of raising, which SIGKILLs its processes without waiting, so the
cleanup ends at once. Either way every finished step is on disk.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from types import FrameType

SIGNALS = (signal.SIGINT, signal.SIGTERM)


def _nothing() -> None:
    return None


@dataclass
class _State:
    installed: bool = False
    count: int = 0  # signals received
    shield: int = 0  # depth of shielded blocks
    pending: str | None = None  # a first signal deferred by a shield
    name: str | None = None  # the first signal's name
    settled: bool = False
    hurry: list[Callable[[], None]] = field(default_factory=lambda: [_nothing])


_state = _State()


def _handler(signum: int, frame: FrameType | None) -> None:
    _state.count += 1
    name = signal.Signals(signum).name
    _state.name = _state.name or name
    if _state.count == 1 and not _state.shield:
        raise KeyboardInterrupt(name)
    if _state.count == 1:
        _state.pending = name
    else:
        _state.hurry[-1]()  # only sends signals: the main thread may be waiting on them


def install() -> None:
    """Take over SIGINT and SIGTERM (main thread only; a no-op elsewhere)."""
    if threading.current_thread() is threading.main_thread():
        for s in SIGNALS:
            signal.signal(s, _handler)
        _state.installed = True
        _state.count = 0
        _state.pending = None
        _state.name = None
        _state.settled = False


@contextmanager
def hurrying(hurry: Callable[[], None]) -> Iterator[None]:
    """While the block runs, a second signal calls `hurry` (kill the job's processes)."""
    _state.hurry.append(hurry)
    try:
        yield
    finally:
        _state.hurry.pop()


def hurry_now() -> None:
    """Kill the running job's processes now (a fleet worker told to stop, or whose unit
    was cancelled): its step fails at once and the runner records it."""
    _state.hurry[-1]()


@contextmanager
def shielded() -> Iterator[None]:
    """Run a cleanup block to its end; a first signal during it is raised afterwards."""
    _state.shield += 1
    try:
        yield
    finally:
        _state.shield -= 1
    if _state.pending and not _state.shield:
        name, _state.pending = _state.pending, None
        raise KeyboardInterrupt(name)


def check() -> None:
    """Raise the first signal again if it was lost: Python prints and drops an exception
    raised while a finalizer (`__del__`, a weakref callback) runs, so a Ctrl-C landing
    there would let the lab go on (a bisection's run once ended "ok" and went on to count
    after its Ctrl-C). Called where the lab passes from one piece of work to the next;
    never inside a shielded block, and never after `settle`."""
    if _state.count and not _state.shield and _state.installed and not _state.settled:
        raise KeyboardInterrupt(_state.name or "SIGINT")


def settle() -> None:
    """The lab is over and only the exit is left: ignore further signals, so a late
    second Ctrl-C cannot turn a clean exit into death by signal while Python shuts down
    (it restores the default handlers it set, not ignored ones)."""
    _state.settled = True
    if _state.installed and threading.current_thread() is threading.main_thread():
        for s in SIGNALS:
            signal.signal(s, signal.SIG_IGN)
