"""Verdicts: the rules on small examples, and their error rates on simulated labs."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dbregress.analysis.metrics import Better
from dbregress.analysis.verdict import Policy, StepVerdict, compare_all, repeats_to_decide

POLICY = Policy()
Samples = dict[int, tuple[list[float], list[float]]]


def one(
    base: list[float], other: list[float], better: Better = "higher", metric: bool = False
) -> StepVerdict:
    return compare_all({"k": (base, other)}, POLICY, better, metric=metric)["k"]


def lab(rng: np.random.Generator, steps: int, n: int, cv: float, ratio: float = 1.0) -> Samples:
    """Independent lognormal repeats: n per side per step, the column `ratio` times the base."""
    sd = math.sqrt(math.log1p(cv**2))
    return {
        s: (
            list(1000 * np.exp(rng.normal(0, sd, n))),
            list(1000 * ratio * np.exp(rng.normal(0, sd, n))),
        )
        for s in range(steps)
    }


def verdicts(samples: Samples) -> list[str]:
    return [c.verdict for c in compare_all(samples, POLICY).values()]


def test_clear_changes_and_their_words() -> None:
    base, slow = [100.0, 101, 99, 100.5, 99.5], [90.0, 91, 89, 90.5, 89.5]
    c = one(base, slow)
    assert (c.verdict, c.effect) == ("slower", "worse")
    assert c.ratio == pytest.approx(0.9, abs=0.005)
    assert c.p_value == pytest.approx(2 / 252)
    assert c.ci is not None and c.ci[0] < 0.9 < c.ci[1] < 0.95
    assert c.ci_confidence == pytest.approx(1 - 8 / 252)
    assert c.reason.startswith("Mann-Whitney p=0.0079") and c.more_repeats is None
    assert one(slow, base).verdict == "faster"
    # a time per operation: lower is better, so a higher value is slower
    assert one(base, slow, better="lower").verdict == "faster"
    cpu = one(base, slow, better="lower", metric=True)
    assert (cpu.verdict, cpu.effect) == ("lower", "better")
    ops = one(base, slow, better="higher", metric=True)
    assert (ops.verdict, ops.effect) == ("lower", "worse")


def test_same_takes_precedence_over_a_tiny_real_change() -> None:
    base = [100.0, 100.1, 99.9, 100.05, 99.95, 100.02, 99.98, 100.03]
    c = one(base, [v * 0.99 for v in base])
    assert c.p_value is not None and c.p_value < 0.001  # a real 1% change...
    assert c.verdict == "same" and c.reason == "91% CI 0.990-0.990 inside ±5%"  # ...inside ±5%
    wide = compare_all({"k": (base, [v * 0.99 for v in base])}, Policy(band=0.005))["k"]
    assert wide.verdict == "slower"  # with a ±0.5% band it is a change


def test_missing_and_non_positive_values_are_dropped() -> None:
    c = one([100.0, math.nan, 0.0, 101, -1], [100.0, 101])
    assert (c.n_base, c.n_other) == (2, 2)
    one_base = one([100.0, 0.0], [100.0, 101, 102])
    assert one_base.verdict == "undecided" and one_base.reason == "only 1 repeat of the base"
    assert one_base.ratio is not None and one_base.p_value is None and one_base.ci is None
    nothing = one([100.0, 101], [])
    assert nothing.ratio is None and nothing.reason == "no repeats of the column"
    assert nothing.more_repeats is None


def test_what_three_repeats_can_decide() -> None:
    """3 vs 3: the smallest p is 0.1, so never slower or faster at alpha 0.05; the widest
    interval reaches exactly 90%, so `same` when all nine pairwise ratios are in the band."""
    far = one([100.0, 101, 102], [50.0, 51, 52])
    assert far.verdict == "undecided" and "cannot reach p<=0.05" in far.reason
    assert far.p_value == pytest.approx(0.1)
    assert far.ci_confidence == pytest.approx(0.9)  # 95% asked, 90% is all there is
    tight = one([100.0, 101, 102], [99.0, 100.5, 103])
    assert tight.verdict == "same" and tight.reason == "90% CI 0.971-1.030 inside ±5%"
    loose = one([100.0, 101, 106], [99.0, 100.5, 103])  # 99/106 = 0.934
    assert loose.verdict == "undecided"
    two = one([100.0, 100.1], [100.0, 100.1])
    assert two.verdict == "undecided" and "cannot reach a 90% CI" in two.reason


def test_bh_runs_across_all_keys() -> None:
    """One real change among 20 unchanged steps needs p <= 0.05/20: 5 vs 5 (p >= 0.0079)
    cannot flag it alone, 6 vs 6 (p >= 0.0022) can; a change on every step needs less."""
    rng = np.random.default_rng(5)
    for n, expected in ((5, "undecided"), (6, "slower")):
        samples = lab(rng, 20, n, 0.002)
        samples[0] = (samples[0][0], [v * 0.8 for v in samples[0][0]])
        assert compare_all(samples, POLICY)[0].verdict == expected
    everywhere = lab(rng, 20, 5, 0.002, ratio=0.8)
    assert set(verdicts(everywhere)) == {"slower"}


def test_more_repeats() -> None:
    # a bigger spread needs more repeats, until out of reach
    needs = [repeats_to_decide(-0.03, sd, 0.05, 0.05, 0.05) for sd in (0.01, 0.02, 0.04, 0.08)]
    assert needs == [3, 4, 14, 55]  # 3 vs 3 reaches a 90% interval
    shift, z = -0.083, np.array([-1.2, -0.4, 0.1, 0.5, 1.0])
    found = []
    for spread in (0.01, 0.06, 0.1, 0.2, 0.5):
        base, other = list(1000 * np.exp(spread * z)), list(1000 * np.exp(shift + spread * z))
        c = one(base, other)
        found.append(c.more_repeats if c.verdict == "undecided" else 0)
    assert found[0] == 0  # 0.01: decided already
    reached = [f for f in found if f is not None]
    assert reached == sorted(reached) and found[-1] is None  # beyond max_more: None
    # an estimate of no change can only become `same`, one outside the band only a change
    assert repeats_to_decide(0.0, 0.05, 0.05, 0.05, 0.05) == 6  # 2 (1.645 * 0.05 / 0.0488)^2
    assert repeats_to_decide(0.2, 0.05, 0.05, 0.05, 0.05) == 4  # the exact test's minimum
    assert repeats_to_decide(0.0, math.nan, 0.05, 0.05, 0.05) is None


def test_policy_is_checked() -> None:
    for bad in ({"alpha": 0.0}, {"alpha": 0.5}, {"band": 0.0}, {"max_more": -1}):
        with pytest.raises(ValueError):
            Policy(**bad)


def false_alarm_rate(n: int, labs: int, seed: int) -> float:
    rng = np.random.default_rng(seed)
    alarms = sum(
        any(v in ("slower", "faster") for v in verdicts(lab(rng, 20, n, 0.05))) for _ in range(labs)
    )
    return alarms / labs


@pytest.mark.parametrize("n", [5, 10])
def test_aa_labs_rarely_flag_anything(n: int) -> None:
    """A/A labs of 20 steps, CV 5%: BH keeps the share of labs with any slower/faster at
    or below alpha (observed: 0.000 with 5 per side, 0.042 with 10)."""
    rate = false_alarm_rate(n, 1000, seed=n)
    assert rate <= POLICY.alpha + 0.02  # 3 binomial standard errors of slack


def test_power_for_a_nine_percent_slowdown() -> None:
    """Every step 9% slower, CV 3%, 5 repeats per side: observed 95.6% of steps `slower`."""
    rng = np.random.default_rng(6)
    found = [v for _ in range(50) for v in verdicts(lab(rng, 20, 5, 0.03, ratio=0.91))]
    assert found.count("slower") / len(found) >= 0.9
    assert "faster" not in found


def test_equivalence_with_low_noise() -> None:
    """No change, CV 1%, 8 repeats per side: observed 100% `same`."""
    rng = np.random.default_rng(7)
    eight = [v for _ in range(20) for v in verdicts(lab(rng, 20, 8, 0.01))]
    assert eight.count("same") / len(eight) >= 0.95


def test_three_repeats_are_same_exactly_when_every_pairwise_ratio_is_in_the_band() -> None:
    """3 vs 3, no change, CV 2%: observed 63% `same` (100% at CV 1%, 21% at CV 3%), the
    rest `undecided`; never slower or faster."""
    rng = np.random.default_rng(7)
    samples = lab(rng, 400, 3, 0.02)
    found = compare_all(samples, POLICY)
    for key, (x, y) in samples.items():
        inside = all(0.95 <= b / a <= 1.05 for a in x for b in y)
        assert found[key].verdict == ("same" if inside else "undecided")
    assert 0.4 < sum(c.verdict == "same" for c in found.values()) / len(found) < 0.9
