"""A benchmark host as the fleet and run.json know it: what a worker says of its host
(`WorkerFacts`, `Fingerprint`; run.json `hosts` stores `HostEntry` by name), the
measurement identity counting replays run under (`CountIdentity`, run.json
`count_identity`), and what storing a fleet run's messages cost (`FleetStore`)."""

from __future__ import annotations

from typing import Literal, NotRequired, TypedDict

# The fields of a measurement identity (fleet/host.py COUNT_IDENTITY).
IdentityField = Literal["dbregress", "loadgen_sha256", "valgrind_version", "libc", "cpu_features"]


class MeasurementIdentity(TypedDict):
    """What a count depends on besides the build and the lab (None: not known)."""

    dbregress: str | None
    loadgen_sha256: str | None
    valgrind_version: str | None
    libc: str | None
    cpu_features: str | None  # the processor valgrind presents (method.cpu_features)


class CountingHost(MeasurementIdentity):
    """A host's measurement identity and whether it has valgrind (and vgdb)."""

    valgrind: bool


class ChosenIdentity(MeasurementIdentity):
    """A measurement identity and who chose it (the coordinator's own, the most
    workers')."""

    chosen_by: str


class CountIdentity(ChosenIdentity):
    """The identity a lab's counting replays run under, and the workers that have it."""

    key: str  # host.identity_key: the Dask resource count:<key> of its workers
    hosts: list[str]
    left_out: dict[str, str]  # worker -> the fields in which it differs


class CalibrationBrief(TypedDict):
    """A host's calibration, as far as the fleet uses it (its noise)."""

    measured_at: str | None
    placement: str | None
    median_cv: float | None


class WorkerFacts(CountingHost):
    """What a worker says of its host, in the order it is stored (the measurement
    identity's fields among them: `dbregress` after `hostname`, the rest after
    `valgrind`)."""

    name: str
    hostname: str
    cpu_model: str | None
    cpu_count: int | None
    mem_gib: int | None
    machine: str
    kernel_release: str
    governor: str | None
    virt: str
    calibration: CalibrationBrief | None
    mem_total_bytes: NotRequired[int | None]  # absent from workers before it was said


class Fingerprint(WorkerFacts):
    """A worker's host: its facts, its group and its measurement identity's key. The
    coordinator adds its address, and why it was left out if it was."""

    group: str
    count_key: str


class HostEntry(Fingerprint):
    """A host as run.json `hosts` stores it, by name."""

    address: str  # its worker's, at the scheduler
    left_out: NotRequired[str]  # why its units go elsewhere (too noisy)


class FleetStore(TypedDict):
    """What storing the fleet's messages cost the coordinator (run.json `fleet_store`)."""

    messages: int
    busy_s: float
