"""One loadgen step driven through its handshake, with hooks at each boundary: where a
profiler is switched on, zeroed, read and switched off. Every step of an explain job
runs through here (those not explained with no hooks), so the data each step leaves
is what the run's steps left."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dbregress.engines.base import Engine
from dbregress.errors import LoadgenError, StepTimeout
from dbregress.loadgen import BINARY, EVENT_VERSION, Loadgen
from dbregress.store.files import sibling


class Hooks:
    """What happens at each boundary of a step; by default nothing."""

    def ready(self, loadgen: Loadgen, event: dict[str, Any]) -> None:
        """Every client is set up; nothing timed has run. The event's `server_pids` name
        the server processes serving the sessions, where the engine has them."""

    def measuring(self, loadgen: Loadgen) -> None:
        """The measured window begins (after the warm-up)."""

    def window(self, loadgen: Loadgen, event: dict[str, Any]) -> None:
        """An edge of the profiler's window; no Q call is in flight."""

    def stopped(self, loadgen: Loadgen) -> None:
        """The last timed operation has ended."""


@dataclass
class Stepped:
    summary: dict[str, Any]
    windows: list[dict[str, Any]] = field(default_factory=list)  # the window events
    wall_s: float = 0.0


def drive(
    engine: Engine,
    spec: dict[str, Any],
    stem: Path,
    timeout_s: float,
    cpus: frozenset[int] | None,
    hooks: Hooks | None = None,
    wrapper: tuple[str, ...] = (),
) -> Stepped:
    """Run one step to its summary; LoadgenError, StepTimeout or the engine's crash."""
    hooks = hooks or Hooks()
    stem.parent.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    loadgen = Loadgen(spec, sibling(stem, ".spec.json"), sibling(stem, ".stderr"), cpus, wrapper)
    windows: list[dict[str, Any]] = []
    try:
        checked = t0
        for event in loadgen.events():
            now = time.monotonic()
            if now - checked >= 1.0:
                engine.check_alive()
                checked = now
            if now - t0 > timeout_s:
                raise StepTimeout(
                    f"step {spec['step']} still running after {timeout_s:.0f} s (a hang?); "
                    f"server log tail:\n{engine.log_tail(20)}"
                )
            if event is None:
                continue
            kind = event["type"]
            if kind == "start" and event["event_version"] != EVENT_VERSION:
                raise LoadgenError(f"{BINARY} speaks another event version: run `make build`")
            if kind == "ready":
                hooks.ready(loadgen, event)
                loadgen.go()
            elif kind == "measuring":
                hooks.measuring(loadgen)
            elif kind == "window":
                windows.append(event)
                hooks.window(loadgen, event)
                loadgen.answer(event["edge"])
            elif kind == "stopped":
                hooks.stopped(loadgen)
                loadgen.check()
            elif kind == "fatal":
                loadgen.release(timeout_s=10)
                engine.check_alive()
                raise LoadgenError(f"step {spec['step']}: {event['message']}")
            elif kind == "summary":
                loadgen.release()
                return Stepped(event, windows, time.monotonic() - t0)
        loadgen.release(timeout_s=10)
        engine.check_alive()
        tail = loadgen.stderr_tail()
        raise LoadgenError(
            f"step {spec['step']}: {BINARY} {loadgen.exit_description()} before the step "
            "finished" + (f"; its last words:\n{tail}" if tail else "")
        )
    except BaseException:
        loadgen.kill()
        raise
    finally:
        loadgen.close()
