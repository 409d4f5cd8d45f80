"""The cost lane's statistics on simulated replays: false alarms over many A/A labs,
power for small changes with three replays a side, and the rules that refuse to guess."""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Sequence
from typing import Any

import pytest

from dbregress.analysis.compare import RunVerdicts
from dbregress.analysis.cost import MIN_SD, compare_counts, cost_verdicts, needs_more
from dbregress.analysis.cost_floors import replay_noise
from dbregress.analysis.cost_stats import cluster_gap, pooled_log_sd, spread
from dbregress.cli.report import gate
from dbregress.lab.file import VerdictPolicy

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
    labs, alarms, same = 120, 0, 0
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
    hits = sum(v == word for _ in range(40) for v in verdicts(rng, factor))
    assert hits >= 0.9 * 40 * len(STEPS), hits


def test_a_wide_spread_without_clusters_is_the_welch_tests_to_judge() -> None:
    rng = random.Random(3)
    found = verdicts(rng, 1.0, sd=0.03)  # replays ~5% apart: no claim either way
    assert "slower" not in found and "faster" not in found and "same" not in found
    found = verdicts(rng, 1.0, n=5, sd=0.03)
    assert "slower" not in found and "faster" not in found and "same" not in found
    found = verdicts(rng, 1.5, n=5, sd=0.03)  # a 50% change stands out of that spread
    assert set(found) == {"slower"}, found


def test_identical_replays_do_not_claim_infinite_precision() -> None:
    rng = random.Random(5)
    found = cost_verdicts(RECORD, replays(rng, "a", 3, sd=0) + replays(rng, "b", 3, 1.001, sd=0))
    assert found is not None
    c = found.headline()[("c", "b", "s0")]
    assert c.verdict == "same"  # 0.1% is inside the band, and the floor keeps a real interval
    assert c.ci is not None and c.ci[1] - c.ci[0] > MIN_SD
    assert c.noise == MIN_SD and c.noise_from == "minimum"


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


def test_three_replays_that_split_are_undecided_five_decide() -> None:
    """A side whose replays split into two states asks for more replays of both sides
    (settled: count_replays_max); with that many, half the clusters' gap floors the
    spread and the Welch interval decides."""
    rng = random.Random(13)
    decided = alarms = labs = 0
    for _ in range(40):
        a, b = state_replays(rng, "a", 5, 1.0), state_replays(rng, "b", 5, 1.08)
        three = cost_verdicts(RECORD, a[:3] + b[:3])
        five = cost_verdicts(RECORD, a + b, settled=5)
        assert three is not None and five is not None
        for s in STEPS:
            c3, c5 = three.headline()[("c", "b", s)], five.headline()[("c", "b", s)]
            x, y = (
                [r["steps"][s]["per_op"]["estimated_cycles"] for r in side[:3]] for side in (a, b)
            )
            if cluster_gap(x, 0.01) or cluster_gap(y, 0.01):
                assert c3.verdict == "undecided" and "clusters" in c3.reason
                assert needs_more([x, y], 0.01)
            decided += c5.verdict == "slower"
        aa = cost_verdicts(
            RECORD, state_replays(rng, "a", 5, 1.0) + state_replays(rng, "b", 5, 1.0)
        )
        assert aa is not None
        alarms += any(c.verdict in ("slower", "faster") for c in aa.headline().values())
        labs += 1
    assert decided >= 0.99 * 40 * len(STEPS), decided  # an 8% change, 1.7% state noise
    assert alarms / labs <= 0.05, alarms  # A/A labs of ten steps under the same noise


def two_state_lab(
    rng: random.Random, low: Sequence[bool], gap: float, start: int, change: float = 0.0
) -> str:
    """One step of a simulated lab, as the lane runs it: `start` replays a side, both
    sides extended to 5 where `needs_more` says so (clusters, spread, or an
    undecided verdict); `low`: which of the ten replays
    (five a side) count in the low state, gap lower; 0.02% jitter within a state."""
    levels = [1.0] * 5 + [1.0 + change] * 5
    values = [
        v * math.exp(-gap * s + rng.gauss(0, 0.0002)) for v, s in zip(levels, low, strict=True)
    ]
    x, y = values[:5], values[5:]
    first = (x[:start], y[:start])
    n = 5 if needs_more(first, 0.01, [first]) else start
    return compare_counts(x[:n], y[:n], settled=5).verdict


@pytest.mark.parametrize("start", [3, 5])
@pytest.mark.parametrize("gap", [0.01, 0.017, 0.02])
def test_two_count_states_give_false_verdicts_at_most_alpha(start: int, gap: float) -> None:
    """A/A where the count takes two states gap apart, in any mixture (each replay low
    with probability p, 0 < p <= 0.5): the false `slower` or `faster` rate, exact over
    all 1,024 patterns of states of the ten replays, is at most alpha (bench/
    cost_noise.py simulates 10,000 labs per setting)."""
    rng = random.Random(int(1000 * gap) + start)
    patterns = list(itertools.product((False, True), repeat=10))
    false = [two_state_lab(rng, low, gap, start) in ("slower", "faster") for low in patterns]
    for p in (0.05, 0.1, 0.2, 0.3, 1 / 3, 0.4, 0.5):
        rate = sum(
            math.prod(p if s else 1 - p for s in low)
            for low, f in zip(patterns, false, strict=True)
            if f
        )
        # one state on each side, different (2 (p(1-p))^3 at three replays) is all
        # that is left: the rate peaks at p = 0.5, 4.3% from three replays, 2.2% from five
        assert rate <= 0.05, (p, rate)


def test_real_changes_are_found_and_equal_builds_are_same() -> None:
    rng = random.Random(17)
    one = [False] * 10
    same = [two_state_lab(rng, one, 0.0, 3) for _ in range(300)]
    assert same.count("same") >= 0.95 * len(same)
    five = [two_state_lab(rng, one, 0.0, 3, 0.05) for _ in range(300)]
    assert five.count("slower") >= 0.99 * len(five)
    states = [[rng.random() < 1 / 3 for _ in range(10)] for _ in range(300)]
    three = [two_state_lab(rng, low, 0.017, 3, 0.03) for low in states]
    assert three.count("slower") >= 0.9 * len(three)  # 3% under 1.7% two-state noise


def test_a_calibration_floor_catches_one_state_each_side() -> None:
    """Three base replays in the high state, three column replays in the low one: the
    run alone cannot tell it from a real 1.7% change; the step's A/A calibration spread
    (or its history's) can."""
    x, y = [1.0, 1.0001, 0.9999], [0.983, 0.9831, 0.9829]
    assert compare_counts(x, y).verdict == "faster"
    known = [("the A/A calibration", 0.008)]
    c = compare_counts(x, y, known_sd=known)
    assert c.verdict == "undecided" and c.noise == 0.008
    assert "calibration" in c.reason


def test_one_side_settled_and_the_other_not_is_undecided() -> None:
    """The lane extends both sides of a split step; a run whose other side stayed at
    three replays is not judged on the settled side's five."""
    x = [1.0, 1.0, 1.0, 0.983, 1.0]
    y = [0.983, 0.9831, 0.9829]
    c = compare_counts(x, y, settled=5)
    assert c.verdict == "undecided" and "both sides need 5" in c.reason


def test_replay_noise_pools_each_builds_spread_and_feeds_the_verdicts() -> None:
    rng = random.Random(19)
    aa = state_replays(rng, "a", 5, 1.0) + state_replays(rng, "b", 5, 1.0)
    noise = replay_noise([(RECORD, aa)])
    sd = noise["estimated_cycles"]["c/s0"]
    by_hand = pooled_log_sd(
        [
            [r["steps"]["s0"]["per_op"]["estimated_cycles"] for r in aa if r["column"] == col]
            for col in ("a", "b")
        ]
    )
    assert sd == pytest.approx(by_hand) and sd > 0.001  # the two states' spread
    run = replays(rng, "a", 3, sd=0.0001) + replays(rng, "b", 3, 0.99, sd=0.0001)
    found = cost_verdicts(RECORD, run, calibration=noise)
    assert found is not None
    c = found.headline()[("c", "b", "s0")]
    assert c.noise == pytest.approx(sd) and c.noise_from == "the A/A calibration"
    # a bare step name applies to every comparison; history is the other source
    found = cost_verdicts(RECORD, run, history={"estimated_cycles": {"s1": 0.02}})
    assert found is not None
    c = found.headline()[("c", "b", "s1")]
    assert c.noise == 0.02 and c.noise_from == "history"


def test_an_undecided_step_asks_for_more_replays() -> None:
    """Replays that agree within the band but leave the interval across its edge (a
    RocksDB fwdrange A/A: glibc malloc's state, left by background threads, moves a
    replay's count by up to 0.9%) ask for more replays instead of standing as
    `undecided`; replays that decide do not."""
    x, y = [81700.0, 82100.0, 82500.0], [81900.0, 82300.0, 82700.0]
    assert spread(x) < 0.01 and spread(y) < 0.01
    assert compare_counts(x, y).verdict == "undecided"
    assert needs_more([x, y], 0.01, [(x, y)])
    assert not needs_more([x, y], 0.01)  # without the pair: no clusters, no spread
    # two more replays a side, as spread as the first three, decide
    x5, y5 = [*x, 82000.0, 82300.0], [*y, 82100.0, 82200.0]
    assert compare_counts(x5, y5, settled=5).verdict == "same"
    steady = [82000.0, 82010.0, 81995.0]
    assert compare_counts(steady, steady).verdict == "same"
    assert not needs_more([steady, steady], 0.01, [(steady, steady)])
