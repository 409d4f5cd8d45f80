"""One step, measured over exactly its timed window.

The loadgen reports each boundary of the step (schema/events.schema.json) and, with
the handshake, waits at two of them: after `ready` (set up, nothing timed yet) until
`go`, and after `stopped` (the last timed operation ended) until `check`. The counters
are read at those boundaries (collect/window.py), so connecting, preparing, creating
tables and the end-of-step checks are not charged to the step's operations. The
server's counters are read once more after the summary, while the loadgen still holds
its connections, so backends that exit at disconnect are counted whole.

The figures computed from the summary are in step_figures.py, the loadgen run this
follows in step_loadgen.py, the sides of an interleaved step in step_interleaved.py.
"""

from __future__ import annotations

import dataclasses
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from dbregress.benchmarks.plan import StepPlan
from dbregress.collect import diskstats, pmu, window
from dbregress.collect.hostcpu import cpu_clock
from dbregress.collect.perfctl import PerfError
from dbregress.collect.proc import tree_pids
from dbregress.engines.base import Engine
from dbregress.engines.process import freeze_tree, thaw
from dbregress.execution.step_figures import counter_metrics, q_count, step_result
from dbregress.execution.step_loadgen import StepHandler, run_loadgen
from dbregress.lab.file import Placement
from dbregress.loadgen.client import Loadgen
from dbregress.shapes import step_result as shapes
from dbregress.shapes.events import Event, ProcessUsage, SeriesRow, Summary
from dbregress.shapes.spec import StepSpec

MAX_ERROR_MESSAGES = 20
# The live display's QPS: the first of these an interval counts is the step's main
# operation (the loadgen names its Q operation only in the summary). Reads come before
# the paced writers that run beside them, a level's compaction before its flush.
LIVE_OPS = (
    "point_query",
    "range_query",
    "get",
    "seek_next",
    "seek_prev",
    "query",
    "update",
    "transaction",
    "insert",
    "create_index",
    "compact",
    "put",
    "delete",
    "flush",
    "cleanup",
)
ROW_OPS = ("insert", "delete", "create_index")  # counted in rows, the others in operations


@dataclass(frozen=True)
class LiveRate:
    """The rate of a step's main operation over the latest report interval."""

    op: str
    unit: str  # rows or ops
    per_s: float


# What a running step tells the lab: (seconds since it started, seconds left or None when
# unknown, the latest interval's rate or None before the first interval and while idle).
Report = Callable[[float, float | None, LiveRate | None], None]


@dataclass
class StepOutcome:
    result: shapes.StepResultJson
    series: list[SeriesRow] = field(default_factory=list)
    hlog: str = ""


@dataclass
class _Stream:
    """What the event stream said, and the counters read at its boundaries."""

    warmup_s: float  # as asked; a fixed-work step ignores it
    cpus: set[int]  # where the server and the loadgen may run: the host noise that matters
    series: list[SeriesRow] = field(default_factory=list)
    errors: list[Event] = field(default_factory=list)
    summary: Summary | None = None
    rows_done: int = 0
    marks: dict[str, window.Mark] = field(default_factory=dict)
    clock: shapes.Clock | None = None  # the CPUs' governor and MHz, read in the window
    counted: shapes.Counters | None = None  # perf stat over the window (collect/pmu.py)
    slices: list[list[float]] = field(default_factory=list)  # interleaved: [t_s, s, q, q_all]
    device: diskstats.Device = field(default_factory=lambda: diskstats.Device(None, "not read"))


def collect_step(
    engine: Engine,
    spec: StepSpec,
    stem: Path,
    plan: StepPlan,
    timeout_s: float,
    placement: Placement,
    report: Report,
    turns: Turns | None = None,
    side: int = 0,
    started: Callable[[Loadgen], None] | None = None,
) -> StepOutcome:
    """One step on one engine. With `turns` (an interleaved step, whose spec has
    `slices`), this engine is side `side` of the turns: it runs a slice only when its
    turn comes. `started` is told the loadgen once it runs (to stop it from elsewhere)."""
    started_at = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    # An embedded engine runs inside the loadgen: its process is the one measured.
    server_pid = None if engine.embedded else engine.server_pid()
    stream = _Stream(float(spec.get("warmup_s", 0)), _cpus(placement))
    stream.device = _device(engine, turns)
    stream.marks["spawn"] = window.take_mark(server_pid, None, cpus=stream.cpus)

    def follower(loadgen: Loadgen) -> _Follower:
        handler = _Follower(loadgen, plan, stream, server_pid, report, _Counters())
        handler.turns, handler.side = turns, side
        return handler

    run = run_loadgen(
        engine, spec, stem, plan.name, timeout_s, placement.client_cpus, follower, started=started
    )
    summary, t0 = run.summary, run.t0
    result = _result(plan, stream, summary)
    result["device"] = window.device_window(
        stream.marks["measuring"], stream.marks["stopped"], stream.device, int(spec["clients"])
    )
    result["started_at"] = started_at
    result["wall_s"] = round(time.monotonic() - t0, 3)
    result["db_size_bytes"] = engine.data_size_bytes()
    result["placement"] = placement.to_json()
    result["inject_slowdown"] = float(spec.get("inject_slowdown", 0))
    result["error_samples"] = stream.errors
    if turns is not None:
        result["slices"] = stream.slices
    return StepOutcome(result, stream.series, _hlog(summary))


def _device(engine: Engine, turns: Turns | None) -> diskstats.Device:
    """The block device of the engine's data, whose reads the step counts; none for an
    interleaved step, whose sides read the same device in each other's windows."""
    if turns is not None:
        return diskstats.Device(None, "interleaved: the other sides read the same device")
    return diskstats.find_device(engine.options.workdir)


def _cpus(placement: Placement) -> set[int]:
    """The CPUs the server and the loadgen may run on; unpinned, they inherit ours."""
    ours = os.sched_getaffinity(0)
    return set(placement.server_cpus or ours) | set(placement.client_cpus or ours)


def _result(plan: StepPlan, stream: _Stream, summary: Summary) -> shapes.StepResultJson:
    """The StepResult: per-operation figures over the measured window, plus the phases
    around it and the host's noise during it."""
    marks = stream.marks
    start, end = marks["measuring"], marks["stopped"]
    server, client = window.window_usage(start, end)
    result = step_result(plan, summary, server, client)
    count = q_count(summary)
    result["phases"] = window.phases(marks, summary["phases"])
    result["window"] = {
        "warmup_s": summary["phases"]["warmup"]["wall_s"],
        "measured_s": summary["elapsed_s"],
    }
    clock = stream.clock or cpu_clock(stream.cpus)
    result["host"] = {**window.host(start, end, server, client), **clock}
    if stream.counted is not None:
        result["counters"] = stream.counted
        result["per_op"] |= counter_metrics(stream.counted, count)
    return result


class _Counters:
    """perf stat over the measured window, where the host can count (collect/pmu.py):
    attached at `ready` to the server's process tree and to the loadgen, with its events
    off, on at `measuring`, off at `stopped`. perf failing to attach or answer costs the
    step its counts, never the step: the reason is kept in the result's `counters.note`."""

    def __init__(self) -> None:
        self.found = pmu.detect()
        self.counters: dict[str, pmu.Counter] = {}
        self.note: str | None = None

    def attach(self, server_pid: int | None, loadgen_pid: int) -> None:
        if not self.found.available:
            return
        # An embedded engine runs in the loadgen: the loadgen is the server counted.
        targets = {"server": [loadgen_pid]}
        if server_pid is not None:
            targets = {"server": tree_pids(server_pid), "client": [loadgen_pid]}
        try:
            for side, pids in targets.items():
                counter = pmu.Counter(pids, self.found.events)
                self.counters[side] = counter
                counter.start()
        except PerfError as e:
            self._give_up(e)

    def switch(self, on: bool) -> None:
        try:
            for counter in self.counters.values():
                counter.enable() if on else counter.disable()
        except PerfError as e:
            self._give_up(e)

    def _give_up(self, e: PerfError) -> None:
        self.note = f"not counted: {e}"
        self.close()
        self.counters = {}

    def stop(self) -> shapes.Counters | None:
        """The counts per side, or None where the host cannot count."""
        if not self.found.available:
            return None
        counted: shapes.Counters = {"events": list(self.found.events), "note": self.note}
        for side, counter in self.counters.items():
            try:
                counts = counter.stop()
            except PerfError as e:
                counted["note"] = f"not counted: {e}"
                continue
            if side == "server":
                counted["server"] = counts
            else:
                counted["client"] = counts
        self.counters = {}
        return counted

    def close(self) -> None:
        for counter in self.counters.values():
            counter.close()


class _Follower(StepHandler):
    """Reads the counters at each boundary of the step, keeps its intervals and errors,
    and reports its progress."""

    def __init__(
        self,
        loadgen: Loadgen,
        plan: StepPlan,
        stream: _Stream,
        server_pid: int | None,
        report: Report,
        counters: _Counters,
    ) -> None:
        self.loadgen, self.plan, self.stream = loadgen, plan, stream
        self.server_pid, self.report, self.counters = server_pid, report, counters
        self.interval_end_s = 0.0  # t_s of the latest interval: the next one starts there
        self.turns: Turns | None = None
        self.side = 0

    def mark(self, name: str, process: ProcessUsage) -> None:
        stream = self.stream
        # The measured window ends at `stopped`: the host's counters are read first.
        stream.marks[name] = window.take_mark(
            self.server_pid,
            self.loadgen.pid,
            process,
            stream.cpus,
            host_first=name == "stopped",
            device=stream.device.name,
        )

    def ready(self, event: Event) -> None:
        self.mark("ready", event["process"])
        self.counters.attach(self.server_pid, self.loadgen.pid)

    def summarized(self, summary: Summary) -> None:
        self.stream.summary = summary
        self.mark("end", summary["process"])
        self.stream.counted = self.counters.stop()

    def ended(self) -> None:
        if self.turns is not None:
            self.turns.finish(self.side)  # the others go on without this side
        self.counters.close()

    def measuring(self, event: Event) -> None:
        self.counters.switch(on=True)
        if event["t_s"] > 0:
            self.mark("measuring", event["process"])
        else:  # no warm-up: the window began at go, right after the ready mark
            ready = self.stream.marks["ready"]
            self.stream.marks["measuring"] = dataclasses.replace(ready, process=event["process"])

    def interval(self, event: Event, since_start_s: float) -> None:
        _on_interval(event, self.stream)
        rate = live_rate(event, self.interval_end_s)
        self.interval_end_s = event["t_s"]
        self.report(since_start_s, self.remaining(event["t_s"]), rate)

    def slice(self, event: Event) -> None:
        if event["n"] > 0:
            figures = (event["t_s"], event["slice_s"], event["q"], event["q_all"])
            self.stream.slices.append([float(x) for x in figures])
        if self.turns is None:
            return
        if event.get("last"):
            self.turns.finish(self.side)
            return
        # While the others have their turns this engine is frozen whole (SIGSTOP): its
        # background work (checkpoints, purge, flushes, compactions) then runs in its own
        # turns only, instead of on the CPUs of the side whose turn it is.
        frozen = self.freeze()
        try:
            if event["n"] == 0:
                self.turns.wait(self.side)
            else:
                self.turns.pass_on(self.side)
        finally:
            thaw(frozen)

    def freeze(self) -> list[int]:
        """SIGSTOP the engine's processes (an embedded engine's: the loadgen's); the pids."""
        return freeze_tree(self.loadgen.pid if self.server_pid is None else self.server_pid)

    def error(self, event: Event) -> None:
        if len(self.stream.errors) < MAX_ERROR_MESSAGES:
            self.stream.errors.append(event)

    def stopped(self, event: Event) -> None:
        self.counters.switch(on=False)
        self.mark("stopped", event["process"])
        self.stream.clock = self.stream.clock or cpu_clock(self.stream.cpus)

    def remaining(self, t_s: float) -> float | None:
        """Seconds left, from the loadgen's clock (t_s counts from go)."""
        if self.plan.duration_s:
            return max(0.0, self.plan.duration_s + self.stream.warmup_s - t_s)
        rows = self.stream.rows_done
        if self.plan.work and rows:
            return max(0.0, (self.plan.work - rows) * t_s / rows)
        return None


def live_rate(event: Event, since_s: float) -> LiveRate | None:
    """The main operation's rate over an interval that began at `since_s` (loadgen
    seconds); None when the interval counts none of LIVE_OPS or has no length."""
    span = event["t_s"] - since_s
    ops = event["ops"]
    op = next((o for o in LIVE_OPS if o in ops), None)
    if op is None or span <= 0:
        return None
    if op in ROW_OPS:
        return LiveRate(op, "rows", ops[op]["rows"] / span)
    return LiveRate(op, "ops", ops[op]["ops"] / span)


def _on_interval(event: Event, stream: _Stream) -> None:
    for op, c in event["ops"].items():
        stream.series.append({"t_s": event["t_s"], "op": op, **c})
        if op in ("insert", "delete", "create_index"):
            stream.rows_done += c["rows"]
    if stream.clock is None and "measuring" in stream.marks:
        stream.clock = cpu_clock(stream.cpus)  # inside the window, while the CPUs work


def _hlog(summary: Summary) -> str:
    lines = ["#op,histogram (HdrHistogram V2 compressed, base64, microseconds)"]
    lines += [f"{op},{o['histogram']}" for op, o in summary["ops"].items()]
    return "\n".join(lines) + "\n"


class Turns:
    """Whose slice it is among the sides of an interleaved step: side after side in a
    fixed cycle, skipping sides whose step ended. A side's follower waits here between
    its slices, so exactly one side runs at a time."""

    def __init__(self, sides: int, first: int = 0) -> None:
        self._cv = threading.Condition()
        self._order = list(range(sides))
        self._live = set(self._order)
        self._turn = first % sides
        self.aborted = False

    def wait(self, side: int) -> None:
        """Until it is `side`'s turn (or it is the only side left, or all stop)."""
        with self._cv:
            while self._turn != side and side in self._live and not self.aborted:
                self._cv.wait(0.5)

    def pass_on(self, side: int) -> None:
        """`side` ended a slice: the next live side runs; returns at side's next turn."""
        with self._cv:
            self._advance(side)
            self._cv.notify_all()
        self.wait(side)

    def finish(self, side: int) -> None:
        """`side`'s step is over (done or failed): it takes no more turns."""
        with self._cv:
            self._live.discard(side)
            if self._turn == side:
                self._advance(side)
            self._cv.notify_all()

    def abort(self) -> None:
        with self._cv:
            self.aborted = True
            self._cv.notify_all()

    def _advance(self, side: int) -> None:
        n = len(self._order)
        for k in range(1, n + 1):
            nxt = self._order[(side + k) % n]
            if nxt in self._live:
                self._turn = nxt
                return
