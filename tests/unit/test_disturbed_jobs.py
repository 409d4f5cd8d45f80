"""A job whose steps all moved together, far from its column's other jobs, is left out of
the verdicts as disturbed; a change of the whole column is not."""

from __future__ import annotations

import math
import random
from typing import Any

from dbregress.analysis.compare import compare_run, disturbed_jobs, usable

STEPS = ("a", "b", "c", "d", "e")


def results(
    column: str, jobs: int, rng: random.Random, noise: float, shift: dict[int, float]
) -> list[dict[str, Any]]:
    out = []
    for rep in range(1, jobs + 1):
        for step in STEPS:
            q = 1000 * shift.get(rep, 1.0) * math.exp(rng.gauss(0, noise))
            out.append(
                {
                    "column": column,
                    "repeat": rep,
                    "step": step,
                    "status": "ok",
                    "q": {"value": q},
                    "per_op": {},
                }
            )
    return out


def test_a_job_slowed_as_a_whole_is_found_and_left_out() -> None:
    rng = random.Random(1)
    rs = results("x", 8, rng, 0.03, {3: 0.7})
    found = disturbed_jobs(rs)
    assert list(found) == [("x", 3)]
    assert "all 5 steps moved together, -30%" in found[("x", 3)]
    disturbed: list[Any] = []
    kept = usable(rs, disturbed)
    assert {r["repeat"] for r in kept} == set(range(1, 9)) - {3}
    assert [(d.column, d.repeat, d.step) for d in disturbed] == [("x", 3, "all steps")]


def test_a_whole_column_moved_is_a_change_not_a_disturbance() -> None:
    rng = random.Random(2)
    rs = results("base", 8, rng, 0.03, {}) + results(
        "new", 8, rng, 0.03, dict.fromkeys(range(9), 0.7)
    )
    assert disturbed_jobs(rs) == {}


def test_too_few_jobs_or_steps_are_not_judged() -> None:
    rng = random.Random(3)
    assert disturbed_jobs(results("x", 4, rng, 0.03, {2: 0.5})) == {}
    two_steps = [r for r in results("x", 8, rng, 0.03, {2: 0.5}) if r["step"] in ("a", "b")]
    assert disturbed_jobs(two_steps) == {}


def test_rarely_flags_an_undisturbed_job() -> None:
    """Lognormal job-to-job noise (a shared job factor plus per-step noise, 5% each), 10
    jobs per column: the rule leaves nearly every job in."""
    rng = random.Random(4)
    flagged = total = 0
    for _ in range(500):
        shift = {rep: math.exp(rng.gauss(0, 0.05)) for rep in range(1, 11)}
        flagged += len(disturbed_jobs(results("x", 10, rng, 0.05, shift)))
        total += 10
    assert flagged / total < 0.01


def test_a_step_whose_every_repeat_was_left_out_keeps_an_undecided_verdict() -> None:
    rng = random.Random(5)
    rs = results("a", 5, rng, 0.02, {}) + results("b", 5, rng, 0.02, {})
    for r in rs:
        r["host"] = {"other_cpu_frac": 0.5 if r["step"] == "c" and r["column"] == "a" else 0}
    record = {"comparisons": [{"name": "x", "labels": ["a", "b"]}]}
    v = compare_run(record, {"all": rs})
    c = v.qps[("x", "b", "c")]
    assert (c.verdict, c.n_base, c.reason) == ("undecided", 0, "no repeats of the base")
    assert [k[2] for k in v.qps] == list(STEPS)  # in the order they ran
