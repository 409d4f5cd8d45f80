"""Following one loadgen step through its event stream (schema/events.schema.json) to
its summary: the handshake answered at each boundary, the engine watched, the step's
deadline kept. What a caller does at each event (read counters, switch a profiler on,
update a progress line) is a `Handler`; a run's steps and explain's replays
(explain/stepper.py) follow their steps through this one loop, from step_loadgen.run_loadgen.
"""

from __future__ import annotations

import time
from typing import cast

from dbregress.engines.base import Engine
from dbregress.loadgen.client import BINARY, EVENT_VERSION, Loadgen
from dbregress.model.errors import LoadgenError, StepTimeout
from dbregress.shapes.events import Event, Summary

CHECK_EVERY_S = 1.0  # how often the engine is checked while its step runs


class Handler:
    """What happens at each event; by default nothing. The loop answers the handshake
    itself after the handler returns: `go` after ready, the edge after window, `run`
    after a slice that is not the last, `check` after stopped."""

    def ready(self, event: Event) -> None:
        """Every client is set up; nothing timed has run. The event's `server_pids` name
        the server processes serving the sessions, where the engine has them."""

    def measuring(self, event: Event) -> None:
        """The measured window begins (after the warm-up)."""

    def window(self, event: Event) -> None:
        """An edge of the profiler's window; no Q call is in flight."""

    def slice(self, event: Event) -> None:
        """A slice of an interleaved step ended (or, n = 0, the step is ready for its
        first): no call is in flight. Returns when this side may run its next slice."""

    def interval(self, event: Event, since_start_s: float) -> None:
        """A per-interval report, `since_start_s` after the loadgen was started."""

    def error(self, event: Event) -> None:
        """An ignorable error the loadgen counted."""

    def stopped(self, event: Event) -> None:
        """The last timed operation has ended; the checks have not run."""


def follow(
    loadgen: Loadgen,
    engine: Engine,
    step: str,
    timeout_s: float,
    handler: Handler,
    t0: float | None = None,
) -> Summary:
    """The step's summary event. Raises StepTimeout past `timeout_s` (from `t0`, the
    loadgen's start), LoadgenError when the loadgen fails or exits without a summary,
    and the engine's own error first when the engine died (the likelier cause)."""
    t0 = time.monotonic() if t0 is None else t0
    checked = t0
    for event in loadgen.events():
        now = time.monotonic()
        if now - checked >= CHECK_EVERY_S:  # a killed postmaster can leave backends serving
            engine.check_alive()
            checked = now
        if now - t0 > timeout_s:
            raise StepTimeout(
                f"step {step} still running after {timeout_s:.0f} s (a hang?); "
                f"server log tail:\n{engine.log_tail(20)}"
            )
        if event is None:
            continue
        # the loadgen's JSON lines, checked by its own schema: typed here, where they enter
        if event["type"] == "summary":
            return cast(Summary, event)
        _answer(cast(Event, event), loadgen, engine, step, handler, now - t0)
    loadgen.release(timeout_s=10)
    blame_engine_first(engine)
    tail = loadgen.stderr_tail()
    raise LoadgenError(
        f"step {step}: {BINARY} {loadgen.exit_description()} before the step finished"
        + (f"; its last words:\n{tail}" if tail else "")
    )


def _answer(
    event: Event,
    loadgen: Loadgen,
    engine: Engine,
    step: str,
    handler: Handler,
    since_start_s: float,
) -> None:
    """One event before the summary: the handler told, then the loadgen answered where
    the handshake waits. A fatal event or an unknown one raises LoadgenError."""
    kind: str = event["type"]
    if kind == "start":
        if event["event_version"] != EVENT_VERSION:
            raise LoadgenError(
                f"{BINARY} speaks event version {event['event_version']}, this "
                f"dbregress reads {EVENT_VERSION}: rebuild it with `make build`"
            )
    elif kind == "ready":
        handler.ready(event)
        loadgen.go()
    elif kind == "measuring":
        handler.measuring(event)
    elif kind == "window":
        handler.window(event)
        loadgen.answer(event["edge"])
    elif kind == "slice":
        handler.slice(event)
        if not event.get("last"):
            loadgen.answer("run")
    elif kind == "interval":
        handler.interval(event, since_start_s)
    elif kind == "error":
        handler.error(event)
    elif kind == "stopped":
        handler.stopped(event)
        loadgen.check()
    elif kind == "fatal":
        loadgen.release(timeout_s=10)
        blame_engine_first(engine)
        raise LoadgenError(f"step {step}: {event['message']}")
    else:
        raise LoadgenError(f"{BINARY} printed an unknown event {kind!r}: run `make build`")


def blame_engine_first(engine: Engine, grace_s: float = 2.0) -> None:
    """Raises the engine's error (EngineCrashed) if the server died: a dead server is
    the cause of a failed loadgen. Waits a moment, because clients see a killed
    server's sockets close before the kernel has finished tearing the process down."""
    deadline = time.monotonic() + grace_s
    while True:
        engine.check_alive()
        if time.monotonic() >= deadline:
            return
        time.sleep(0.1)
