"""run.json (schema/run.schema.json) as it is stored: `RunJson`, and its parts. The
record is built by run_record.RunRecord; these are what readers get back."""

from __future__ import annotations

from typing import Literal, NotRequired, TypeAlias, TypedDict


class Imported(TypedDict):
    kind: str
    files: list[str]
    imported_at: NotRequired[str]


class ComparisonEntry(TypedDict):
    name: str
    benchmark: str
    labels: list[str]


class Placement(TypedDict):
    mode: str
    server_cpus: NotRequired[list[int] | None]
    client_cpus: NotRequired[list[int] | None]


class ColumnEntry(TypedDict):
    label: str
    comparison: str
    build: str
    config: str
    settings: dict[str, str]  # engine setting -> its value in the config file
    base: bool


class HostFacts(TypedDict, total=False):
    """The host a run was measured on (collect/host.py host_facts, and the address space
    layout the runner adds); an imported run knows none of it, and a record written by
    an earlier dbregress may lack the later facts or name the core count `cores`."""

    hostname: str
    kernel: str
    machine: str
    cpu_model: str | None
    cpu_count: int | None
    cores: int | None
    cpu_affinity: list[int]
    mem_total_bytes: int | None
    cpu_governor: str | None
    python: str
    perf_counters: str
    aslr: str


# A build's identity as the provisioner records it (source, commit, path, recipe,
# version string, ...): every field a string, its set of fields the provisioner's own.
BuildIdentity: TypeAlias = dict[str, str]


JobStatus: TypeAlias = Literal["running", "ok", "failed"]


class JobEntry(TypedDict, total=False):
    """A job as the runner records it when it starts (and completes once the engine is
    up); an import records the files it read instead of the sizes and the server log."""

    comparison: str
    build: str
    config: str
    status: JobStatus
    settings: dict[str, str]
    sizes: dict[str, int]
    server_log: str | None
    host: str  # a fleet's: the worker that measured the job
    files: list[str]  # an import's: the files the job was read from


class MethodIdentity(TypedDict):
    """How a run (or a counting replay) was measured: dbregress/method.py says what each
    field is; every field is part of the identity's key."""

    dbregress: str
    loadgen_sha256: str | None
    valgrind: str | None
    libc: str
    caches: str
    cost_model: str
    counting_profile: str


class FioRun(TypedDict, total=False):
    """One fio run beside an IO-bound comparison, or the error that stopped it."""

    at: str
    file: str  # fio's own output, relative to the run folder
    command: list[str]
    size_mb: int
    runtime_s: float
    figures: dict[str, float]
    error: str


class DeviceBaseline(TypedDict):
    """An IO-bound comparison's device baseline (io_baseline.py): the base column's read
    pattern and device, fio before and after the comparison's jobs, or why there is none."""

    numjobs: int
    block_size: int | None
    direct: bool | None
    source: str | None
    device: str | None
    fio_version: str | None
    before: FioRun | None
    after: FioRun | None
    absent: str | None


class Failure(TypedDict):
    where: str
    type: str
    message: str
    traceback: NotRequired[str]


class Repeats(TypedDict):
    min: int | None
    max: int | None


class VerdictPolicy(TypedDict):
    """Every setting a verdict of the run depends on (lab.py Lab.policy_record); a run
    of an earlier dbregress stored fewer of them."""

    alpha: float
    band: float
    cost_band: NotRequired[float]
    count_replays: NotRequired[int]
    count_replays_max: NotRequired[int]
    repeats: NotRequired[Repeats]
    schedule: NotRequired[str | None]


class CostLane(TypedDict):
    planned: bool
    why_not: str | None


class Round(TypedDict):
    comparison: str
    round: int
    order: list[str]


class PageCache(TypedDict):
    dropped: NotRequired[int]
    failed: NotRequired[str | None]


class FleetStore(TypedDict):
    """What storing a fleet run's messages cost the coordinator (fleet/ship.py)."""

    messages: int
    busy_s: float


class FleetUnit(TypedDict):
    """One unit of a fleet run's timeline (fleet/coordinator.py): where it ran and when
    it was handed over, started, ended and received (epoch seconds)."""

    unit: str
    host: str
    submitted: float | None
    started: float | None
    ended: float | None
    received: float


class CountIdentity(TypedDict):
    """A fleet run's counting identity (fleet/host.py count_identity): the measurement
    identity its counting replays share, its key, who chose it, the workers that have
    it and, per worker left out, the fields in which it differs."""

    dbregress: str | None
    loadgen_sha256: str | None
    valgrind_version: str | None
    libc: str | None
    key: str
    chosen_by: str
    hosts: list[str]
    left_out: dict[str, str]


class HostCalibration(TypedDict):
    """A worker's latest calibration, in brief: when, its steadiest placement and that
    placement's median CV."""

    measured_at: str | None
    placement: str | None
    median_cv: float | None


class HostFingerprint(TypedDict):
    """What a fleet worker tells the coordinator about its host (fleet/host.py
    fingerprint), with the address it was found at and, for a noisy host, why it was
    left out."""

    name: str
    hostname: str
    dbregress: str
    cpu_model: str | None
    cpu_count: int | None
    mem_gib: int | None
    machine: str
    kernel_release: str
    governor: str | None
    virt: str
    valgrind: bool
    loadgen_sha256: str | None
    valgrind_version: str | None
    libc: str
    calibration: HostCalibration | None
    group: str
    count_key: str
    address: NotRequired[str]
    left_out: NotRequired[str]


class RunJson(TypedDict):
    schema_version: Literal[1]
    kind: Literal["run"]
    run_id: str
    lab: str
    imported: NotRequired[Imported]
    comparisons: list[ComparisonEntry]
    started_at: NotRequired[str | None]
    finished_at: NotRequired[str | None]
    resumed_at: NotRequired[list[str]]
    status: Literal["running", "ok", "failed", "interrupted"]
    host: HostFacts
    placement: Placement
    columns: list[ColumnEntry]
    builds: dict[str, BuildIdentity]
    jobs: dict[str, JobEntry]
    failures: list[Failure]
    repeats: NotRequired[Repeats]
    order: NotRequired[str | None]
    schedule: NotRequired[str | None]
    slice_ms: NotRequired[int | None]
    seed: NotRequired[int | None]
    warmup_job: NotRequired[bool]
    verdict_policy: NotRequired[VerdictPolicy]
    cost_lane: NotRequired[CostLane | None]
    method_identity: NotRequired[MethodIdentity | None]
    count_identity: NotRequired[CountIdentity | None]
    inject_slowdown: NotRequired[dict[str, float]]
    rounds: NotRequired[list[Round]]
    page_cache: NotRequired[PageCache | None]
    device_baseline: NotRequired[dict[str, DeviceBaseline]]
    hosts: NotRequired[dict[str, HostFingerprint]]  # a fleet run's hosts by name
    fleet_plan: NotRequired[dict[str, list[str]]]  # comparison -> the hosts it runs on
    fleet_store: NotRequired[FleetStore]
    fleet_units: NotRequired[list[FleetUnit]]
