"""The profiling replay, `profile`: every step at full speed, `perf record` (and, on
a host with a PMU, perf stat's counters) over each chosen step's measured window, folded
into stacks per operation. Apart from counting.py: another profiler, another replay,
sharing only what jobs.py holds.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from dbregress.collect import pmu
from dbregress.collect.perfctl import PerfControl, PerfError
from dbregress.collect.proc import tree_pids
from dbregress.execution import prepare
from dbregress.explain import flame
from dbregress.explain.flame import FlameError
from dbregress.explain.jobs import Choice, ColumnJob, Notify, replay, replay_engine
from dbregress.explain.stepper import Hooks, Stepped, drive
from dbregress.loadgen.client import Loadgen
from dbregress.shapes.events import Event
from dbregress.shapes.explain import Profiled
from dbregress.shapes.spec import StepSpec

PERF_HZ = 499  # sampling frequency (not a multiple of common timer ticks)
# The builds have no frame pointers: perf copies 8 KiB of each sample's stack and
# unwinds it from the DWARF call-frame information (deep enough for these engines).
PERF_CALL_GRAPH = "dwarf,8192"


class PerfHooks(Hooks):
    """perf record over the measured window and, on a host with a PMU, perf stat's
    cycles and instructions too. perf attaches at `ready` (the loadgen idles, waiting
    for go) with its events disabled, and is switched on at `measuring` and off at
    `stopped` through its control FIFO (collect/perfctl.py): a window shorter than
    perf's own start is still sampled whole."""

    def __init__(self, targets: Callable[[Loadgen], list[int]], data: Path) -> None:
        self.targets, self.data = targets, data
        self.perf: PerfControl | None = None
        self.pmu: pmu.Counter | None = None
        self.counters: pmu.Counts = {}

    def ready(self, loadgen: Loadgen, event: Event) -> None:
        pids = self.targets(loadgen)
        args = ["record", "-q", "-e", "cpu-clock", "-F", str(PERF_HZ)]
        args += ["--call-graph", PERF_CALL_GRAPH, "-o", str(self.data)]
        self.perf = PerfControl(args, pids)
        found = pmu.detect()
        if found.available:
            self.pmu = pmu.Counter(pids, found.events)
        try:
            self.perf.start()
            if self.pmu is not None:
                self.pmu.start()
        except PerfError as e:
            raise FlameError(str(e)) from e

    def measuring(self, loadgen: Loadgen) -> None:
        if self.pmu is not None:
            self.pmu.enable()
        if self.perf is not None:
            self.perf.enable()

    def stopped(self, loadgen: Loadgen) -> None:
        if self.perf is not None:
            self.perf.disable()
        if self.pmu is not None:
            self.pmu.disable()
            self.counters = self.pmu.stop()
        self.close()

    def close(self) -> None:
        """Stop perf (it writes its data); safe to call twice."""
        for perf in (self.perf, self.pmu):
            if perf is not None:
                perf.close()


def profile(job: ColumnJob, notify: Notify) -> dict[str, Profiled]:
    """For each chosen step: the folded stacks of its measured window, in CPU
    nanoseconds per operation of Q ({step: {"folded": text, ...}})."""
    engine = replay_engine(job, "profile", ())
    found: dict[str, Profiled] = {}

    def targets(loadgen: Loadgen) -> list[int]:
        return [loadgen.pid] if job.embedded else tree_pids(engine.server_pid())

    def measure(choice: Choice, spec: StepSpec, stem: Path) -> Stepped:
        data = job.work / f"{choice.index:02d}-{choice.plan.name}.perf.data"
        hooks = PerfHooks(targets, data)
        plan = choice.plan
        timeout = prepare.step_timeout(job.lab, plan, spec)
        try:
            stepped = drive(engine, spec, stem, timeout, job.client_cpus, hooks)
        finally:
            hooks.close()
        summary = stepped.summary
        q = summary["ops"].get(summary["q_op"])
        count = q.get(summary.get("q_unit", "ops"), 0) if q is not None else 0
        folded = flame.collapse(data)
        data.unlink(missing_ok=True)
        cpu_ns = sum(n for _, n in flame.parse_folded(folded))
        found[plan.name] = {
            "folded": flame.per_op(folded, count),
            "samples": round(cpu_ns * PERF_HZ / 1e9),
            "cpu_s": cpu_ns / 1e9,
            "count": count,
            "elapsed_s": summary["elapsed_s"],
            "hz": PERF_HZ,
            "pmu_per_op": {k: v / count for k, v in hooks.counters.items() if v and count},
        }
        return stepped

    return stamp(found, replay(job, engine, "profile", measure, 1.0, notify))


def stamp(found: dict[str, Profiled], failed: dict[str, str]) -> dict[str, Profiled]:
    """Each profiled step with why the page cache could not be dropped before it, if it
    could not (it may have seen what the steps before it left cached): its own drop's
    failure only."""
    for step, why in failed.items():
        if step in found:
            found[step]["cache_not_dropped"] = why
    return found
