"""One method per figure in the cost lane: `cost_verdicts` never pools the replays of a
step counted by two methods (count keys) or in two scopes (engine-calls, sessions,
engine); it keeps one and says how many it left out, and a history point whose samples
mix methods is a point of its own."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from dbregress.analysis.cost import cost_verdicts
from dbregress.method import identity as method
from dbregress.store.history import History, method_segments, reindex
from dbregress.store.replays import save_replay
from tests.unit.test_noise_floor import a_run, counted

RECORD: dict[str, Any] = {
    "run_id": "r",
    "lab": "nightly",
    "comparisons": [{"name": "insert", "benchmark": "insert", "labels": ["base", "head"]}],
    "builds": {},
    "method_identity": method.identity(),
}
KEY = ("insert", "head", "l.i0")


def judged(replays: list[dict[str, Any]]) -> Any:
    found = cost_verdicts(RECORD, replays)  # type: ignore[arg-type]
    assert found is not None
    return found.headline()[KEY]


def test_replays_of_another_scope_are_left_out_and_named() -> None:
    """A base replay whose engine-call split fell back to the whole engine (scope
    "engine") counts the loadgen's loop too: pooled, it would move the base by 10%."""
    replays = [counted("base", n, 10000.0, scope="engine-calls") for n in (1, 2, 3)]
    replays += [counted("head", n, 10000.0, scope="engine-calls") for n in (1, 2, 3)]
    replays.append(counted("base", 4, 11000.0, scope="engine"))
    c = judged(replays)
    assert c.replays == (3, 3) and c.base == 10000.0 and c.verdict == "same"
    assert c.left_out.startswith("1 replay(s) left out") and "scope engine)" in c.left_out
    assert "scope engine-calls" in c.left_out and c.left_out in c.reason


def test_replays_of_another_method_are_left_out_and_the_runs_own_is_kept() -> None:
    other = {**method.identity(), "valgrind": "valgrind-3.99.0"}
    replays = [counted("base", n, 10000.0) for n in (1, 2, 3)]
    replays += [counted("head", n, 10000.0) for n in (1, 2)]
    replays += [counted("head", n, 10300.0, identity=other) for n in (3, 4, 5)]
    replays += [counted("base", n, 10300.0, identity=other) for n in (4, 5)]
    c = judged(replays)
    # Both methods have replays on both sides; the run's own method is kept, though the
    # other has as many replays: never the two pooled (which would read as +1.8%).
    assert c.replays == (3, 2) and c.value == 10000.0 and c.verdict == "same"
    assert c.left_out.startswith("5 replay(s) left out")
    assert f"method {method.count_key(other)}" in c.left_out
    # Replays of one method and scope: nothing left out.
    alike = [counted(s, n, 10000.0 + n) for s in ("base", "head") for n in (1, 2, 3)]
    assert judged(alike).left_out == ""


def test_a_side_with_no_replay_of_the_kept_method_is_undecided_with_the_reason() -> None:
    other = {**method.identity(), "libc": "glibc 9.99"}
    replays = [counted("base", n, 10000.0) for n in (1, 2, 3)]
    replays += [counted("head", n, 10000.0) for n in (1,)]
    replays += [counted("head", n, 10000.0, identity=other) for n in (2, 3)]
    c = judged(replays)
    assert c.verdict == "undecided" and c.replays == (3, 1)
    assert "fewer than 2 ok replays of the column" in c.reason and "left out" in c.reason


def test_a_history_point_of_two_methods_stands_alone(tmp_path: Path) -> None:
    """The point's method is that of its samples, not its first row's: a run whose
    replays were counted by two methods is a segment of its own."""
    root = tmp_path / "results"
    for day in (1, 2):
        a_run(root, tmp_path, f"night-{day}", day, {"base": [1e4] * 3, "head": [1e4] * 3})
    mixed = a_run(root, tmp_path, "night-3", 3, {"base": [1e4] * 3, "head": [1e4] * 3})
    other = {**method.identity(), "valgrind": "valgrind-3.99.0"}
    save_replay(mixed, "head", 3, counted("head", 3, 1e4, identity=other))  # type: ignore[arg-type]
    assert reindex(root) == []
    with History(root) as h:
        (series,) = [s for s in h.series("nightly", lane="cost") if s.column == "head"]
    points = {p.run_id: p.method for p in series.points}
    # a cost point's method: the count key and the replays' scope (a scope is a method)
    one = f"{method.count_key(method.identity())} scope sessions"
    assert points["night-1"] == points["night-2"] == one
    assert points["night-3"] is not None and points["night-3"].startswith("mixed:")
    assert [len(s.points) for s in method_segments(series)] == [2, 1]
