"""The interleaved schedule's statistics: paired slices within a repeat, a paired t-test
across repeats, on simulated samples with known truth."""

from __future__ import annotations

import math
import random

import pytest

from dbregress.analysis.paired import pair_slices, paired_all
from dbregress.analysis.verdict import Policy


def _slices(rates: list[float], secs: float = 0.1, warm: int = 0) -> list[list[float]]:
    """[t_s, slice_s, q, q_all] rows of slices at the given rates; the first `warm` are
    warm-up (nothing counted)."""
    out, t = [], 0.0
    for i, rate in enumerate(rates):
        t += secs
        q_all = rate * secs
        out.append([t, secs, 0.0 if i < warm else q_all, q_all])
    return out


def test_pairs_follow_the_turns_and_cancel_a_shared_drift() -> None:
    drift = [1000 * (1 + 0.2 * math.sin(k / 3)) for k in range(40)]  # the host moves 20%
    base = _slices(drift, warm=5)
    other = _slices([r * 0.9 for r in drift], warm=5)
    p = pair_slices(base, other)
    assert p["pairs"] == 35
    assert p["ratio"] == pytest.approx(0.9, rel=1e-9)  # drift hits both alike
    assert set(p) == {"ratio", "pairs"}  # no within-repeat error: the repeats carry it


def test_one_pair_gives_a_ratio_and_none_gives_nothing() -> None:
    p = pair_slices(_slices([100, 100], warm=1), _slices([100, 120], warm=1))
    assert p["ratio"] == pytest.approx(1.2) and p["pairs"] == 1
    p = pair_slices(_slices([100], warm=1), _slices([100], warm=1))
    assert p["ratio"] is None and p["pairs"] == 0


def test_a_side_with_fewer_slices_pairs_what_both_ran() -> None:
    p = pair_slices(_slices([100.0] * 10), _slices([110.0] * 7))
    assert p["pairs"] == 7
    assert p["ratio"] == pytest.approx(1.1)


def _lab(rng: random.Random, shift: float, sd: float, n: int, steps: int) -> dict[str, list[float]]:
    return {f"s{i}": [math.exp(rng.gauss(shift, sd)) for _ in range(n)] for i in range(steps)}


def test_a_a_labs_rarely_claim_a_change() -> None:
    rng = random.Random(7)
    policy = Policy(alpha=0.05, band=0.05)
    labs = 2000
    alarms = 0
    for _ in range(labs):
        found = paired_all(_lab(rng, 0.0, 0.01, 3, 10), policy)
        alarms += any(c.verdict in ("slower", "faster") for c in found.values())
    assert alarms / labs <= 0.07  # BH at 5% over ten steps, all null


@pytest.mark.parametrize("n", [3, 5])
def test_a_ten_percent_slowdown_is_slower_with_few_repeats(n: int) -> None:
    rng = random.Random(n)
    policy = Policy(alpha=0.05, band=0.05)
    decided = 0
    trials = 500
    for _ in range(trials):
        found = paired_all(_lab(rng, math.log(0.9), 0.01, n, 10), policy)
        decided += sum(c.verdict == "slower" for c in found.values())
    assert decided / (trials * 10) >= 0.9


def test_tight_equal_repeats_are_same_and_few_are_undecided() -> None:
    policy = Policy(alpha=0.05, band=0.05)
    found = paired_all(
        {"tight": [1.001, 0.999, 1.002], "one": [0.8], "none": [], "wide": [0.8, 1.3, 1.0]},
        policy,
    )
    assert found["tight"].verdict == "same"
    assert found["one"].verdict == "undecided" and found["one"].ratio == 0.8
    assert found["none"].verdict == "undecided" and found["none"].ratio is None
    assert found["wide"].verdict == "undecided"
    assert found["wide"].more_repeats is None or found["wide"].more_repeats > 0


def test_the_repeat_test_holds_its_level_with_noisy_repeats() -> None:
    """Each repeat's log ratio = a between-repeat effect + its slices' error; the
    one-sample t on the repeats' ratios holds alpha with 3 repeats without being told
    either variance (what a separate within-repeat error would have added)."""
    rng = random.Random(23)
    policy = Policy(alpha=0.05, band=0.001)
    alarms = total = 0
    for _ in range(300):
        lab = {
            f"s{i}": [math.exp(rng.gauss(0, 0.02) + rng.gauss(0, 0.01)) for _ in range(3)]
            for i in range(5)
        }
        found = paired_all(lab, policy)
        alarms += sum(c.verdict in ("slower", "faster") for c in found.values())
        total += len(found)
    assert alarms / total <= 0.05, alarms
