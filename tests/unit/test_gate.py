"""--fail-on fails closed: a gate that names a lane passes only when that lane judged
the run; a lane that did not run, did not finish or decided nothing exits 2 with the
reason on one line."""

from __future__ import annotations

import dataclasses
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from dbregress.analysis.compare import RunVerdicts, lane_gaps
from dbregress.analysis.cost import cost_verdicts
from dbregress.analysis.gate import Planned, judge
from dbregress.analysis.verdict import StepVerdict
from dbregress.cli import report as report_cli
from dbregress.cli.exits import EXIT_CRASH, EXIT_SLOWER, EXIT_UNJUDGED, TABLE
from dbregress.cli.main import main
from dbregress.cli.report import gate, planned_steps
from dbregress.lab.file import VerdictPolicy, load_lab
from dbregress.store.run import RunData, RunWriter, read_record
from tests.unit.test_cost_verdict import RECORD, replays

LAB = """\
name = "g"
repeats = 2
placement = { server = "0", client = "0" }
[[column]]
label = "a"
build = "postgres@17.2.0"
[[column]]
label = "b"
build = "postgres@17.2.0"
[insert]
load_rows = 1000
write_rows = 100
query_seconds = 1
"""


def _qps(verdict: str) -> dict[tuple[str, str, str], StepVerdict]:
    c = StepVerdict(1.0, (0.98, 1.02), 0.95, 0.5, verdict, 5, 5, None, "")
    return {("c", "b", "s0"): c}


def _cost(factor: float) -> Any:
    rng = random.Random(3)
    return cost_verdicts(RECORD, replays(rng, "a", 3) + replays(rng, "b", 3, factor))


def _record(**lane: Any) -> dict[str, Any]:
    return {**RECORD, "cost_lane": lane}


def test_cost_gate_without_a_cost_lane_exits_2_with_why(capsys: pytest.CaptureFixture[str]) -> None:
    v = RunVerdicts(VerdictPolicy(), _qps("same"), {}, [])
    record = _record(planned=False, why_not="valgrind not found on PATH (install valgrind)")
    assert gate(v, "slower:cost", record) == EXIT_UNJUDGED
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "NOT JUDGED" in err and "valgrind not found on PATH" in err
    # both lanes named: the cost lane's absence still blocks a pass
    assert gate(v, "slower", record) == EXIT_UNJUDGED
    # the time lane alone judged the run
    assert gate(v, "slower:time", record) == 0
    assert "passed" in capsys.readouterr().err


def test_a_lane_planned_but_unfinished_and_count_false_say_so() -> None:
    v = RunVerdicts(VerdictPolicy(), _qps("same"), {}, [])
    assert "not finished" in lane_gaps(v, _record(planned=True, why_not=None))["cost"]
    off = _record(planned=False, why_not="the lab file sets count = false")
    assert "count = false" in lane_gaps(v, off)["cost"]
    assert "no counting replays" in lane_gaps(v, RECORD)["cost"]  # an older run: no record


def test_every_step_undecided_is_not_a_pass(capsys: pytest.CaptureFixture[str]) -> None:
    v = RunVerdicts(VerdictPolicy(), _qps("undecided"), {}, [], _cost(1.0))
    assert gate(v, "slower:time", RECORD) == EXIT_UNJUDGED
    assert "every step is undecided" in capsys.readouterr().err


def test_slower_in_a_lane_exits_1_and_a_pass_names_the_lanes(
    capsys: pytest.CaptureFixture[str],
) -> None:
    slower = RunVerdicts(VerdictPolicy(), _qps("same"), {}, [], _cost(1.2))
    assert gate(slower, "slower:cost", RECORD) == EXIT_SLOWER
    assert "FAILED" in capsys.readouterr().err
    same = RunVerdicts(VerdictPolicy(), _qps("same"), {}, [], _cost(1.0))
    assert gate(same, "slower", RECORD) == 0
    err = capsys.readouterr().err
    assert (
        "passed" in err
        and "time lane 1 of 1 decided" in err
        and "cost lane 10 of 10 decided" in err
    )


def test_why_no_count_names_the_missing_valgrind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lab_path = tmp_path / "lab.toml"
    lab_path.write_text(LAB)
    monkeypatch.delenv("DBREGRESS_COUNT", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))  # no valgrind, no vgdb
    lab = load_lab(lab_path)
    assert not lab.counts()
    assert lab.why_no_count() == "valgrind and vgdb not found on PATH (install valgrind)"
    writer = RunWriter(tmp_path / "results", lab, {"cpu_model": "x", "cores": 2})
    record = read_record(writer.path)
    assert record["cost_lane"] == {"planned": False, "why_not": lab.why_no_count()}
    monkeypatch.setenv("DBREGRESS_COUNT", "0")
    assert load_lab(lab_path).why_no_count() == "the environment sets DBREGRESS_COUNT=0"
    lab_path.write_text(LAB.replace('name = "g"', 'name = "g"\ncount = false'))
    assert load_lab(lab_path).why_no_count() == "the lab file sets count = false"


# --- the gate judges steps, not lanes (every path of analysis/gate.py) ---------------

STEPS3 = ["s0", "s1", "s2"]


def _verdict(verdict: str, reason: str = "") -> StepVerdict:
    ratio = {"slower": 0.8, "faster": 1.2}.get(verdict, 1.0)
    return StepVerdict(ratio, (ratio - 0.02, ratio + 0.02), 0.95, 0.5, verdict, 5, 5, None, reason)


def _time(**by_step: str) -> dict[tuple[str, str, str], StepVerdict]:
    return {("c", "b", s): _verdict(v, f"why {s}") for s, v in by_step.items()}


def _judge(v: RunVerdicts, lanes: tuple[str, ...], **kw: Any) -> Any:
    record = {**RECORD, "status": kw.pop("status", "ok"), "cost_lane": kw.pop("lane", None)}
    planned = Planned({"c": STEPS3}, {"c": kw.pop("cost_steps", STEPS3)})
    return judge(v, record, lanes, planned, **kw)  # type: ignore[arg-type]


def test_one_undecided_step_of_many_fails_closed_and_is_named(
    capsys: pytest.CaptureFixture[str],
) -> None:
    v = RunVerdicts(VerdictPolicy(), _time(s0="same", s1="faster", s2="undecided"), {}, [])
    record = {**RECORD, "status": "ok"}
    result = judge(v, record, ("time",), Planned({"c": STEPS3}, {}))  # type: ignore[arg-type]
    assert [g.key for g in result.gaps] == [("c", "b", "s2")]
    assert result.gaps[0].why == "undecided: why s2" and result.judged["time"] == (2, 3)
    # the same through the command's gate: exit 2, the step named with its reason
    monkey = {"c": STEPS3}
    assert gate_with(v, record, monkey) == EXIT_UNJUDGED
    err = capsys.readouterr().err
    assert "NOT JUDGED, 1 judged step(s) not decided (time lane 2 of 3 decided)" in err
    assert "  c/s2 (b, time): undecided: why s2" in err


def gate_with(v: RunVerdicts, record: Any, steps: dict[str, list[str]], **kw: Any) -> int:
    """The command's gate on a run without a lab file: judged on the steps it holds."""
    del steps  # held_steps finds them in the verdicts
    return gate(v, "slower:time", record, **kw)


def test_a_step_the_base_never_ran_is_missing_not_passed() -> None:
    v = RunVerdicts(VerdictPolicy(), _time(s0="same", s1="same"), {}, [])
    result = _judge(v, ("time",))
    assert [(g.key, g.why) for g in result.gaps] == [
        (("c", "b", "s2"), "not measured: no repeat of a ran it")
    ]


def test_a_step_that_failed_names_its_error() -> None:
    v = RunVerdicts(VerdictPolicy(), _time(s0="same", s1="same"), {}, [])
    failed = {
        "column": "b",
        "repeat": 1,
        "step": "s2",
        "status": "failed",
        "error": {"type": "EngineError", "message": "server died\nmore"},
    }
    result = _judge(v, ("time",), results=[failed])
    assert result.gaps[0].why == "not measured: b's step failed (server died)"


def test_a_failed_or_interrupted_run_fails_closed_even_when_every_step_is_decided() -> None:
    v = RunVerdicts(VerdictPolicy(), _time(s0="same", s1="same", s2="same"), {}, [])
    assert not _judge(v, ("time",)).gaps
    for status, said in (("interrupted", "did not finish"), ("failed", "the run failed")):
        gaps = _judge(v, ("time",), status=status).gaps
        assert len(gaps) == 1 and gaps[0].key is None and said in gaps[0].why


def test_cost_lane_steps_skipped_withheld_failed_or_unfinished_are_each_named() -> None:
    rng = random.Random(3)
    data = replays(rng, "a", 3) + replays(rng, "b", 3)
    for r in data:  # s2 counted by neither side; s1 withheld for its state (undecided)
        r["steps"] = {s: f for s, f in r["steps"].items() if s in ("s0", "s1")}
    cost = cost_verdicts(RECORD, data)
    assert cost is not None
    withheld = dataclasses.replace(
        cost.headline()[("c", "b", "s1")],
        verdict="undecided",
        reason="the counted window's engine state differs from the timed one's",
    )
    cost.metrics["estimated_cycles"][("c", "b", "s1")] = withheld
    v = RunVerdicts(VerdictPolicy(), {}, {}, [], cost)
    lane = {"skipped": {"c/s2": "a column has no measured repeat to size its window from"}}
    planned = {"planned": True, "why_not": None}
    result = _judge(v, ("cost",), lane=planned, cost_lane=lane, replays=data)
    whys = {g.key: g.why for g in result.gaps}
    assert whys[("c", "b", "s1")].startswith("undecided: the counted window's engine state")
    assert whys[("c", "b", "s2")] == (
        "not counted: a column has no measured repeat to size its window from"
    )
    # replays of b that all failed: the step is missing, with their error
    fail = {"column": "b", "replay": 4, "status": "failed", "steps": {}, "error": {"message": "x"}}
    failed = [*data, fail]
    result = _judge(v, ("cost",), lane=planned, cost_lane={}, replays=failed)
    assert "1 replay(s) of b failed (x)" in {g.key: g.why for g in result.gaps}[("c", "b", "s2")]
    # no lane.json although the lane was planned: the lane did not finish
    result = _judge(v, ("cost",), lane=planned, cost_lane=None, replays=data)
    assert any(g.key is None and "did not finish" in g.why for g in result.gaps)


def test_count_steps_limit_what_the_cost_lane_judges() -> None:
    rng = random.Random(4)
    data = replays(rng, "a", 3) + replays(rng, "b", 3)
    for r in data:
        r["steps"] = {"s0": r["steps"]["s0"]}
    v = RunVerdicts(VerdictPolicy(), {}, {}, [], cost_verdicts(RECORD, data))
    planned = {"planned": True, "why_not": None}
    result = _judge(v, ("cost",), lane=planned, cost_lane={}, replays=data, cost_steps=["s0"])
    assert not result.gaps and result.judged["cost"] == (1, 1)


def test_allow_undecided_lets_steps_through_but_not_a_lane_that_decided_nothing(
    capsys: pytest.CaptureFixture[str],
) -> None:
    v = RunVerdicts(VerdictPolicy(), _time(s0="same", s1="undecided", s2="undecided"), {}, [])
    result = _judge(v, ("time",), allow_undecided=True)
    assert not result.gaps and len(result.allowed) == 2
    assert gate(v, "slower:time", RECORD, allow_undecided=True) == 0
    err = capsys.readouterr().err
    assert "passed with --allow-undecided" in err and "not decided: 2" in err
    assert "c/s1 (b, time): undecided: why s1" in err
    none = RunVerdicts(VerdictPolicy(), _time(s0="undecided", s1="undecided"), {}, [])
    assert gate(none, "slower:time", RECORD, allow_undecided=True) == EXIT_UNJUDGED
    assert "every step is undecided" in capsys.readouterr().err


def test_slower_beats_undecided_and_names_ratio_and_interval(
    capsys: pytest.CaptureFixture[str],
) -> None:
    v = RunVerdicts(VerdictPolicy(), _time(s0="slower", s1="undecided", s2="same"), {}, [])
    assert gate(v, "slower:time", RECORD) == EXIT_SLOWER
    err = capsys.readouterr().err
    assert "FAILED, 1 step(s) slower: c/s0 (b, time) 0.800 [0.780, 0.820]" in err
    assert "also not decided: 1" in err and "c/s1 (b, time): undecided" in err


def test_the_lab_file_says_which_steps_are_judged(tmp_path: Path) -> None:
    (tmp_path / "lab.toml").write_text(
        LAB.replace("repeats = 2", 'repeats = 2\ncount_steps = ["qp100"]')
    )
    record = {**RECORD, "comparisons": [{"name": "insert", "labels": ["a", "b"]}]}
    v = RunVerdicts(VerdictPolicy(), {}, {}, [])
    planned = planned_steps(tmp_path, record, v, [])  # type: ignore[arg-type]
    assert "l.i0" in planned.time["insert"] and "qp100" in planned.time["insert"]
    assert planned.cost["insert"] == ["qp100"]


def test_an_unexpected_exception_exits_3_with_one_line_and_a_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def boom(*_: Any, **__: Any) -> Any:
        raise ZeroDivisionError("injected\nsecond line")

    monkeypatch.setattr(report_cli, "write_report", boom)
    (tmp_path / "r1").mkdir()
    (tmp_path / "r1" / "run.json").write_text("{}")
    code = main(["report", str(tmp_path / "r1"), "--results", str(tmp_path)])
    assert code == EXIT_CRASH
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "unexpected ZeroDivisionError: injected" in err
    log = Path(err.rsplit("traceback in ", 1)[1].rstrip(")"))
    assert log.parent == tmp_path and "second line" in log.read_text()


def test_help_prints_the_one_table_of_exit_statuses(capsys: pytest.CaptureFixture[str]) -> None:
    for verb in ("run", "report", "compare", "bisect"):
        with pytest.raises(SystemExit):
            main([verb, "--help"])
        out = capsys.readouterr().out
        for code, _what in TABLE:
            assert f"  {code:>3}  " in out, (verb, code)


def test_a_crashing_process_exits_3_not_1(tmp_path: Path) -> None:
    """The process's own status (what CI sees), not main()'s return value alone."""
    (tmp_path / "r1").mkdir()
    (tmp_path / "r1" / "run.json").write_text("{}")
    code = (
        "import sys\n"
        "from dbregress.cli import report\n"
        "def boom(*a, **k): raise RuntimeError('injected')\n"
        "report.write_report = boom\n"
        "from dbregress.cli.main import main\n"
        f"sys.exit(main(['report', 'r1', '--results', {str(tmp_path)!r}]))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert out.returncode == EXIT_CRASH, out.stderr
    assert "unexpected RuntimeError: injected" in out.stderr
    assert "Traceback" not in out.stderr  # one line; the traceback is in the log


def test_a_lane_that_gave_no_verdict_counts_none_of_its_steps_decided(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The summary never calls a step decided that no verdict decided."""
    v = RunVerdicts(VerdictPolicy(), _time(s0="same", s1="same", s2="same"), {}, [])
    off = {"planned": False, "why_not": "the lab file sets count = false"}
    result = _judge(v, ("time", "cost"), lane=off)
    assert result.judged == {"time": (3, 3), "cost": (0, 3)}
    record = {**RECORD, "status": "ok", "cost_lane": off}
    assert gate(v, "slower", record) == EXIT_UNJUDGED
    err = capsys.readouterr().err
    assert "time lane 3 of 3 decided, cost lane 0 of 3 decided" in err


def test_allow_undecided_names_the_lane_or_run_it_let_through(
    capsys: pytest.CaptureFixture[str],
) -> None:
    v = RunVerdicts(VerdictPolicy(), _time(s0="same", s1="same", s2="same"), {}, [])
    record = {**RECORD, "status": "interrupted"}
    assert gate(v, "slower:time", record, allow_undecided=True) == 0
    err = capsys.readouterr().err
    assert "let through, not decided: 1" in err
    assert "  time lane: the run did not finish (status interrupted)" in err


def test_a_step_in_common_the_base_never_measured_is_judged_missing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """compare's gate: a step both runs hold, failed in every base repeat, has no verdict;
    it is judged (missing, with the error), not left out of what the gate judges."""
    v = RunVerdicts(VerdictPolicy(), _time(s0="same"), {}, [])
    failed = {
        "column": "a",
        "repeat": 1,
        "step": "s1",
        "status": "failed",
        "error": {"type": "EngineError", "message": "server died"},
    }
    record = {**RECORD, "status": "ok"}
    merged = RunData(tmp_path, record, {"a/r1": [failed]})  # type: ignore[arg-type]
    assert gate(v, "slower:time", record, data=merged) == EXIT_UNJUDGED  # type: ignore[arg-type]
    assert "c/s1 (b, time): not measured: a's step failed (server died)" in capsys.readouterr().err


def test_a_comparison_its_lab_file_no_longer_names_is_judged_on_what_it_holds(
    tmp_path: Path,
) -> None:
    (tmp_path / "lab.toml").write_text(LAB)  # names the comparison "insert" only
    record = {"comparisons": [{"name": "insert", "labels": ["a", "b"]}, *RECORD["comparisons"]]}
    v = RunVerdicts(VerdictPolicy(), _time(s0="undecided"), {}, [])
    planned = planned_steps(tmp_path, record, v, [])  # type: ignore[arg-type]
    assert planned.time["c"] == ["s0"] and "qp100" in planned.time["insert"]


def test_drift_fails_a_small_change_beyond_its_limit_that_slower_cost_passes(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A 0.8% more work per operation is `same` (inside the 1% band) and small: the
    slower:cost gate passes it, drift:0.5% fails it naming the step, drift:1% passes."""
    rng = random.Random(3)
    found = replays(rng, "a", 3, sd=0.0002) + replays(rng, "b", 3, 1.008, sd=0.0002)
    cost = cost_verdicts(RECORD, found)
    assert cost is not None
    head = cost.headline()
    assert all(c.verdict == "same" and c.small for c in head.values()), head
    v = RunVerdicts(VerdictPolicy(), _qps("same"), {}, [], cost=cost)
    record = dict(RECORD)
    assert gate(v, "slower:cost", record) == 0
    capsys.readouterr()
    assert gate(v, "drift:0.5%", record) == EXIT_SLOWER
    err = capsys.readouterr().err
    assert "fail-on drift:0.5%: FAILED" in err and "beyond the drift limit" in err
    assert "s0" in err
    assert gate(v, "drift:1%", record) == 0


def test_drift_values_are_checked() -> None:
    assert report_cli.fail_on_value("drift:0.5%") == "drift:0.5%"
    assert report_cli.fail_on_value("drift:2") == "drift:2%"
    for bad in ("drift:", "drift:x%", "drift:0%", "drift:150%", "faster"):
        with pytest.raises(Exception, match=r"drift|invalid choice"):
            report_cli.fail_on_value(bad)


def test_allow_undecided_does_not_let_an_undecided_step_past_the_drift_gate(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """--allow-undecided lets undecided steps pass slower:cost; drift:P% still exits 2."""
    rng = random.Random(4)
    found = replays(rng, "a", 3, sd=0.003) + replays(rng, "b", 3, 1.003, sd=0.003)
    cost = cost_verdicts(RECORD, found)
    assert cost is not None
    assert any(c.verdict == "undecided" for c in cost.headline().values())
    v = RunVerdicts(VerdictPolicy(), _qps("same"), {}, [], cost=cost)
    record = dict(RECORD)
    assert gate(v, "slower:cost", record, allow_undecided=True) == 0
    capsys.readouterr()
    assert gate(v, "drift:0.5%", record, allow_undecided=True) == EXIT_UNJUDGED
    assert "--allow-undecided does not apply" in capsys.readouterr().err


def test_a_same_beyond_the_drift_limit_that_is_not_small_is_not_judged(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """drift:0.05% on a +0.13% that stays inside the small-change floor (an A/A across
    runs measures such offsets): the gate cannot call it drift, nor pass it: exit 2."""
    rng = random.Random(3)
    found = replays(rng, "a", 3, sd=0.0002) + replays(rng, "b", 3, 1.0013, sd=0.0002)
    cost = cost_verdicts(RECORD, found)
    assert cost is not None
    assert all(c.verdict == "same" and not c.small for c in cost.headline().values())
    v = RunVerdicts(VerdictPolicy(), _qps("same"), {}, [], cost=cost)
    assert gate(v, "drift:0.05%", dict(RECORD)) == EXIT_UNJUDGED
    assert "too close to call for drift" in capsys.readouterr().err
    assert gate(v, "drift:0.5%", dict(RECORD)) == 0
