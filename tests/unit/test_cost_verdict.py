"""The cost lane's statistics on simulated replays: false alarms over many A/A labs,
power for small changes with three replays a side, and the rules that refuse to guess."""

from __future__ import annotations

import math
import random
from typing import Any

import pytest

from dbregress.analysis.compare import RunVerdicts
from dbregress.analysis.cost import FLOOR_SD, cost_verdicts
from dbregress.cli.report import gate
from dbregress.lab import VerdictPolicy

STEPS = [f"s{i}" for i in range(10)]
RECORD = {"comparisons": [{"name": "c", "labels": ["a", "b"]}]}


def replays(
    rng: random.Random, label: str, n: int, factor: float = 1.0, sd: float = 0.002
) -> list[dict[str, Any]]:
    """n replays of one column: every step's counts a lognormal draw around its level."""
    out = []
    for k in range(1, n + 1):
        steps = {}
        for i, s in enumerate(STEPS):
            level = 1000.0 * (i + 1) * factor
            value = level * math.exp(rng.gauss(0, sd))
            per_op = {
                "estimated_cycles": value,
                "instructions": value / 2,
                "i1_misses": 1.0,
                "d1_read_misses": 2.0,
                "d1_write_misses": 1.0,
                "ll_read_misses": 0.5,
                "ll_write_misses": 0.1,
                "branch_mispredictions": 3.0,
                "system_calls": 2.0,
            }
            steps[s] = {"per_op": per_op, "background_per_op": {"estimated_cycles": 10.0}}
        out.append({"column": label, "replay": k, "status": "ok", "steps": steps})
    return out


def verdicts(rng: random.Random, factor: float, n: int = 3, sd: float = 0.002) -> list[str]:
    found = cost_verdicts(RECORD, replays(rng, "a", n, 1.0, sd) + replays(rng, "b", n, factor, sd))
    assert found is not None
    return [found.headline()[("c", "b", s)].verdict for s in STEPS]


def test_aa_labs_give_no_false_alarm_and_mostly_same() -> None:
    rng = random.Random(7)
    labs, alarms, same = 300, 0, 0
    for _ in range(labs):
        found = verdicts(rng, 1.0)
        alarms += any(v in ("slower", "faster") for v in found)
        same += found.count("same")
    # BH at 5% bounds the chance of any false verdict in an A/A lab by 5%
    assert alarms / labs <= 0.05, alarms
    assert same / (labs * len(STEPS)) >= 0.9, same


@pytest.mark.parametrize("factor,word", [(1.02, "slower"), (0.98, "faster"), (1.015, "slower")])
def test_small_changes_are_decided_with_three_replays(factor: float, word: str) -> None:
    rng = random.Random(11)
    hits = sum(v == word for _ in range(100) for v in verdicts(rng, factor))
    assert hits >= 0.9 * 100 * len(STEPS), hits


def test_replays_that_disagree_beyond_the_band_are_undecided() -> None:
    rng = random.Random(3)
    found = verdicts(rng, 1.5, sd=0.05)  # replays 5% apart: the count is not settled
    assert set(found) == {"undecided"}


def test_identical_replays_do_not_claim_infinite_precision() -> None:
    rng = random.Random(5)
    found = cost_verdicts(RECORD, replays(rng, "a", 3, sd=0) + replays(rng, "b", 3, 1.001, sd=0))
    assert found is not None
    c = found.headline()[("c", "b", "s0")]
    assert c.verdict == "same"  # 0.1% is inside the band, and the floor keeps a real interval
    assert c.ci is not None and c.ci[1] - c.ci[0] > FLOOR_SD


def test_one_replay_a_side_is_undecided_and_named() -> None:
    rng = random.Random(5)
    found = cost_verdicts(RECORD, replays(rng, "a", 1) + replays(rng, "b", 3, 1.2))
    assert found is not None
    c = found.headline()[("c", "b", "s0")]
    assert c.verdict == "undecided" and "fewer than 2" in c.reason


def test_the_band_is_the_labs() -> None:
    rng = random.Random(9)
    wide = VerdictPolicy(cost_band=0.05)
    data = replays(rng, "a", 3) + replays(rng, "b", 3, 1.03)
    found = cost_verdicts(RECORD, data, wide)
    assert found is not None and found.headline()[("c", "b", "s0")].verdict == "same"


def test_no_replays_no_lane() -> None:
    assert cost_verdicts(RECORD, []) is None


@pytest.mark.parametrize(
    "fail_on,code", [("slower", 1), ("slower:cost", 1), ("slower:time", 2), (None, 0)]
)
def test_the_gate_names_the_lane(
    fail_on: str | None, code: int, capsys: pytest.CaptureFixture[str]
) -> None:
    rng = random.Random(1)
    cost = cost_verdicts(RECORD, replays(rng, "a", 3) + replays(rng, "b", 3, 1.2))
    v = RunVerdicts(VerdictPolicy(), {}, {}, [], cost)
    assert gate(v, fail_on, RECORD) == code
    err = capsys.readouterr().err
    if code == 1:
        assert f"fail-on {fail_on}: FAILED" in err and "(b, cost)" in err
    elif code == 2:  # this run has no time-lane verdict: the gate cannot pass on it
        assert f"fail-on {fail_on}: NOT JUDGED, time lane:" in err


def state_replays(rng: random.Random, label: str, n: int, factor: float) -> list[dict[str, Any]]:
    """Replays whose count depends on a discrete state at the window: one in three
    without a memtable switch, 1.7% less work (RocksDB overwriteandwait, measured)."""
    out = replays(rng, label, n, factor, sd=0.001)
    for r in out:
        if rng.random() < 1 / 3:
            for figures in r["steps"].values():
                figures["per_op"]["estimated_cycles"] *= 0.983
                figures["per_op"]["instructions"] *= 0.983
    return out


def test_three_replays_that_disagree_are_undecided_five_decide() -> None:
    """The lane adds replays up to count_replays_max (settled) where a side's disagree;
    with that many the Welch interval carries the disagreement."""
    rng = random.Random(13)
    decided = alarms = labs = 0
    for _ in range(200):
        a, b = state_replays(rng, "a", 5, 1.0), state_replays(rng, "b", 5, 1.08)
        three = cost_verdicts(RECORD, a[:3] + b[:3])
        five = cost_verdicts(RECORD, a + b, settled=5)
        assert three is not None and five is not None
        for s in STEPS:
            c3, c5 = three.headline()[("c", "b", s)], five.headline()[("c", "b", s)]
            if max(c3.spread) > 0.01:
                assert c3.verdict == "undecided" and "disagree" in c3.reason
            decided += c5.verdict == "slower"
        aa = cost_verdicts(
            RECORD, state_replays(rng, "a", 5, 1.0) + state_replays(rng, "b", 5, 1.0)
        )
        assert aa is not None
        alarms += any(c.verdict in ("slower", "faster") for c in aa.headline().values())
        labs += 1
    assert decided >= 0.99 * 200 * len(STEPS), decided  # an 8% change, 1.7% state noise
    assert alarms / labs <= 0.05, alarms  # A/A labs under the same noise
