"""A step of any benchmark, as the runner schedules it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from dbregress.shapes.spec import WorkloadFields, WorkloadSpec


@dataclass(frozen=True)
class StepPlan:
    name: str  # as reported: l.i0, qr100, ...
    step: str  # as the loadgen knows it: l.i0, qr, ...
    # the workload's own fields in the step spec (its `workload` besides kind and step)
    section: WorkloadFields = field(default_factory=lambda: WorkloadFields())
    reported: bool = True  # the cleanup has no Q of its own
    wait_after_s: float = 0.0  # quiet time after the step (post-write cleanup)
    work: int = 0  # rows to insert, or 0 for timed steps; for progress
    duration_s: float = 0.0  # timed steps

    def workload(self, kind: Literal["insert", "kv", "micro"]) -> WorkloadSpec:
        """The step spec's `workload` (schema/step-spec.schema.json): an object tagged
        by `kind`, with the step and the workload's own fields."""
        return {"kind": kind, "step": self.step, **self.section}

    def expected_s(self, rows_per_s: float = 20_000.0) -> float:
        """A generous guess of the step's length, for progress and hang detection."""
        return self.duration_s + self.work / rows_per_s


@dataclass(frozen=True)
class PinnedPace:
    """A paced step's writers as every counting replay runs them, whatever the time
    lane's rate (docs/verdicts.md, "The counting window"): one writer operation (an
    Insert Benchmark q-step's insert batch and its delete batch; a *whilewriting step's
    put) every `calls_per_write` Q calls. The window's clock, which the writers follow,
    then runs at `q_per_s`: the step's own writer operations per second times that."""

    writes_per_s: float  # the step's writer operations per second, as its spec paces them
    calls_per_write: int

    @property
    def q_per_s(self) -> float:
        return self.writes_per_s * self.calls_per_write

    @staticmethod
    def near(writes_per_s: float, q_per_s: float) -> PinnedPace:
        """The pin whose Q calls per write are the whole number nearest `q_per_s`'s."""
        return PinnedPace(writes_per_s, max(1, round(q_per_s / writes_per_s)))
