"""A host's calibration as stored (store/calibration.py): what `dbregress calibrate`
measured of the host's noise per placement, which later reports on that host show."""

from __future__ import annotations

from typing import Literal, NotRequired, TypedDict

from dbregress.shapes.run import HostFacts


class CalibrationStep(TypedDict):
    """One step's noise in an A/A run (analysis/calibration.py StepNoise)."""

    comparison: str
    step: str
    repeats: int
    cv: float | None
    sd_log: float | None
    min_change: float | None
    repeats_for_change: int | None
    aa_verdict: str | None
    injected_verdict: str | None


class CalibrationPlacement(TypedDict):
    """One placement's A/A run and its steps' noise."""

    run_id: str
    median_cv: float | None
    steps: list[CalibrationStep]


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
    """What calibrate measured: per placement the A/A noise of each step, the steadiest
    placement, and the host probes around the A/A runs. The schema version, kind, time
    and host are added where it is stored (store/calibration.py)."""

    schema_version: NotRequired[int]
    kind: NotRequired[Literal["calibration"]]
    measured_at: NotRequired[str]
    host: NotRequired[HostFacts]  # collect/host.py's facts, as it found them
    lab: str
    change: float
    placements: dict[str, CalibrationPlacement]
    host_probe: NotRequired[HostProbes]  # None in it: not probed
    steadiest: NotRequired[str | None]
