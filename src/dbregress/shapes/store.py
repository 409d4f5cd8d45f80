"""Records the results folder keeps beside its runs: a host's calibration
(<results>/calibration/<hostname>.json, written by `dbregress calibrate`) and a run's
cost lane (cost/lane.json in the run folder)."""

from __future__ import annotations

from typing import NotRequired, TypedDict


class PlacementNoise(TypedDict):
    """One placement's A/A run: its id, the median over steps of the between-repeat CV
    of QPS, and each step's noise (analysis/calibration.py StepNoise, as its fields)."""

    run_id: str
    median_cv: float | None
    steps: list[dict[str, str | int | float | None]]


class ProbeBlocks(TypedDict):
    """One host probe's rates in consecutive blocks, and what they say
    (collect/hostprobe.py Probe, as its fields)."""

    name: str
    block_s: float
    rates: list[float]  # work units per second, one per block
    cv: float | None  # coefficient of variation of the block rates
    low: float | None  # slowest block / median
    high: float | None  # fastest block / median


class HostProbe(TypedDict):
    """The host probes of one moment (collect/hostprobe.py probe_host): the memory
    probe's buffer size and each probe's blocks."""

    buffer_bytes: int
    cpu: ProbeBlocks
    memory: ProbeBlocks


class HostProbes(TypedDict):
    """The host probes before and after the A/A runs; None when calibrate was told not
    to probe."""

    before: HostProbe | None
    after: NotRequired[HostProbe | None]


class Calibration(TypedDict):
    """What calibrate measured, as save_calibration stores it (after the schema version,
    kind, time and host it adds): per placement the A/A noise, and the steadiest one."""

    lab: str
    change: float
    placements: dict[str, PlacementNoise]
    host_probe: HostProbes
    steadiest: NotRequired[str | None]


class CostLaneRecord(TypedDict, total=False):
    """cost/lane.json: how a run's cost lane counted (the lane writes every key; a lane
    an earlier dbregress stored may lack the later ones, so readers take each with a
    default)."""

    schema_version: int  # added where the record is stored
    kind: str  # "cost-lane"
    took_s: float
    workers: int
    replays_per_column: int
    replays_max: int
    valgrind: str  # valgrind --version
    method: str
    caches: list[str]  # the cache simulation's options
    cycles_model: dict[str, int]  # cache level -> cycles per miss (l1, ll, ram)
    replay_settings: dict[str, dict[str, str]]  # engine family -> setting -> value
    lockstep_steps: list[str]
    skipped: dict[str, str]  # comparison/step -> why it was not counted
