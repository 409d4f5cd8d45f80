"""One path runs a lab: the time lane, then the cost lane here or on the fleet's workers
(workflow/lab_run.py), for `run`, `bisect` and `calibrate` alike."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from dbregress.execution.runner import Runner
from dbregress.fleet.coordinator import FleetRunner
from dbregress.workflow import lab_run as workflow
from dbregress.workflow.lab_run import CountsOnFleet, run_lab


def test_only_a_fleets_coordinator_counts_on_the_fleet() -> None:
    assert issubclass(FleetRunner, CountsOnFleet)
    assert not issubclass(Runner, CountsOnFleet)


class _Lab:
    def __init__(self, counts: bool) -> None:
        self._counts = counts

    def counts(self) -> bool:
        return self._counts


class _Runner:
    path = Path("run")

    def __init__(self, said: list[str]) -> None:
        self.said = said

    def run(self) -> None:
        self.said.append("time lane")


class _Fleet(_Runner):
    def __init__(self, said: list[str], counts: bool) -> None:
        super().__init__(said)
        self._counts = counts

    def counts(self) -> bool:
        return self._counts

    def run_lane(self, notify: Any) -> None:
        self.said.append("cost lane on the fleet")


@pytest.mark.parametrize("counts", [True, False])
def test_the_time_lane_then_the_cost_lane_where_the_lab_counts(
    monkeypatch: pytest.MonkeyPatch, counts: bool
) -> None:
    said: list[str] = []
    monkeypatch.setattr(workflow, "run_lane", lambda *a: said.append("cost lane here"))
    run_lab(_Runner(said), _Lab(counts), said.append)  # type: ignore[arg-type]
    assert said == ["time lane", *(["cost lane here"] if counts else [])]
    said.clear()
    run_lab(_Fleet(said, counts), _Lab(True), said.append)  # type: ignore[arg-type]
    assert said == ["time lane", *(["cost lane on the fleet"] if counts else [])]
