"""The bisection's rule over simulated points (the runs themselves are tested with real
builds in tests/e2e/test_bisect.py): how many points, which build it ends at, skips,
a midpoint better than the good build, and refusing to guess."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from dbregress import bisect
from dbregress.bisect import Bisection, BisectPoint, BisectRequest, Verdict
from dbregress.errors import BuildNotFound


def word(a: float, b: float) -> str:
    """b against a, levels of cost per operation (higher is slower)."""
    if math.isnan(a) or math.isnan(b):
        return "undecided"
    r = b / a
    return "same" if abs(r - 1) < 0.01 else ("slower" if r > 1 else "faster")


def simulate(
    monkeypatch: pytest.MonkeyPatch, levels: list[float], unfetchable: set[int] = frozenset()
) -> tuple[Bisection, list[str]]:
    builds = tuple(f"rocksdb@1.{i}.0" for i in range(len(levels)))
    level = dict(zip(builds, levels, strict=True))
    measured: list[str] = []

    def fetch(spec: object) -> None:
        if builds.index(str(spec)) in unfetchable:
            raise BuildNotFound(f"{spec}: no such build")

    def measure(self: Bisection, lo: str, mid: str, hi: str, attempt: int) -> BisectPoint:
        measured.append(mid)

        def v(a: str, b: str) -> Verdict:
            return Verdict(word(level[a], level[b]), level[b] / level[a], None, "simulated")

        return BisectPoint(
            lo, mid, hi, f"run{len(measured)}", attempt, v(lo, mid), v(hi, mid), v(lo, hi), 0.0
        )

    monkeypatch.setattr(bisect.provision, "fetch", fetch)
    monkeypatch.setattr(bisect.provision.BuildSpec, "parse", staticmethod(lambda s: s))
    monkeypatch.setattr(Bisection, "_measure", measure)
    monkeypatch.setattr(Bisection, "check_step", lambda self: None)  # parses real specs
    request = BisectRequest(builds=builds, benchmark="kv", step="revrange")
    return Bisection(request, Path("/nonexistent-never-written"), lambda _: None), measured


@pytest.fixture(autouse=True)
def no_files(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(Bisection, "_save", lambda self: None)
    monkeypatch.setattr(Path, "mkdir", lambda *a, **k: None)


@pytest.mark.parametrize("n", [2, 3, 5, 9, 17, 33, 72])
def test_every_position_is_found_in_about_log2_points(
    monkeypatch: pytest.MonkeyPatch, n: int
) -> None:
    for first_bad in range(1, n):
        levels = [100.0] * first_bad + [110.0] * (n - first_bad)
        b, measured = simulate(monkeypatch, levels)
        o = b.run()
        assert o.first_bad == f"rocksdb@1.{first_bad}.0", (n, first_bad, measured)
        assert o.last_good == f"rocksdb@1.{first_bad - 1}.0"
        assert o.direction == "slower"
        assert len(measured) <= math.ceil(math.log2(n)) + 1, (n, first_bad, measured)


def test_a_gradual_change_ends_at_the_first_step_beyond_the_band(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    levels = [100, 100, 100.5, 102, 105, 107, 110, 114]
    b, _ = simulate(monkeypatch, [float(x) for x in levels])
    o = b.run()
    assert o.first_bad == "rocksdb@1.3.0"


def test_an_unfetchable_build_is_skipped(monkeypatch: pytest.MonkeyPatch) -> None:
    levels = [100.0] * 4 + [110.0] * 5
    b, measured = simulate(monkeypatch, levels, unfetchable={4})
    o = b.run()
    assert "rocksdb@1.4.0" in o.skipped and "rocksdb@1.4.0" not in measured
    # 1.4 could not be measured: the change lies between 1.3 and 1.5
    assert o.first_bad == "rocksdb@1.5.0" and o.last_good == "rocksdb@1.3.0"


def test_a_midpoint_better_than_the_good_build_is_not_the_change(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    levels = [100.0, 100.0, 95.0, 95.0, 95.0, 110.0, 110.0]
    b, _ = simulate(monkeypatch, levels)
    o = b.run()
    assert o.first_bad == "rocksdb@1.5.0"


def test_no_change_between_the_ends_is_nothing_to_bisect(monkeypatch: pytest.MonkeyPatch) -> None:
    b, measured = simulate(monkeypatch, [100.0] * 6)
    o = b.run()
    assert o.first_bad is None and o.stopped and "nothing to bisect" in o.stopped
    assert len(measured) == 1


def test_an_undecided_point_is_measured_again_then_stops_without_a_guess(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    levels = [100.0, 100.0, 100.0, float("nan"), 110.0, 110.0, 110.0]
    b, measured = simulate(monkeypatch, levels)
    o = b.run()
    assert o.first_bad is None and o.stopped and "no guess" in o.stopped
    assert measured.count("rocksdb@1.3.0") == bisect.ATTEMPTS
