"""Small cost changes: a `same` verdict whose interval clears the floor of what separates
two builds of the same code is named `small`, sized, and never changes a gate; A/A
comparisons across builds and runs give none beyond the stated rate."""

from __future__ import annotations

import math
import random

from dbregress.analysis.cost import compare_counts, cost_class
from dbregress.analysis.state import SideState
from dbregress.lab.file import VerdictPolicy
from dbregress.report.verdict_tables import cost_text

BASE = [1_000_000.0, 1_000_100.0, 999_900.0]


def scaled(values: list[float], factor: float) -> list[float]:
    return [v * factor for v in values]


def test_a_change_inside_the_band_beyond_the_floor_is_small_and_sized() -> None:
    c = compare_counts(BASE, scaled(BASE, 1.0042))
    assert c.verdict == "same"  # the gate still reads `same`
    assert c.small
    assert cost_class(c) == "small"
    assert c.size is not None and abs(c.size - 0.0042) < 1e-9
    text = cost_text(c)
    assert text.startswith("1.004 = · +0.42% [")
    assert text.endswith("small")


def test_a_change_within_the_build_floor_is_not_small() -> None:
    # the A/A across runs the floor was measured on: 1.0013 [1.0009, 1.0018]
    c = compare_counts(BASE, scaled(BASE, 1.0013))
    assert c.verdict == "same"
    assert c.ci is not None and c.ci[0] > 1.0  # its interval excludes 1 ...
    assert not c.small  # ... yet not by more than what two builds of one code differ by
    assert cost_class(c) == "same"


def test_a_wide_noise_floor_keeps_a_small_change_unnamed() -> None:
    # a step whose calibration spread is 0.3% cannot size a 0.4% change
    c = compare_counts(BASE, scaled(BASE, 1.004), known_sd=[("the A/A calibration", 0.003)])
    assert not c.small


def test_small_faster_is_named_too() -> None:
    c = compare_counts(BASE, scaled(BASE, 0.995))
    assert c.verdict == "same" and c.small and c.size is not None and c.size < 0


def test_beyond_the_band_is_slower_not_small() -> None:
    c = compare_counts(BASE, scaled(BASE, 1.03))
    assert c.verdict == "slower" and not c.small
    assert cost_class(c) == "slower"


def test_the_floor_is_the_policys() -> None:
    wide = VerdictPolicy(cost_small_floor=0.006)
    assert compare_counts(BASE, scaled(BASE, 1.0042)).small
    assert not compare_counts(BASE, scaled(BASE, 1.0042), wide).small


def test_a_withheld_verdict_is_no_small_change() -> None:
    from dbregress.analysis.cost import _withheld

    c = compare_counts(BASE, scaled(BASE, 1.0042))
    assert c.small
    side = SideState(counted=0.5, timed=0.99, mismatch="state differs", replays=3)
    found = _withheld(c, (side, None))
    assert found.verdict == "undecided" and not found.small
    assert cost_class(found) == "undecided"


def test_aa_across_builds_and_runs_gives_small_at_most_one_in_a_hundred() -> None:
    """Each build of the same code (a rebuild, a comment-only commit, the same build in
    another run) sits at its own offset: sd 0.07% a build, so two builds differ by about
    0.1% (sd), as measured (docs/ledger.md: 0.05% for a comment-only commit, 0.13% and
    -0.06% for the quickstart's stored base against a twin counted anew). Replays of one
    build agree to 0.02%. Over 4,000 simulated A/A step verdicts, `small` stays under
    1 in 100."""
    rng = random.Random(11)
    trials, small = 4000, 0
    for _ in range(trials):
        a = math.exp(rng.gauss(0, 0.0007))
        b = math.exp(rng.gauss(0, 0.0007))
        x = [1e6 * a * math.exp(rng.gauss(0, 0.0002)) for _ in range(3)]
        y = [1e6 * b * math.exp(rng.gauss(0, 0.0002)) for _ in range(3)]
        small += compare_counts(x, y).small
    assert small / trials <= 0.01, small


def _series(rng: random.Random, levels: list[float], n: int = 3) -> list[list[float]]:
    return [[1e6 * lv * math.exp(rng.gauss(0, 0.0003)) for _ in range(n)] for lv in levels]


def test_change_points_keep_a_small_shift_as_small() -> None:
    from dbregress.analysis import changepoints

    rng = random.Random(3)
    levels = [1.0] * 5 + [1.004] * 5
    found = changepoints.find_all(
        {"s": _series(rng, levels)}, better="lower", band=0.01, floor_sd=0.001, small_floor=0.0025
    )["s"]
    moved = found.moved()
    assert [c.index for c in moved] == [5]
    assert moved[0].verdict == "same" and moved[0].small and moved[0].word == "small"
    assert moved[0].mark == "▽"
    assert not found.decided()  # no gate reads it as a change
    # without a small floor (the time lane) the same shift is dropped, as before
    plain = changepoints.find_all(
        {"s": _series(random.Random(3), levels)}, better="lower", band=0.01, floor_sd=0.001
    )["s"]
    assert not plain.moved()


def test_flat_cost_series_give_small_shifts_at_most_the_change_point_rate() -> None:
    from dbregress.analysis import changepoints

    rng = random.Random(5)
    series = {
        k: _series(rng, [math.exp(rng.gauss(0, 0.0007)) for _ in range(8)]) for k in range(200)
    }
    found = changepoints.find_all(
        series, better="lower", band=0.01, floor_sd=0.001, small_floor=0.0025
    )
    flagged = sum(bool(s.moved()) for s in found.values())
    assert flagged / len(series) <= changepoints.ALPHA, flagged


def test_the_site_shows_a_small_change_on_its_point() -> None:
    from dbregress.site import charts
    from dbregress.site.gather import _verdict
    from dbregress.site.model import Point

    v = _verdict(
        {  # type: ignore[typeddict-item]
            "verdict": "same",
            "ratio": 1.0042,
            "ci": [1.0039, 1.0045],
            "small": True,
            "reason": "",
        }
    )
    assert v.word == "same" and v.small and v.shown == "small"
    fields = {f for f in Point.__dataclass_fields__}
    values = {f: None for f in fields} | {
        "run": 1, "run_id": "r", "level": 1000.0, "samples": 3, "verdict": v, "base": False,
        "left_out": 0, "host": "h",
    }  # fmt: skip
    title = charts.hover(Point(**values), "cost")  # type: ignore[arg-type]
    assert "against the run's base: small 1.004 (+0.42% [0.39, 0.45])" in title


def test_the_engine_states_possible_bias_widens_the_interval() -> None:
    """Two sides within their state tolerance in opposite directions (the base may
    count up to 0.2% less than its timed state, the column 0.2% more) may put up to
    +0.4% into a ratio: a measured +0.3% is then no small change, and the interval holds
    the bias."""
    from dbregress.analysis.cost import _judge, _test

    y = scaled(BASE, 1.003)
    t = _test(BASE, y, 0.01, [])
    plain = _judge("estimated_cycles", BASE, y, t.welch.p, t, VerdictPolicy(), (None, None), 5)
    assert plain.small
    base = SideState(0.9, 0.9, None, 3, bias={"estimated_cycles": -0.002})
    column = SideState(0.9, 0.9, None, 3, bias={"estimated_cycles": 0.002})
    found = _judge(
        "estimated_cycles", BASE, y, t.welch.p, t, VerdictPolicy(), (None, None), 5,
        states=(base, column),
    )  # fmt: skip
    assert found.ci is not None and plain.ci is not None
    assert found.ci[0] < plain.ci[0] and found.ci[1] >= plain.ci[1]
    assert found.ci[0] <= 1.003 / 1.004 + 0.001  # the bias can take the whole change
    assert not found.small and found.verdict == "same"
    assert "possible bias" in found.reason
