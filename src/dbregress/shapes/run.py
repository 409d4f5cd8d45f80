"""run.json (schema/run.schema.json) as it is stored: `RunJson`, and its parts. The
record is built by run_record.RunRecord; these are what readers get back."""

from __future__ import annotations

from typing import Literal, NotRequired, TypeAlias, TypedDict

from dbregress.shapes.device import DeviceBaseline
from dbregress.shapes.host import CountIdentity, FleetStore, HostEntry
from dbregress.shapes.method import MethodIdentity


class Imported(TypedDict):
    kind: str
    files: list[str]
    imported_at: NotRequired[str]


class ComparisonEntry(TypedDict):
    name: str
    benchmark: str
    labels: list[str]


class PlacementJson(TypedDict):
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
    method_identity: MethodIdentity  # a fleet's: the method of the worker that measured it
    files: list[str]  # an import's: the files the job was read from


class Failure(TypedDict):
    where: str
    type: str
    message: str
    traceback: NotRequired[str]
    bug: NotRequired[bool]  # True: a bug in dbregress (errors.is_bug): exit 3, not 2


class RepeatsJson(TypedDict):
    min: int | None
    max: int | None


class VerdictPolicyJson(TypedDict):
    """Every setting a verdict of the run depends on (lab/file.py Lab.policy_record); a run
    of an earlier dbregress stored fewer of them."""

    alpha: float
    band: float
    cost_band: NotRequired[float]
    cost_small_floor: NotRequired[float]
    count_replays: NotRequired[int]
    count_replays_max: NotRequired[int]
    repeats: NotRequired[RepeatsJson]
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


class FleetUnit(TypedDict):
    """One unit of a fleet run's timeline (fleet/coordinator.py): where it ran and when
    it was handed over, started, ended and received (epoch seconds)."""

    unit: str
    host: str
    submitted: float | None
    started: float | None
    ended: float | None
    received: float
    failed: NotRequired[str | None]  # why the unit failed, where it did


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
    placement: PlacementJson
    columns: list[ColumnEntry]
    builds: dict[str, BuildIdentity]
    jobs: dict[str, JobEntry]
    failures: list[Failure]
    repeats: NotRequired[RepeatsJson]
    order: NotRequired[str | None]
    schedule: NotRequired[str | None]
    slice_ms: NotRequired[int | None]
    seed: NotRequired[int | None]
    warmup_job: NotRequired[bool]
    verdict_policy: NotRequired[VerdictPolicyJson]
    cost_lane: NotRequired[CostLane | None]
    method_identity: NotRequired[MethodIdentity | None]
    count_identity: NotRequired[CountIdentity | None]
    inject_slowdown: NotRequired[dict[str, float]]
    rounds: NotRequired[list[Round]]
    page_cache: NotRequired[PageCache | None]
    device_baseline: NotRequired[dict[str, DeviceBaseline]]
    hosts: NotRequired[dict[str, HostEntry]]  # a fleet run's hosts by name
    fleet_plan: NotRequired[dict[str, list[str]]]  # comparison -> the hosts it runs on
    fleet_store: NotRequired[FleetStore]
    fleet_units: NotRequired[list[FleetUnit]]
