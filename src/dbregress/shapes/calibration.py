"""A host's calibration as stored (store/calibration.py): what `dbregress calibrate`
measured of the host's noise per placement, which later reports on that host show."""

from __future__ import annotations

from typing import Any, Literal, NotRequired, TypedDict


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


class Calibration(TypedDict):
    schema_version: int
    kind: Literal["calibration"]
    measured_at: str
    host: dict[str, Any]  # collect/host.py's facts, as it found them
    lab: str
    change: float
    placements: dict[str, CalibrationPlacement]
    # before and after the A/A runs: collect/hostprobe.py's figures (None: not probed)
    host_probe: NotRequired[dict[str, dict[str, Any] | None]]
    steadiest: str | None
