"""The drift ledger on simulated replays: each column's cumulative change and its
increment, their classes, the product of the increments against the total, and the
drift limit (analysis/ledger.py)."""

from __future__ import annotations

import math
import random
from typing import Any, cast

from dbregress.analysis import ledger as lg
from dbregress.analysis.ledger import Ledger, Point
from dbregress.lab.file import VerdictPolicy
from dbregress.shapes.replay import ReplayRecord
from dbregress.shapes.run import ComparisonEntry, RunJson

STEPS = ("qp100", "l.i1")


def replays(rng: random.Random, label: str, factor: float, n: int = 3) -> list[dict[str, Any]]:
    out = []
    for k in range(1, n + 1):
        steps = {}
        for i, s in enumerate(STEPS):
            value = 1e6 * (i + 1) * factor * math.exp(rng.gauss(0, 0.0002))
            steps[s] = {"per_op": {"estimated_cycles": value, "instructions": value / 2}}
        out.append(
            {"comparison": "c", "column": label, "replay": k, "status": "ok", "steps": steps}
        )
    return out


def ledger_of(factors: dict[str, float], seed: int = 1) -> Ledger:
    rng = random.Random(seed)
    labels = list(factors)
    comp = cast(ComparisonEntry, {"name": "c", "benchmark": "insert", "labels": labels})
    record = cast(RunJson, {"run_id": "r", "comparisons": [comp], "columns": []})
    found = cast(list[ReplayRecord], [r for lb, f in factors.items() for r in replays(rng, lb, f)])
    cells = lg.cost_cells(record, found, comp, labels, VerdictPolicy())
    points = [Point("r", lb, f"null@{lb}") for lb in labels]
    rows = lg.rows_of("c", "cost", "estimated_cycles", points, cells, labels, list(STEPS))
    return Ledger("r", None, tuple(rows))


def test_two_equal_small_increments_are_named_and_add_up_to_the_total() -> None:
    found = ledger_of({"base": 1.0, "plus4": 1.004, "plus8": 1.008})
    row = next(r for r in found.rows if r.step == "qp100")
    _, first, second = row.points
    assert first.increment is not None and second.increment is not None
    assert first.increment.word == "small" and second.increment.word == "small"
    assert abs(first.increment.ratio - second.increment.ratio) < 0.001  # type: ignore[operator]
    assert second.cumulative is not None and second.cumulative.word == "small"
    assert row.product is not None and row.total is not None and row.total.ratio is not None
    # exp(mean log) ratios telescope: the increments' product is the total
    assert abs(row.remainder or 0) < 1e-12
    assert abs(row.product - 1.008) < 0.0005


def test_the_drift_limit_names_the_step_beyond_it_with_its_contributors() -> None:
    found = ledger_of({"base": 1.0, "plus4": 1.004, "plus8": 1.008})
    beyond = lg.drift(found, 0.005)
    assert {d.row.step for d in beyond} == {"qp100", "l.i1"}
    assert {d.point.column for d in beyond} == {"plus8"}
    assert [p.column for p in beyond[0].contributors] in (["plus4", "plus8"], ["plus8", "plus4"])
    assert lg.drift(found, 0.02) == []


def test_an_improvement_then_a_regression_shows_both_increments() -> None:
    found = ledger_of({"base": 1.0, "better": 0.995, "worse": 1.02})
    row = next(r for r in found.rows if r.step == "qp100")
    words = [p.increment.word for p in row.points[1:] if p.increment is not None]
    assert words == ["small", "slower"]
    assert row.points[2].cumulative is not None
    assert row.points[2].cumulative.word == "slower"


def test_equal_columns_are_same_everywhere() -> None:
    found = ledger_of({"a": 1.0, "b": 1.0, "c": 1.0})
    for row in found.rows:
        for p in row.points[1:]:
            assert p.cumulative is not None and p.cumulative.word == "same"
            assert p.increment is not None and p.increment.word == "same"


def test_an_increment_that_moved_names_the_function_that_moved() -> None:
    from dbregress.analysis.functions_moved import functions_moved

    rng = random.Random(2)
    found = [
        *replays(rng, "base", 1.0),
        *replays(rng, "plus", 1.004),
    ]
    for r in found:
        for figures in r["steps"].values():
            extra = 4000.0 if r["column"] == "plus" else 0.0
            figures["functions"] = {
                "ExecScan (postgres)": 300_000.0,
                "send (libsendcost.so)": 30_000.0 + extra,
                "memcpy (libc.so.6)": 20_000.0,
            }
            figures["per_op"]["instructions"] += extra
    moved = functions_moved(cast(list[ReplayRecord], found), "base", "plus", "qp100")
    assert moved[0].function == "send (libsendcost.so)"
    assert moved[0].ratio is not None and abs(moved[0].ratio - 34_000 / 30_000) < 1e-9
    assert "+4,000 instr/op (+13.3%)" in moved[0].words()
    led = ledger_of_replays(found, ["base", "plus"])
    inc = next(r for r in led.rows if r.step == "qp100").points[1].increment
    assert inc is not None and inc.word == "small"
    assert inc.functions and inc.functions[0].function == "send (libsendcost.so)"


def ledger_of_replays(found: list[dict[str, Any]], labels: list[str]) -> Ledger:
    comp = cast(ComparisonEntry, {"name": "c", "benchmark": "insert", "labels": labels})
    record = cast(RunJson, {"run_id": "r", "comparisons": [comp], "columns": []})
    typed = cast(list[ReplayRecord], found)
    cells = lg.cost_cells(record, typed, comp, labels, VerdictPolicy())
    points = [Point("r", lb, f"null@{lb}") for lb in labels]
    rows = lg.rows_of("c", "cost", "estimated_cycles", points, cells, labels, list(STEPS))
    return Ledger("r", None, tuple(rows))


def test_drift_is_judged_on_decided_figures_only_and_says_what_it_could_not_judge() -> None:
    from dbregress.analysis.ledger import Cell, Row

    def point(col: str, word: str, lo: float, hi: float) -> Point:
        cell = Cell((lo + hi) / 2, (lo, hi), word)
        return Point("r", col, "b", cumulative=cell, increment=cell)

    withheld = Row(
        "c",
        "s",
        "cost",
        "estimated_cycles",
        (Point("r", "a", "b"), point("x", "undecided", 1.006, 1.010)),
    )
    found = Ledger("r", None, (withheld,))
    assert lg.drift(found, 0.005) == []  # an undecided (withheld) figure is no drift ...
    assert lg.drift_gaps(found) == ["c/s x: undecided ()"]  # ... but a gap
    within = Row(
        "c",
        "s",
        "cost",
        "estimated_cycles",
        (Point("r", "a", "b"), point("x", "same", 1.0009, 1.0018)),
    )
    assert lg.drift(Ledger("r", None, (within,)), 0.0005) == []  # inside the floor
    # ... so beyond a limit below the floor it is too close to call: a gap, never a pass
    # (docs/ledger.md, "Gating on drift"; the report's gate says the same)
    (close,) = lg.drift_gaps(Ledger("r", None, (within,)), limit=0.0005)
    assert close.startswith("c/s x: beyond the drift limit but not a small change")
    assert lg.drift_gaps(Ledger("r", None, (within,)), limit=0.005) == []
    small = Row(
        "c",
        "s",
        "cost",
        "estimated_cycles",
        (Point("r", "a", "b"), point("x", "small", 1.0045, 1.0055)),
    )
    assert lg.drift_gaps(Ledger("r", None, (small,)), limit=0.005) == []  # a small is judged
    assert lg.drift_gaps(Ledger("r", None, ())) != []  # no cost row: not judged


def test_the_same_function_of_two_versions_is_one() -> None:
    from dbregress.analysis.functions_moved import same_function

    assert same_function("Get (librocksdb.so.7.10.2)") == same_function(
        "Get (librocksdb.so.10.2.1)"
    )
    assert same_function("dispatch_command (mariadbd)") == "dispatch_command (mysqld)"


def test_a_lab_run_that_could_not_be_read_keeps_the_drift_gate_from_passing() -> None:
    from dbregress.report.ledger_text import gaps

    found = ledger_of({"base": 1.0, "same": 1.0})
    assert gaps(found) == []
    unread = Ledger("lab", found.rows[0].points[0], found.rows, ("r3: not read (gone)",))
    assert gaps(unread) == ["r3: not read (gone)"]


def test_an_interleaved_runs_time_increment_is_over_the_column_before_not_the_runs_base() -> None:
    """Each result of an interleaved run is paired at run time with the run's base
    (`paired.base`); the ledger's time-lane increment judges [before, label] as a
    comparison of its own, so its ratio must be label over before in each repeat. It
    was label over the run's base (the increments equalled the cumulative changes: seen
    in the seed003 study, product of the increments -48.7% against a total of -15.2%)."""
    from dbregress.analysis.compare import compare_run
    from tests.step_records import native
    from tests.unit.test_report import step

    rng = random.Random(3)
    level = {"a": 1.0, "b": 0.90, "c": 0.81}  # each column 10% slower than the one before
    results = []
    for repeat in range(1, 7):
        for label, factor in level.items():
            ratio = factor * math.exp(rng.gauss(0, 0.002))
            r = step(label, "qp100", 1000.0 * ratio, "ops", 5.0, repeat=repeat)
            r["slices"] = [[0.0, 1.0, 1000.0 * ratio, 1000.0 * ratio]]  # one whole turn
            if label != "a":
                r["paired"] = {"base": f"a/r{repeat}", "ratio": ratio, "pairs": 10}
            results.append(native(r).to_json())
    comp = {"name": "c", "benchmark": "insert", "labels": ["b", "c"]}
    record = cast(RunJson, {"run_id": "r", "schedule": "interleaved", "comparisons": [comp]})
    found = compare_run(record, {"all": results})
    verdict = found.qps[("c", "c", "qp100")]
    assert abs(verdict.ratio - 0.90) < 0.01, verdict.ratio
    assert verdict.verdict == "slower"
    whole = cast(RunJson, {**record, "comparisons": [{**comp, "labels": ["a", "b", "c"]}]})
    assert abs(compare_run(whole, {"all": results}).qps[("c", "c", "qp100")].ratio - 0.81) < 0.01


def test_an_increment_leaves_out_a_repeat_whose_column_before_measured_no_whole_turn() -> None:
    """The column before is paired with the column slice by slice, as the run paired
    each with its base: a repeat where it measured no whole turn (stalled, or its q
    short of q_all) has no ratio, and one where it did not run in that round has no
    pair; neither is turned into a ratio."""
    from dbregress.analysis.compare import _paired

    def result(label: str, repeat: int, q: float, q_all: float | None = None) -> Any:
        r = {"column": label, "repeat": repeat, "step": "s", "slices": [[0.0, 1.0, q, q_all or q]]}
        if label != "a":
            r["paired"] = {"base": f"a/r{repeat}", "ratio": q, "pairs": 1}
        return r

    results = [result("a", k, 1.0) for k in (1, 2, 3, 4)]
    results += [result("c", k, 0.81) for k in (1, 2, 3, 4)]
    results += [result("b", 1, 0.9), result("b", 2, 0.45, 0.9)]  # r2: a turn not whole
    results += [result("b", 3, 0.0)]  # r3 stalled; r4: b did not run in that round
    found = _paired([("x", "c", "s")], results, {"x": "b"})
    assert found[("x", "c", "s")][0] == 0.81 / 0.9
    assert found[("x", "c", "s")][1:] == [None, None]  # no ratio: left out downstream
    assert _paired([("x", "c", "s")], results, {"x": "a"})[("x", "c", "s")] == [0.81] * 4
