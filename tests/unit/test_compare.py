"""A run's verdicts from stored step results, the runner's "add a round?" loop, and the
A/A calibration figures, on synthetic step results (no engine)."""

from __future__ import annotations

import math
import random
from pathlib import Path
from typing import Any

from dbregress.analysis.calibration import step_noise
from dbregress.analysis.compare import compare_run
from dbregress.execution.runner import Runner
from dbregress.lab.file import Job, load_lab
from dbregress.store.run import RunWriter, read_run
from tests.step_records import native

LAB = """\
name = "synthetic"
placement = "unpinned"
benchmark = "kv"
repeats = "{repeats}"
[[column]]
label = "a"
build = "rocksdb@10.2.1"
[[column]]
label = "b"
build = "rocksdb@10.2.1"
[kv]
keys = 1000
steps = ["fillseq", "readrandom"]
"""


def result(column: str, repeat: int, step: str, q: float, other: float = 0.0) -> dict[str, Any]:
    return {
        "kind": "step",
        "column": column,
        "repeat": repeat,
        "step": step,
        "status": "ok",
        "reported": True,
        "q": {"op": "get", "unit": "ops", "count": int(q), "value": q},
        "per_op": {"server_cpu_us": 1e6 / q, "cs": 0.5},
        "host": {"steal_frac": 0.0, "other_cpu_frac": other},
        "ops": {},
    }


class SyntheticExecutor:
    """Runs no engine: each job's steps are made up. readrandom of column b is `shift`
    times a's, with a `noise` spread; fillseq has a `fillseq` spread."""

    def __init__(self, writer: RunWriter, shift: float, noise: float, fillseq: float) -> None:
        self.writer = writer
        self.shift, self.noise, self.fillseq = shift, noise, fillseq
        self.rng = random.Random(7)

    def provision(self, columns: Any = None) -> dict[str, Any]:
        return {}

    def job(self, job: Job, builds: Any) -> None:
        label = job.column.label
        factor = self.shift if label == "b" else 1.0
        steps = (("fillseq", self.fillseq), ("readrandom", self.noise))
        for index, (step, spread) in enumerate(steps, 1):
            q = 1000 * factor * math.exp(self.rng.gauss(0, spread))
            self.writer.set_job(job, {})
            self.writer.write_step(job, index, native(result(label, job.repeat, step, q)), [], "")

    def round(self, jobs: list[Job], builds: Any) -> None:
        for job in jobs:
            self.job(job, builds)


class SyntheticRunner(Runner):
    """The real scheduler (rounds, order, adding rounds) with a SyntheticExecutor."""

    def __init__(
        self, path: Path, repeats: str, shift: float, noise: float = 0.01, fillseq: float = 0.3
    ) -> None:
        lab_path = path / "lab.toml"
        lab_path.write_text(LAB.format(repeats=repeats))
        self.said: list[str] = []
        super().__init__(
            load_lab(lab_path),
            path / "results",
            notify=self.said.append,
            executor=lambda writer: SyntheticExecutor(writer, shift, noise, fillseq),
        )


def test_rounds_are_added_while_a_step_is_undecided(tmp_path: Path) -> None:
    runner = SyntheticRunner(tmp_path, "3..8", shift=1.0, fillseq=0.02)
    runner.run()
    record = read_run(runner.path).record
    # fillseq's 2% spread leaves it undecided at 3 repeats, within reach of 8
    assert len(record["rounds"]) > 3
    assert any("adding round 4 (at most 8)" in s and "fillseq (b)" in s for s in runner.said)
    data = read_run(runner.path)
    v = compare_run(data.record, data.steps)
    assert v.qps[("kv", "b", "readrandom")].verdict == "same"
    assert v.qps[("kv", "b", "readrandom")].n_base == len(record["rounds"])  # r0 left out


def test_no_round_is_added_for_steps_out_of_reach(tmp_path: Path) -> None:
    runner = SyntheticRunner(tmp_path, "3..8", shift=1.0)
    runner.run()
    record = read_run(runner.path).record
    # fillseq's 30% spread would need far more than 8 repeats to be decided: rounds stop
    # once the estimate rests on ESTIMATE_AFTER repeats
    rounds = len(record["rounds"])
    assert 5 <= rounds < 8
    said = f"1 step(s) undecided after {rounds} rounds, none likely to be decided within 8"
    assert said in runner.said[-1]


def test_no_round_is_added_once_every_step_is_decided(tmp_path: Path) -> None:
    runner = SyntheticRunner(tmp_path, "4..8", shift=0.8, noise=0.005, fillseq=0.005)
    runner.run()
    data = read_run(runner.path)
    v = compare_run(data.record, data.steps)
    assert v.qps[("kv", "b", "readrandom")].verdict == "slower"
    assert v.qps[("kv", "b", "fillseq")].verdict == "slower"
    assert len(data.record["rounds"]) == 4 and not runner.said


def test_disturbed_repeats_are_left_out_and_reported(tmp_path: Path) -> None:
    runner = SyntheticRunner(tmp_path, "4", shift=1.0)
    runner.run()
    data = read_run(runner.path)
    steps = data.steps
    first = steps["b/r1"][1]
    first["host"]["other_cpu_frac"] = 0.5  # a compile job ran on the other CPU
    v = compare_run(data.record, steps)
    assert v.qps[("kv", "b", "readrandom")].n_other == 3
    (d,) = v.disturbed
    assert (d.column, d.repeat, d.step) == ("b", 1, "readrandom")
    assert "other processes used 50%" in d.why


def test_calibration_figures_from_an_aa_run(tmp_path: Path) -> None:
    runner = SyntheticRunner(tmp_path, "6", shift=1.0, noise=0.02)
    runner.run()
    data = read_run(runner.path)
    # label b plays the A/A copy: rename it as calibrate names it
    for rs in data.steps.values():
        for r in rs:
            if r["column"] == "b":
                r["column"] = "a-aa"
    data.record["comparisons"][0]["labels"] = ["a", "a-aa"]
    v = compare_run(data.record, data.steps)
    noise = {n.step: n for n in step_noise(data.record, data.steps, v, 6, 0.05)}
    rr = noise["readrandom"]
    assert rr.repeats == 12 and rr.cv is not None and 0.005 < rr.cv < 0.05
    assert rr.min_change is not None and rr.min_change < 0.1
    assert rr.repeats_for_change is not None and rr.repeats_for_change >= 4
    assert rr.aa_verdict in ("same", "undecided")
    assert noise["fillseq"].cv is not None and noise["fillseq"].cv > rr.cv


def test_calibrate_builds_an_aa_lab_with_a_slowed_copy(tmp_path: Path) -> None:
    from dbregress.cli.calibrate import aa_lab

    lab_path = tmp_path / "lab.toml"
    lab_path.write_text(LAB.format(repeats="5"))
    lab = aa_lab(load_lab(lab_path), "same", 0.1)
    (comp,) = lab.comparisons
    assert [c.label for c in comp.columns] == ["a", "a-aa", "a-slow"]
    assert [c.build for c in comp.columns] == [comp.base.build] * 3
    assert [c.inject_slowdown for c in comp.columns] == [0, 0, 0.1]
    assert lab.placement.mode == "same" and lab.name == "synthetic-calibrate-same"
