"""A three-column lab's whole schedule on a fake executor, with no engine: its rounds in
the seeded order, rounds added while a step is undecided, and a run interrupted in its
middle and resumed, which keeps every finished job and ends as the same run would have
ended without the interruption. The scheduler (runner.py, rounds.py) is the real one;
only how a job runs is made up."""

from __future__ import annotations

import json
import math
import random
from pathlib import Path
from typing import Any

import pytest

from dbregress.analysis.compare import compare_run
from dbregress.execution.runner import Runner
from dbregress.lab.file import Job, load_lab
from dbregress.model.errors import Interrupted
from dbregress.provision import Build
from dbregress.store.run import RunWriter, read_run
from tests.step_records import native

LAB = """\
name = "schedule"
placement = "unpinned"
benchmark = "kv"
repeats = "3..8"
schedule = "{schedule}"
warmup_job = true
seed = 11
[[column]]
label = "a"
build = "rocksdb@10.2.1"
[[column]]
label = "b"
build = "rocksdb@10.2.1"
[[column]]
label = "c"
build = "rocksdb@10.2.1"
[kv]
keys = 1000
steps = ["fillseq", "readrandom"]
"""

# readrandom per column: b is 6% slower than a, c the same; fillseq spreads so much that
# it stays undecided whatever the rounds
SHIFT = {"a": 1.0, "b": 0.94, "c": 1.0}
SPREAD = {"fillseq": 0.5, "readrandom": 0.02}


class FakeExecutor:
    """Runs no engine. A job's figures depend only on its column, repeat and step (a
    generator seeded by them), so a resumed run sees what an uninterrupted one saw; it
    raises KeyboardInterrupt, as Ctrl-C would, when `stop_after` jobs have run."""

    def __init__(self, writer: RunWriter, stop_after: int | None = None) -> None:
        self.writer = writer
        self.stop_after = stop_after
        self.ran: list[str] = []
        self.kept_jobs: list[str] = []

    def provision(self, columns: Any = None) -> dict[str, Build]:
        return {}

    def job(self, job: Job, builds: dict[str, Build]) -> None:
        if self.stop_after is not None and len(self.ran) == self.stop_after:
            raise KeyboardInterrupt
        self.ran.append(job.name)
        self.writer.forget_job(job)
        self.writer.set_job(job, {"status": "running"})
        for index, step in enumerate(("fillseq", "readrandom"), 1):
            rng = random.Random(f"{job.column.label}/{job.repeat}/{step}")
            factor = SHIFT[job.column.label] if step == "readrandom" else 1.0
            q = 1000 * factor * math.exp(rng.gauss(0, SPREAD[step]))
            self.writer.write_step(job, index, native(_result(job, step, q)), [], "")
        self.writer.end_job(job, "ok")

    def round(self, jobs: list[Job], builds: dict[str, Build]) -> None:
        """A round's jobs end together, as an interleaved round's do: Ctrl-C in the
        middle of one leaves none of them ended."""
        if self.stop_after is not None and len(self.ran) + len(jobs) > self.stop_after:
            raise KeyboardInterrupt
        for job in jobs:
            self.job(job, builds)

    def kept(self, jobs: list[Job]) -> None:
        self.kept_jobs += [j.name for j in jobs]


def _result(job: Job, step: str, q: float) -> dict[str, Any]:
    return {
        "kind": "step",
        "column": job.column.label,
        "repeat": job.repeat,
        "step": step,
        "status": "ok",
        "reported": True,
        "q": {"op": "get", "unit": "ops", "count": int(q), "value": q},
        "per_op": {"server_cpu_us": 1e6 / q, "cs": 0.5},
        "ops": {},
    }


def _runner(
    path: Path, schedule: str, executors: list[FakeExecutor], resume: Path | None = None
) -> Runner:
    path.mkdir(exist_ok=True)
    lab_path = path / "lab.toml"
    lab_path.write_text(LAB.format(schedule=schedule))

    def make(writer: RunWriter) -> FakeExecutor:
        executors.append(FakeExecutor(writer, stop_after=None if resume else 7))
        return executors[-1]

    return Runner(load_lab(lab_path), path / "results", resume=resume, history=False, executor=make)


@pytest.mark.parametrize("schedule", ["jobs", "interleaved"])
def test_a_three_column_schedule_with_added_rounds_and_a_resume(
    tmp_path: Path, schedule: str
) -> None:
    # the same lab without an interruption: what the resumed run must end as
    whole: list[FakeExecutor] = []
    plain = _runner(tmp_path / "whole", schedule, whole)
    whole[0].stop_after = None
    done = plain.run()
    rounds = json.loads((done / "run.json").read_text())["rounds"]
    # rounds beyond the minimum of 3 were added while readrandom was undecided, and the
    # maximum of 8 was not reached because b's 6% became decided before it
    assert 3 < len(rounds) < 8, rounds
    for r in rounds:
        assert sorted(r["order"]) == ["a", "b", "c"]
    assert len({tuple(r["order"]) for r in rounds}) > 1  # the seed draws each round's order
    # the base column's warm-up job, then every column in every round, nothing twice
    assert sorted(whole[0].ran) == sorted(
        ["a/r0"] + [f"{c}/r{n}" for c in "abc" for n in range(1, len(rounds) + 1)]
    )

    # Ctrl-C after seven jobs: the run says how to go on, the finished jobs are on disk
    first: list[FakeExecutor] = []
    broken = _runner(tmp_path / "cut", schedule, first)
    with pytest.raises(Interrupted, match="continue with `dbregress run --resume"):
        broken.run()
    record = json.loads((broken.path / "run.json").read_text())
    assert record["status"] == "interrupted"
    ended = {name for name, job in record["jobs"].items() if job.get("status") == "ok"}
    # the warm-up job and two rounds; an interleaved round cut in its middle is run
    # again whole
    assert len(ended) == 7, ended

    # resumed: the finished jobs are kept, the rest run once, and the run ends as the
    # uninterrupted one did (the same rounds, in the same orders, the same verdicts)
    again: list[FakeExecutor] = []
    resumed = _runner(tmp_path / "cut", schedule, again, resume=broken.path)
    assert resumed.run() == broken.path
    (executor,) = again
    assert set(executor.kept_jobs) == ended
    assert not set(executor.ran) & ended
    assert sorted(executor.ran + executor.kept_jobs) == sorted(whole[0].ran)
    final = json.loads((broken.path / "run.json").read_text())
    assert final["status"] == "ok"
    assert final["rounds"] == rounds
    assert _verdicts(broken.path) == _verdicts(done)
    if schedule == "interleaved":
        return  # its verdicts rest on paired turns, which these made-up jobs do not have
    verdicts = _verdicts(done)
    assert verdicts[("kv", "b", "readrandom")] == "slower"
    assert verdicts[("kv", "c", "readrandom")] in ("same", "undecided")
    assert verdicts[("kv", "b", "fillseq")] == "undecided"


def _verdicts(run: Path) -> dict[tuple[str, str, str], str]:
    """{(comparison, column, step): verdict} of the run's time lane."""
    data = read_run(run)
    return {key: v.verdict for key, v in compare_run(data.record, data.steps).qps.items()}
