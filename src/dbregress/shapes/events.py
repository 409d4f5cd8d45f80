"""The loadgen's event stream (schema/events.schema.json): one JSON object per line on
its stdout, tagged by `type`. `Event` is any of them, flattened (see shapes/__init__)."""

from __future__ import annotations

from typing import Literal, NotRequired, TypedDict


class ProcessUsage(TypedDict):
    """The loadgen process's own CPU and context switches, cumulative."""

    user_s: float
    system_s: float
    voluntary_cs: int
    involuntary_cs: int


class LoadgenPhase(TypedDict):
    wall_s: float
    process: ProcessUsage


class IntervalOps(TypedDict):
    ops: int
    rows: int
    max_us: int
    errors: int


class LatencyUs(TypedDict):
    p50: int
    p99: int
    p999: int
    p9999: int
    max: int
    mean: float


class SeriesRow(TypedDict):
    """One operation kind's figures in one interval event: a row of the step's series
    (steps/NN-<step>.csv)."""

    t_s: float
    op: str
    ops: int
    rows: int
    max_us: int
    errors: int


class OpSummary(TypedDict):
    ops: int
    rows: int
    errors: int
    target_rows_per_s: float | None
    latency_us: LatencyUs
    histogram: str


class Checks(TypedDict):
    rows_expected: int | None
    rows_found: int | None
    point_rows_expected: int
    point_rows_found: int


class EngineStats(TypedDict):
    write_amp: float | None
    stall_pct: float | None
    lsm_bytes: int | None
    statistics: dict[str, float]


class LoadgenPhases(TypedDict):
    setup: LoadgenPhase
    warmup: LoadgenPhase
    measured: LoadgenPhase
    checks: LoadgenPhase


class Summary(TypedDict):
    """The last event of a step that ended: its measured window in full."""

    type: Literal["summary"]
    elapsed_s: float
    q_op: str
    q_unit: NotRequired[Literal["rows", "ops"]]
    ops: dict[str, OpSummary]
    checks: Checks
    process: ProcessUsage
    engine_stats: NotRequired[EngineStats]
    window_engine_stats: NotRequired[EngineStats]
    window_skip_ops: NotRequired[int]
    phases: LoadgenPhases


# Any event: `type` says which, and which of the other keys it carries (start, ready,
# interval, measuring, error, window, slice, stopped, summary, fatal). The functional
# form because an error event has a key named `class`.
Event = TypedDict(
    "Event",
    {
        "type": str,
        # start
        "event_version": NotRequired[int],
        "loadgen_version": NotRequired[str],
        "driver": NotRequired[str],
        "step": NotRequired[str],
        "clients": NotRequired[int],
        "pid": NotRequired[int],
        "capabilities": NotRequired[list[str]],
        # ready
        "server_pids": NotRequired[list[int]],
        # every timed event
        "t_s": NotRequired[float],
        "process": NotRequired[ProcessUsage],
        # interval: IntervalOps per op kind
        "ops": NotRequired[dict[str, IntervalOps]],
        # error (class: ignorable or fatal), fatal
        "op": NotRequired[str],
        "class": NotRequired[Literal["ignorable", "fatal"]],
        "message": NotRequired[str],
        # window
        "edge": NotRequired[Literal["warm", "open", "close"]],
        "rows": NotRequired[int],
        # slice
        "n": NotRequired[int],
        "slice_s": NotRequired[float],
        "q": NotRequired[int],
        "q_all": NotRequired[int],
        "last": NotRequired[bool],
        # stopped
        "elapsed_s": NotRequired[float],
    },
)
