"""The exit status of a gate is the same wherever the run is judged (`run`, `report RUN`,
a folder that cannot be written): a confirmed `slower` is 1 even when a job failed; a bug
in dbregress inside a step, a job or a replay is recorded as one and exits 3, never 2;
an engine's failure stays 2. The lab's real runner and executor run it, with the engine
and the step's measurement made up (no engine starts)."""

from __future__ import annotations

import math
import random
import threading
import types
from pathlib import Path
from typing import Any

import pytest

from dbregress import benchmarks
from dbregress.analysis.gate import bugs
from dbregress.cli import run as cli_run
from dbregress.cli.exits import EXIT_CRASH, EXIT_OK, EXIT_SLOWER, EXIT_UNJUDGED
from dbregress.cli.main import main
from dbregress.cost import replay as replay_module
from dbregress.execution import execute
from dbregress.execution.runner import Runner
from dbregress.execution.step import StepOutcome
from dbregress.lab.file import Job, Lab, load_lab
from dbregress.model.errors import EngineCrashed, is_bug
from dbregress.model.records import JobId, StepError, StepResult
from dbregress.store.run import RunWriter, read_record, read_run
from tests.step_records import native
from tests.unit.test_compare import result

LAB = """\
name = "exits"
placement = "unpinned"
benchmark = "kv"
repeats = 6
warmup_job = false
count = false
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

Fault = tuple[str, int, str, BaseException]  # column, repeat, step: what its step raises


class _Engine:
    """What the executor asks of an engine when a step fails: its log's tail."""

    def __init__(self, job: Job) -> None:
        self.job = job

    def log_tail(self, lines: int) -> str:
        return ""


class _Executor(execute.LocalExecutor):
    """The lab's own executor (its step recording, failures and all), with no engine:
    each step's measurement is made up by _measure, or raises a fault."""

    def provision(self, columns: Any = None) -> dict[str, Any]:
        return {c.label: None for c in self.lab.columns}

    def round(self, jobs: list[Job], builds: dict[str, Any]) -> None:
        for job in jobs:
            self.job(job, builds)

    def _run_job(self, job: Job, build: Any, job_index: int, jobs: int) -> None:
        self.writer.set_job(job, {"comparison": job.comparison.name, "status": "running"})
        ok = True
        for index, plan in enumerate(benchmarks.plans(job.comparison), start=1):
            engine: Any = _Engine(job)
            if not self._run_step(None, engine, job, index, plan, lambda *a: None):  # type: ignore[arg-type]
                ok = False
                break
        self.writer.end_job(job, "ok" if ok else "failed")


def _measure(shift: float, faults: list[Fault]) -> Any:
    """collect_step's stand-in: column b's readrandom at `shift` times a's, 1% noise."""
    rng = random.Random(5)

    def collect(engine: _Engine, spec: Any, stem: Path, plan: Any, *rest: Any) -> StepOutcome:
        job = engine.job
        for label, repeat, step, error in faults:
            if (label, repeat, step) == (job.column.label, job.repeat, plan.name):
                raise error
        factor = shift if job.column.label == "b" and plan.name == "readrandom" else 1.0
        q = 1000 * factor * math.exp(rng.gauss(0, 0.01))
        figures = native(result(job.column.label, job.repeat, plan.name, q)).to_json()
        return StepOutcome(figures)

    return collect


def _lab(tmp_path: Path) -> Path:
    path = tmp_path / "lab.toml"
    path.write_text(LAB)
    return path


@pytest.fixture
def made_up(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Any:
    """`dbregress run` with the lab's runner and executor, steps made up: call it with
    the shift of b's readrandom and the faults to raise; it returns the exit status."""
    monkeypatch.setattr(execute.prepare, "step_spec", lambda *a, **k: {})
    monkeypatch.setattr(execute.prepare, "step_timeout", lambda *a, **k: 60.0)

    def run(
        shift: float, faults: list[Fault], *flags: str, unwritable: bool = False
    ) -> tuple[int, Path]:
        monkeypatch.setattr(execute, "collect_step", _measure(shift, faults))
        made: list[Runner] = []

        def runner_for(lab: Lab, results: Path, *a: Any, **k: Any) -> Runner:
            def executor(writer: RunWriter) -> _Executor:
                if unwritable:  # report.md cannot be written: a folder in its place
                    (writer.path / "report.md").mkdir()
                return _Executor(lab, writer, lambda p: None, lambda s: None, lambda f: None)

            made.append(Runner(lab, results, history=False, executor=executor))
            return made[0]

        monkeypatch.setattr(cli_run, "runner_for", runner_for)
        code = main(["run", str(_lab(tmp_path)), "--results", str(tmp_path / "r"), *flags])
        return code, made[0].path

    return run


ENGINE_DIED: Fault = ("b", 2, "readrandom", EngineCrashed("the server died in readrandom"))
BUG: Fault = ("a", 1, "fillseq", TypeError("unsupported operand type(s) for +: 'int' and 'str'"))


@pytest.mark.parametrize("unwritable", [False, True])
def test_a_confirmed_slower_is_1_when_a_job_failed_in_run_and_in_report(
    made_up: Any, capsys: pytest.CaptureFixture[str], unwritable: bool
) -> None:
    """Failed without the fix: run raised the run's failure after the gate (2), and a
    folder where report.md cannot be written made both commands exit 2."""
    code, path = made_up(0.8, [ENGINE_DIED], "--fail-on", "slower:time", unwritable=unwritable)
    err = capsys.readouterr().err
    assert "fail-on slower:time: FAILED, 1 step(s) slower: kv/readrandom (b, time)" in err
    assert "Error: 1 failure(s)" in err and "the server died" in err  # said, not the status
    assert code == EXIT_SLOWER
    assert read_record(path)["status"] == "failed"
    assert main(["report", str(path), "--fail-on", "slower:time"]) == EXIT_SLOWER
    if unwritable:
        assert "the report is printed, not written" in capsys.readouterr().err
        # without a gate, a report that cannot be written is still an error
        assert main(["report", str(path)]) == EXIT_UNJUDGED


def test_an_engine_failure_without_a_slower_step_is_2(made_up: Any) -> None:
    code, path = made_up(1.0, [ENGINE_DIED], "--fail-on", "slower:time")
    assert code == EXIT_UNJUDGED
    assert main(["report", str(path), "--fail-on", "slower:time"]) == EXIT_UNJUDGED
    assert not read_record(path)["failures"][0].get("bug")


def test_a_bug_inside_a_step_is_recorded_as_one_and_exits_3_everywhere(
    made_up: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """Failed without the fix: the TypeError was a failed step like an engine's, and
    every command read it as "not judged" (2)."""
    code, path = made_up(1.0, [BUG], "--fail-on", "slower:time")
    err = capsys.readouterr().err
    assert code == EXIT_CRASH
    assert "A BUG IN DBREGRESS" in err
    assert "a bug in dbregress: a/r1 fillseq: TypeError: unsupported operand" in err
    failure = read_record(path)["failures"][0]
    assert failure["bug"] is True and "Traceback" in failure["traceback"]
    step = next(r for r in read_run(path).steps["a/r1"] if r["step"] == "fillseq")
    assert step["status"] == "failed"
    assert step["error"].get("bug") is True and "TypeError" in step["error"]["traceback"]
    assert main(["report", str(path), "--fail-on", "slower:time"]) == EXIT_CRASH
    assert main(["report", str(path), "--fail-on", "slower", "--allow-undecided"]) == EXIT_CRASH
    assert main(["report", str(path)]) == EXIT_OK  # a report without a gate judges nothing


def test_a_bug_without_a_gate_exits_3_and_a_slower_step_still_exits_1(
    made_up: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _ = made_up(1.0, [BUG])
    assert code == EXIT_CRASH
    assert "1 of them a bug in dbregress (tracebacks in" in capsys.readouterr().err
    code, path = made_up(0.8, [BUG, ENGINE_DIED], "--fail-on", "slower:time")
    assert code == EXIT_SLOWER  # the regression is what the user acts on first
    err = capsys.readouterr().err
    assert "also a bug in dbregress: 1" in err and "a/r1 fillseq: TypeError" in err
    assert main(["report", str(path), "--fail-on", "slower:time"]) == EXIT_SLOWER


def test_which_exceptions_are_bugs() -> None:
    assert is_bug(TypeError("x")) and is_bug(KeyError("q")) and is_bug(AssertionError())
    for named in (EngineCrashed("died"), OSError(8, "Exec format error"), KeyboardInterrupt()):
        assert not is_bug(named)


def test_a_bug_inside_a_replay_is_recorded_as_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Failed without the fix: a replay's TypeError had no mark a gate could read."""
    lab = load_lab(_lab(tmp_path))
    comparison = lab.comparisons[0]
    spec = "rocksdb@10.2.1"
    build: Any = types.SimpleNamespace(identity={"spec": spec}, spec=spec, basedir=tmp_path)
    replay = replay_module.Replay(comparison, comparison.columns[1], 1)
    records = []
    for error in (TypeError("'NoneType' object is not subscriptable"), EngineCrashed("died")):

        def count(*a: Any, error: BaseException = error) -> Any:
            raise error

        monkeypatch.setattr(replay_module.counting, "count", count)
        found = replay_module.count_replay(
            lab, replay, build, {}, tmp_path / "work", tmp_path / "out", _never()
        )
        assert found is not None and found["status"] == "failed"
        records.append(found)
    bug, engine = (r.get("error") or {} for r in records)
    assert bug.get("bug") is True and "TypeError" in bug.get("traceback", "")
    assert "bug" not in engine
    record: Any = {"failures": []}
    assert bugs(record, replays=records) == [
        "replay b/c1: TypeError: 'NoneType' object is not subscriptable (traceback in "
        "cost/b/r1.json)"
    ]


def test_a_bug_in_a_step_result_of_a_run_without_failures_is_found() -> None:
    """compare's merged run keeps no failures: the step results still say it."""
    error = StepError("KeyError", "'q'", "", "Traceback ...", True)
    failed = StepResult.failed(JobId("B:b", 2), "readrandom", error).to_json()
    record: Any = {"failures": []}
    assert bugs(record, [failed]) == [
        "B:b/r2 readrandom: KeyError: 'q' (traceback in the step's .json)"
    ]
    plain = StepResult.failed(JobId("B:b", 2), "readrandom", StepError("EngineCrashed", "x", ""))
    assert "bug" not in plain.to_json()["error"] and bugs(record, [plain.to_json()]) == []


def _never() -> threading.Event:
    return threading.Event()  # a replay that is never cancelled
