"""An interleaved step: every side's engine runs the step at once, in turns (step.py's
Turns hands the turn round), one thread following each side's loadgen. Apart from
step.py, which measures one side's step; this runs the sides together and corrects
the host's noise each side saw for the others' CPU.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path

from dbregress.benchmarks.plan import StepPlan
from dbregress.engines.base import Engine
from dbregress.execution.step import Report, StepOutcome, Turns, collect_step
from dbregress.lab.file import Placement
from dbregress.loadgen.client import Loadgen
from dbregress.model.errors import LoadgenError
from dbregress.shapes import step_result as shapes
from dbregress.shapes.spec import StepSpec


@dataclass
class Side:
    """One engine's part of an interleaved step."""

    engine: Engine
    spec: StepSpec
    stem: Path
    report: Report


def collect_interleaved(
    sides: list[Side],
    plan: StepPlan,
    timeout_s: float,
    placement: Placement,
    first: int = 0,
) -> list[StepOutcome | Exception]:
    """One step on every side at once, in turns: each side's loadgen runs a slice, then
    waits while the others run theirs (the spec's `slices` says how long a slice is).
    Returns each side's outcome, or the error that ended its step; the other sides go on
    without a side that failed. Ctrl-C stops every side's loadgen and is raised."""
    turns = Turns(len(sides), first)
    out: list[StepOutcome | Exception | None] = [None] * len(sides)
    loadgens: list[Loadgen] = []
    lock = threading.Lock()

    def keep(loadgen: Loadgen) -> None:
        with lock:
            loadgens.append(loadgen)

    def run(i: int) -> None:
        side = sides[i]
        try:
            # The other sides' slices pass while this one waits: its deadline scales.
            out[i] = collect_step(
                side.engine,
                side.spec,
                side.stem,
                plan,
                timeout_s * len(sides),
                placement,
                side.report,
                turns,
                i,
                keep,
            )
        except Exception as e:  # this side's step failed; the others go on
            out[i] = e

    threads = [
        threading.Thread(target=run, args=(i,), name=f"side-{i}", daemon=True)
        for i in range(len(sides))
    ]
    for t in threads:
        t.start()
    try:
        for t in threads:
            while t.is_alive():
                t.join(0.2)
    except BaseException:
        turns.abort()
        with lock:
            for loadgen in loadgens:
                loadgen.kill()
        for t in threads:
            t.join(10)
        raise
    done = [o if o is not None else LoadgenError("the step did not run") for o in out]
    _others_are_ours([o for o in done if isinstance(o, StepOutcome)])
    return done


def _cpu_s(usage: shapes.UsageJson | None) -> float:
    return float(usage["user_s"] + usage["system_s"]) if usage else 0.0


def _others_are_ours(outcomes: list[StepOutcome]) -> None:
    """The sides of an interleaved step measured over the same minutes: the CPU that
    one side's host counters call "other processes" includes the other sides' engines
    and loadgens, which are not noise. Each side's other CPU is reduced by theirs."""
    own = [_cpu_s(o.result.get("server")) + _cpu_s(o.result.get("client")) for o in outcomes]
    total = sum(own)
    for outcome, mine in zip(outcomes, own, strict=True):
        host = outcome.result.get("host")
        if host is None or (before := host.get("other_cpu_s")) is None:
            continue
        host["other_cpu_s"] = other = max(0.0, before - (total - mine))
        window_s, cpus = host.get("window_s"), host.get("cpus")
        if host.get("other_cpu_frac") is not None and window_s and cpus:
            host["other_cpu_frac"] = other / (window_s * cpus)
