"""A stored step result (schema/step-result.schema.json): results/<run>/<column>/
r<repeat>/steps/NN-<step>.json. `StepResultJson` flattens its three variants, a failed step
(`status` "failed", `error`), a measured one and an imported one (`imported`), as the
package docstring says."""

from __future__ import annotations

from typing import Literal, NotRequired, TypedDict

from dbregress.shapes.events import Checks, EngineStats, Event, LatencyUs
from dbregress.shapes.run import PlacementJson


class StepErrorJson(TypedDict):
    type: str
    message: str
    server_log_tail: str
    traceback: NotRequired[str]  # an error dbregress did not expect (a bug to report)
    bug: NotRequired[bool]  # True: a bug in dbregress (errors.is_bug): exit 3, not 2


class Q(TypedDict):
    """The step's Q: its primary operation, counted in rows or operations, per second."""

    op: str
    unit: Literal["rows", "ops", "relative"]
    count: NotRequired[int | None]
    value: float


class OpFigures(TypedDict):
    """One operation kind over the measured window."""

    ops: int
    rows: int
    errors: int
    target_rows_per_s: float | None
    latency_us: LatencyUs
    rows_per_s: float
    ops_per_s: float


class UsageJson(TypedDict):
    """A process tree's CPU, context switches and IO over the measured window."""

    user_s: float
    system_s: float
    ctx_switches: int
    read_bytes: int
    write_bytes: int
    # written by the runner (collect/proc.py UsageJson), absent from imported results
    wall_s: NotRequired[float]
    io_complete: NotRequired[bool]
    root_alive: NotRequired[bool]


class Sla(TypedDict):
    op: str
    target_rows_per_s: float
    achieved_rows_per_s: float
    ok: bool


class Phase(TypedDict):
    wall_s: float
    server_cpu_s: float | None
    client_cpu_s: float | None


class Phases(TypedDict):
    setup: Phase
    warmup: Phase
    checks: Phase


class WindowJson(TypedDict):
    warmup_s: float
    measured_s: float


class HostWindow(TypedDict):
    """What the CPUs did over the window, from /proc/stat (collect/hostcpu.py)."""

    window_s: float
    cpus: int | None
    steal_s: float | None
    busy_s: float | None
    other_cpu_s: float | None
    steal_frac: float | None
    other_cpu_frac: float | None
    harness_cpu_s: NotRequired[float]  # dbregress's own CPU, not counted as other (new)


class Clock(TypedDict):
    """The CPUs' frequency governor and MHz, read inside the window."""

    governor: str | None
    cpu_mhz: list[float] | None


class Host(HostWindow, Clock):
    pass


class DeviceJson(TypedDict):
    name: str | None
    note: str | None
    clients: int
    reads: int | None
    read_bytes: int | None
    read_ms: int | None


class Counters(TypedDict):
    """perf stat over the measured window, where the host can count."""

    events: list[str]
    note: str | None
    server: NotRequired[dict[str, float | None]]
    client: NotRequired[dict[str, float | None]]


class Paired(TypedDict):
    base: str
    ratio: float | None
    log_se: NotRequired[float | None]
    pairs: int
    batches: NotRequired[int]


class StepResultJson(TypedDict):
    schema_version: NotRequired[int]  # added where the result is stored
    kind: Literal["step"]
    column: NotRequired[str]  # added where the result is stored
    repeat: NotRequired[int]  # added where the result is stored
    step: str
    status: Literal["ok", "failed"]
    # failed
    error: NotRequired[StepErrorJson]
    # imported: what the files said
    imported: NotRequired[dict[str, object]]
    # measured (and, where the files said, imported)
    reported: NotRequired[bool]
    elapsed_s: NotRequired[float]
    wall_s: NotRequired[float]
    slices: NotRequired[list[list[float]]]
    paired: NotRequired[Paired]
    started_at: NotRequired[str]
    q: NotRequired[Q]
    ops: NotRequired[dict[str, OpFigures]]
    server: NotRequired[UsageJson]
    client: NotRequired[UsageJson | None]
    engine_stats: NotRequired[EngineStats | None]
    per_op: NotRequired[dict[str, float | None]]
    sla: NotRequired[Sla | None]
    checks: NotRequired[Checks]
    db_size_bytes: NotRequired[int]
    placement: NotRequired[PlacementJson]  # as run.json records the lab's
    phases: NotRequired[Phases]
    window: NotRequired[WindowJson]
    host: NotRequired[Host]
    inject_slowdown: NotRequired[float]
    device: NotRequired[DeviceJson]
    counters: NotRequired[Counters]
    error_samples: NotRequired[list[Event]]  # the first ignorable errors the loadgen told
