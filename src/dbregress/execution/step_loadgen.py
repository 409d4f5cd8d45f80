"""One step's loadgen run, followed to its summary: the one driver of a loadgen run,
for a run's steps (step.py) and explain's alike. Apart from step.py because it knows
nothing of what a step measures: the handler made for the loadgen does that.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Generic, TypeVar

from dbregress.engines.base import Engine
from dbregress.execution.follow import Handler, follow
from dbregress.loadgen.client import Loadgen
from dbregress.shapes.events import Summary
from dbregress.shapes.spec import StepSpec
from dbregress.store.files import sibling

H = TypeVar("H", bound="StepHandler")


class StepHandler(Handler):
    """A Handler (follow.py) that run_loadgen also tells of the step's end: the summary
    while the loadgen still holds its connections, and the end however it came."""

    def summarized(self, summary: Summary) -> None:
        """The summary came; the loadgen still holds its connections (so a server's
        backends that exit at disconnect can still be read)."""

    def ended(self) -> None:
        """The step is over, done or failed: release what the handler holds."""


@dataclass(frozen=True)
class LoadgenRun(Generic[H]):
    summary: Summary
    handler: H  # the one made for the loadgen
    t0: float  # time.monotonic() at the step's start, which its deadline counts from


def run_loadgen(
    engine: Engine,
    spec: StepSpec,
    stem: Path,
    step: str,
    timeout_s: float,
    cpus: frozenset[int] | None,
    handler: Callable[[Loadgen], H],
    wrapper: tuple[str, ...] = (),
    started: Callable[[Loadgen], None] | None = None,
    t0: float | None = None,
) -> LoadgenRun[H]:
    """One step's loadgen (its spec and stderr beside `stem`, on `cpus`, under `wrapper`)
    followed to its summary with the handler made for it (follow.py), for a run's steps
    and explain's alike. The handler is told the summary before the loadgen is released,
    and its end in any case; the loadgen is killed on any error and always closed.
    `started` is told the loadgen at once (to stop it from elsewhere); `t0` is when the
    step's clock starts (by default: once the loadgen runs). LoadgenError, StepTimeout
    or the engine's crash."""
    stem.parent.mkdir(parents=True, exist_ok=True)
    loadgen = Loadgen(spec, sibling(stem, ".spec.json"), sibling(stem, ".stderr"), cpus, wrapper)
    if started is not None:
        started(loadgen)
    t0 = time.monotonic() if t0 is None else t0
    follower = handler(loadgen)
    try:
        summary = follow(loadgen, engine, step, timeout_s, follower, t0)
        follower.summarized(summary)
        loadgen.release()
    except BaseException:
        loadgen.kill()
        raise
    finally:
        follower.ended()
        loadgen.close()
    return LoadgenRun(summary, follower, t0)
