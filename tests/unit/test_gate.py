"""--fail-on fails closed: a gate that names a lane passes only when that lane judged
the run; a lane that did not run, did not finish or decided nothing exits 2 with the
reason on one line."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

from dbregress.analysis.compare import RunVerdicts, lane_gaps
from dbregress.analysis.cost import cost_verdicts
from dbregress.analysis.verdict import StepVerdict
from dbregress.cli.report import EXIT_SLOWER, EXIT_UNJUDGED, gate
from dbregress.lab import VerdictPolicy, load_lab
from dbregress.store.run import RunWriter, read_record
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
