"""Change points on synthetic series (no engines): shifts of a known size and place, and
flat series. bench/changepoints.py measures the rates with more series for the docs."""

from __future__ import annotations

import math
import random

import pytest

from dbregress.analysis.changepoints import find_all

SIGMA = 0.05


def _series(seed: int, k: int, r: int, shifts: dict[int, float]) -> list[list[float]]:
    """k columns of r samples, log-normal spread SIGMA; from column i on the level moves by
    shifts[i] x SIGMA (on the log scale)."""
    rng = random.Random(seed)
    level, cols = 0.0, []
    for i in range(k):
        level += shifts.get(i, 0.0) * SIGMA
        cols.append([math.exp(level + rng.gauss(0, SIGMA)) for _ in range(r)])
    return cols


def _found(cols: list[list[float]], better: str = "higher") -> list[int]:
    return [c.index for c in find_all({"s": cols}, better=better)["s"].decided()]  # type: ignore[arg-type]


def test_flat_series_rarely_get_a_change_point() -> None:
    false = sum(bool(_found(_series(seed, 10, 5, {}))) for seed in range(300))
    assert false <= 9  # 3% of 300; bench/changepoints.py measures ~1% at alpha 0.01


@pytest.mark.parametrize("pos", [3, 5, 7])
def test_a_shift_of_twice_the_noise_is_found_at_its_column(pos: int) -> None:
    seeds = 200
    right = wrong = 0
    for seed in range(seeds):
        found = _found(_series(seed, 10, 5, {pos: -2.0}))
        right += pos in found
        wrong += any(i != pos for i in found)
    assert right >= 0.85 * seeds
    assert wrong <= 0.10 * seeds


def test_three_times_the_noise_at_either_end_is_found() -> None:
    for pos in (1, 9):
        right = sum(pos in _found(_series(seed, 10, 5, {pos: 3.0})) for seed in range(200))
        assert right >= 0.95 * 200


def test_two_shifts_up_and_down_are_both_found_with_size_and_verdict() -> None:
    cols = _series(1, 12, 5, {4: -4.0, 8: 4.0})
    s = find_all({"s": cols}, better="higher")["s"]
    got = {c.index: c for c in s.decided()}
    assert set(got) == {4, 8}
    assert got[4].verdict == "slower" and got[8].verdict == "faster"
    assert got[4].ratio == pytest.approx(math.exp(-4 * SIGMA), rel=0.05)
    lo, hi = got[4].ci
    assert lo < got[4].ratio < hi
    assert got[4].before == (0, 3) and got[4].after == (4, 7)


def test_lower_is_better_turns_the_words() -> None:
    cols = _series(2, 8, 3, {4: 4.0})  # cost per operation up 20%: slower
    (c,) = find_all({"s": cols}, better="lower")["s"].decided()
    assert c.index == 4 and c.verdict == "slower"


def test_a_shift_inside_the_band_is_same_not_a_change() -> None:
    # Exact counts (cost lane): 0.3% apart, replays agree to 0.01%; the band is 1%.
    cols = [[1000.0 * (1 + 1e-4 * j) for j in range(3)] for _ in range(4)]
    cols += [[1003.0 * (1 + 1e-4 * j) for j in range(3)] for _ in range(4)]
    s = find_all({"s": cols}, better="lower", band=0.01, floor_sd=0.001)["s"]
    assert s.decided() == []
    assert [c.verdict for c in s.changes] in ([], ["same"])


def test_one_number_per_column_uses_the_scatter_between_columns() -> None:
    rng = random.Random(3)
    cols = [[math.exp(rng.gauss(0, 0.01) + (-0.15 if i >= 6 else 0))] for i in range(12)]
    found = _found(cols)
    assert found == [6]


def test_missing_columns_keep_their_positions() -> None:
    cols = _series(4, 10, 5, {6: -4.0})
    cols[2] = []
    s = find_all({"s": cols}, better="higher")["s"]
    assert [c.index for c in s.decided()] == [6]
    assert s.levels[2] is None and s.counts[2] == 0


def test_too_little_to_judge_gives_no_change() -> None:
    assert find_all({"s": [[1.0], [2.0]]}, better="higher")["s"].changes == ()
    assert find_all({"s": [[1.0, 1.1]]}, better="higher")["s"].changes == ()
