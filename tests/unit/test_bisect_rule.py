"""The bisection's rule over synthetic histories (the runs themselves are tested with
real builds in tests/e2e/test_bisect.py and bench/bisect_src.py): a fake provision layer
(builds that fail with a given error) and a fake measuring layer (each build's level of
cost per operation), the rest of the bisection as it runs: how many points and builds,
which build it ends at, skips, a failure common to many builds, an answer of several
candidates, a midpoint better than the good build, and refusing to guess."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field, replace
from pathlib import Path

import pytest

from dbregress import bisect
from dbregress.bisect import (
    COMMON_FAILURES,
    BisectError,
    Bisection,
    BisectPoint,
    BisectRequest,
    Outcome,
    Verdict,
    cause_of,
    probe_order,
)
from dbregress.cli.bisect import commits_request, render
from dbregress.model.errors import BuildNotFound, ProvisionError


def word(a: float, b: float) -> str:
    """b against a, levels of cost per operation (higher is slower)."""
    if math.isnan(a) or math.isnan(b):
        return "undecided"
    r = b / a
    return "same" if abs(r - 1) < 0.01 else ("slower" if r > 1 else "faster")


def build_error(spec: str, line: int = 812) -> ProvisionError:
    """A failed compile as provision/source.py says it (the spec, the compiler's first
    error, the log's path)."""
    key = f"src-{abs(hash(spec)) % 16**16:016x}-rel-5f0e3a9c1b2d"
    return ProvisionError(
        f"{spec}: make failed (exit 2): /var/cache/dbregress/postgres/src-work/{key}/src/"
        f"src/backend/utils/adt/misc.c:{line}:1: error: unknown type name 'this'; the whole "
        f"output is in /var/cache/dbregress/postgres/logs/{key}.log"
    )


@dataclass
class Fake:
    """A history of builds: their levels and the ones that do not build (and why)."""

    levels: list[float]
    broken: dict[int, Exception] = field(default_factory=dict)
    built: list[str] = field(default_factory=list)  # every build attempted, in order
    measured: list[str] = field(default_factory=list)  # every point's mid, in order

    @property
    def builds(self) -> tuple[str, ...]:
        return tuple(f"rocksdb@1.{i}.0" for i in range(len(self.levels)))

    def install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        level = dict(zip(self.builds, self.levels, strict=True))

        def fetch(b: Bisection, build: str) -> None:
            self.built.append(build)
            error = self.broken.get(self.builds.index(build))
            if error is not None:
                raise error

        def measure(b: Bisection, lo: str, mid: str, hi: str, attempt: int) -> BisectPoint:
            self.measured.append(mid)

            def v(x: str, y: str) -> Verdict:
                return Verdict(word(level[x], level[y]), level[y] / level[x], None, "simulated")

            run = f"run{len(self.measured)}"
            good = b.builds[0]  # a point judges mid against the good end too (points.py)
            vs_good = v(good, mid) if lo != good else None
            return BisectPoint(
                lo, mid, hi, run, attempt, v(lo, mid), v(hi, mid), v(lo, hi), 0.0, "", vs_good
            )

        monkeypatch.setattr(Bisection, "_fetch", fetch)
        monkeypatch.setattr(Bisection, "_measure", measure)
        monkeypatch.setattr(Bisection, "check_step", lambda self: None)

    def bisection(self, root: Path, lines: list[str] | None = None) -> Bisection:
        request = BisectRequest(builds=self.builds, benchmark="kv", step="revrange")
        return Bisection(request, root, (lines if lines is not None else []).append)


def simulate(
    monkeypatch: pytest.MonkeyPatch,
    root: Path,
    levels: list[float],
    broken: dict[int, Exception] | None = None,
) -> tuple[Bisection, Fake]:
    fake = Fake(levels, broken or {})
    fake.install(monkeypatch)
    return fake.bisection(root), fake


def step_at(n: int, first_bad: int) -> list[float]:
    return [100.0] * first_bad + [110.0] * (n - first_bad)


def name(i: int) -> str:
    return f"rocksdb@1.{i}.0"


@pytest.mark.parametrize("n", [2, 3, 5, 9, 17, 33, 72])
def test_every_position_is_found_in_about_log2_points(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, n: int
) -> None:
    for first_bad in range(1, n):
        b, fake = simulate(monkeypatch, tmp_path / f"{first_bad}", step_at(n, first_bad))
        o = b.run()
        assert o.first_bad == name(first_bad), (n, first_bad, fake.measured)
        assert o.last_good == name(first_bad - 1) and o.candidates == []
        assert o.direction == "slower"
        assert len(fake.measured) <= math.ceil(math.log2(n)) + 1, (n, first_bad, fake.measured)
        # the ends, then one build per point beyond the first (whose mid is built too)
        assert fake.built[:2] == [name(0), name(n - 1)]
        assert len(fake.built) == 2 + len([m for m in fake.measured if m != name(n - 1)])


def test_the_ends_are_built_first_and_a_common_failure_stops_there(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # a flavor option that configure rejects: every one of 40 commits fails alike
    error = "configure failed (exit 1): configure: error: Invalid block size."
    broken: dict[int, Exception] = {i: ProvisionError(f"{name(i)}: {error}") for i in range(40)}
    b, fake = simulate(monkeypatch, tmp_path, step_at(40, 20), broken)
    with pytest.raises(BisectError, match=r"the good end 1/40 rocksdb@1\.0\.0 cannot be built: "):
        b.run()
    assert fake.built == [name(0)] and fake.measured == []
    saved = json.loads((tmp_path / "bisect.json").read_text())
    assert "Invalid block size" in saved["stopped"] and saved["first_bad"] is None


def test_a_bad_end_that_does_not_build_stops_before_any_other_build(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    b, fake = simulate(monkeypatch, tmp_path, step_at(9, 4), {8: BuildNotFound("no such build")})
    with pytest.raises(BisectError, match=r"the bad end 9/9 rocksdb@1\.8\.0 cannot be built"):
        b.run()
    assert fake.built == [name(0), name(8)] and fake.measured == []


def test_inner_builds_failing_alike_far_apart_stop_with_the_cause(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # the ends are in the build cache; every build between fails with the same error
    # (here a compiler that is not there any more)
    n = 40
    missing = BuildNotFound("building from source needs a C compiler; 'gcc' is not on PATH")
    b, fake = simulate(
        monkeypatch, tmp_path, step_at(n, 20), dict.fromkeys(range(1, n - 1), missing)
    )
    with pytest.raises(BisectError, match=r"3 builds in a row failed with the same error.*'gcc'"):
        b.run()
    assert len(fake.built) == 2 + COMMON_FAILURES and fake.measured == []
    saved = json.loads((tmp_path / "bisect.json").read_text())
    # those builds are tried again when the bisection is resumed (the cause fixed)
    assert saved["skipped"] == {} and "not on PATH" in saved["stopped"]


@pytest.mark.parametrize("n", [6, 9, 17, 32, 40])
def test_three_unbuildable_commits_with_the_change_in_the_first_are_all_candidates(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, n: int
) -> None:
    # the change arrives with a commit that does not compile; the two after it keep the
    # error (the same line); the next one repairs it
    for k in range(1, n - 3):
        broken: dict[int, Exception] = {j: build_error(name(j)) for j in range(k, k + 3)}
        b, fake = simulate(monkeypatch, tmp_path / str(k), step_at(n, k), broken)
        o = b.run()
        assert o.first_bad is None, (n, k, fake.built)
        assert o.candidates == [name(k), name(k + 1), name(k + 2), name(k + 3)], (n, k)
        assert o.last_good == name(k - 1) and o.stopped is None
        saved = json.loads((tmp_path / str(k) / "bisect.json").read_text())
        assert saved["candidates"] == o.candidates and saved["first_bad"] is None


def test_no_run_of_up_to_three_unbuildable_commits_is_taken_for_a_common_cause(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Wherever the run and the change lie: the answer holds the first bad build, and it
    is a single build exactly when the evidence isolates it."""
    monkeypatch.setattr(Bisection, "_save", lambda self: None)  # 1,500 bisections, no files
    n = 24
    for length in (1, 2, 3):
        for k in range(1, n - length):
            for first_bad in range(1, n):
                broken: dict[int, Exception] = {
                    j: build_error(name(j)) for j in range(k, k + length)
                }
                b, _ = simulate(monkeypatch, tmp_path / "x", step_at(n, first_bad), broken)
                o = b.run()
                answer = o.candidates or [o.first_bad]
                assert name(first_bad) in answer, (length, k, first_bad)
                isolated = first_bad not in broken and first_bad - 1 not in broken
                assert (o.first_bad is not None) == isolated, (length, k, first_bad)


def test_an_unfetchable_first_bad_build_is_not_named_alone(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    b, fake = simulate(monkeypatch, tmp_path, step_at(9, 4), {4: BuildNotFound("no such build")})
    o = b.run()
    assert name(4) in o.skipped and name(4) not in fake.measured
    # 1.4 could not be measured: the change is 1.4 or 1.5
    assert o.first_bad is None and o.candidates == [name(4), name(5)]
    assert o.last_good == name(3)


def test_a_skipped_build_outside_the_final_bracket_leaves_one_answer(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    b, _ = simulate(monkeypatch, tmp_path, step_at(17, 12), {8: BuildNotFound("gone")})
    o = b.run()
    assert name(8) in o.skipped and o.first_bad == name(12) and o.candidates == []


def test_a_midpoint_better_than_the_good_build_is_not_the_change(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    levels = [100.0, 100.0, 95.0, 95.0, 95.0, 110.0, 110.0]
    b, _ = simulate(monkeypatch, tmp_path, levels)
    assert b.run().first_bad == name(5)


def test_a_gradual_change_ends_at_the_first_step_beyond_the_band(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    levels = [100, 100, 100.5, 102, 105, 107, 110, 114]
    b, _ = simulate(monkeypatch, tmp_path, [float(x) for x in levels])
    assert b.run().first_bad == name(3)


def test_no_change_between_the_ends_is_nothing_to_bisect(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    b, fake = simulate(monkeypatch, tmp_path, [100.0] * 6)
    o = b.run()
    assert o.first_bad is None and o.stopped and "nothing to bisect" in o.stopped
    assert len(fake.measured) == 1


def test_ends_that_stay_undecided_are_no_answer(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    b, fake = simulate(monkeypatch, tmp_path, [100.0] * 5 + [float("nan")])
    o = b.run()
    assert o.stopped and "no guess" in o.stopped and not o.ends_same  # the command exits 2
    assert o.first_bad is None and o.candidates == []
    assert len(fake.measured) == bisect.ATTEMPTS
    b, _ = simulate(monkeypatch, tmp_path / "same", [100.0] * 6)
    assert b.run().ends_same  # "nothing to bisect" is an answer: exit 0


def test_an_undecided_point_is_measured_again_then_stops_without_a_guess(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    levels = [100.0, 100.0, 100.0, float("nan"), 110.0, 110.0, 110.0]
    b, fake = simulate(monkeypatch, tmp_path, levels)
    o = b.run()
    assert o.first_bad is None and o.stopped and "no guess" in o.stopped
    assert fake.measured.count(name(3)) == bisect.ATTEMPTS


def test_a_progress_line_per_build_and_per_point(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    fake = Fake(step_at(32, 21), {24: build_error(name(24))})
    fake.install(monkeypatch)
    lines: list[str] = []
    o = fake.bisection(tmp_path, lines).run()
    assert o.first_bad == name(21)
    building = [ln for ln in lines if " building " in ln]
    assert len(building) == len(fake.built) and len(set(building)) == len(building)
    assert sum(" built " in ln for ln in lines) == len(fake.built) - 1  # 24 did not
    assert sum(": measuring " in ln for ln in lines) == len(fake.measured)
    assert sum(": measured in " in ln for ln in lines) == len(fake.measured)
    assert all(ln.startswith("bisect [0:00:") for ln in lines)
    assert any(ln.endswith("building the good end 1/32 rocksdb@1.0.0") for ln in lines)
    assert any("skipping rocksdb@1.24.0: make failed (exit 2): " in ln for ln in lines)


def test_the_order_a_bracket_tries_its_builds() -> None:
    order = probe_order(16, 31)
    assert order[:3] == [24, 20, 28]  # the middle, then a quarter away on each side
    assert sorted(order) == list(range(17, 31))
    assert probe_order(3, 4) == [] and probe_order(3, 5) == [4]


def test_a_cause_is_the_error_without_what_differs_between_builds() -> None:
    a, b = build_error(name(3)), build_error(name(4))
    assert cause_of(str(a), name(3)) == cause_of(str(b), name(4))
    assert "misc.c:812:1: error: unknown type name 'this'" in cause_of(str(a), name(3))
    other = build_error(name(4), line=900)
    assert cause_of(str(other), name(4)) != cause_of(str(a), name(3))


def test_a_build_faster_than_the_good_end_is_never_the_first_bad(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # an improvement (100 -> 90), a smaller regression (90 -> 97, still 3% faster than
    # the good end), then the regression looked for (97 -> 105). The first point, 1.4
    # (90), is faster than the good end; a walk that re-based on it judged 1.6 (97)
    # against 90, called it slower and named 1.5 (97) "first bad" although it is faster
    # than the good end. Judged against the good end (100) throughout, 1.5 and 1.6 are
    # not slower, 1.7 (105) is, and its neighbour 1.6 was measured: 1.7 is the answer.
    levels = [100.0, 100.0, 90.0, 90.0, 90.0, 97.0, 97.0, 105.0, 105.0]
    lines: list[str] = []
    fake = Fake(levels)
    fake.install(monkeypatch)
    o = fake.bisection(tmp_path, lines).run()
    assert o.first_bad != name(5)
    assert (o.first_bad, o.last_good, o.direction) == (name(7), name(6), "slower")
    assert fake.measured == [name(4), name(6), name(7)]
    # the range holds changes both ways: the answer says so and names --all-changes
    assert o.other_way == [name(4), name(6)]
    assert any("changes both ways" in ln and "--all-changes" in ln for ln in lines)
    saved = json.loads((tmp_path / "bisect.json").read_text())
    assert saved["other_way"] == [name(4), name(6)]
    assert saved["points"][1]["mid_vs_good"]["word"] == "faster"


@pytest.mark.parametrize(
    ("levels", "asked", "first_bad"),
    [
        # the ends are faster: asked for faster, 1.3 (110) moved the other way and is
        # passed over; 1.4 (90) is the first faster than the good end
        ([100.0, 100.0, 110.0, 110.0, 90.0, 90.0], "faster", name(4)),
        # the same history without --direction: the ends' own direction, the same answer
        ([100.0, 100.0, 110.0, 110.0, 90.0, 90.0], None, name(4)),
        # asked for slower: 1.3 (110) is slower than the good end and its neighbour 1.2 is not
        ([100.0, 100.0, 100.0, 110.0, 110.0, 110.0], "slower", name(3)),
    ],
)
def test_a_direction_asked_is_followed_and_never_answered_the_other_way(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    levels: list[float],
    asked: str | None,
    first_bad: str,
) -> None:
    fake = Fake(levels)
    fake.install(monkeypatch)
    request = BisectRequest(builds=fake.builds, benchmark="kv", step="revrange", direction=asked)
    o = Bisection(request, tmp_path, print).run()
    assert o.first_bad == first_bad and o.direction == (asked or "faster")
    level = dict(zip(fake.builds, levels, strict=True))
    assert word(levels[0], level[first_bad]) == o.direction
    saved = json.loads((tmp_path / "bisect.json").read_text())
    assert saved["request"]["direction"] == asked and saved["direction"] == o.direction


def test_ends_the_other_way_than_asked_are_nothing_to_bisect(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    fake = Fake(step_at(9, 4))  # slower
    fake.install(monkeypatch)
    request = BisectRequest(builds=fake.builds, benchmark="kv", step="revrange", direction="faster")
    o = Bisection(request, tmp_path, print).run()
    assert o.first_bad is None and o.ends_other_way and not o.ends_same
    assert o.stopped and "not faster (--direction)" in o.stopped
    assert len(fake.measured) == 1


def test_the_commits_phase_keeps_the_releases_direction() -> None:
    releases = BisectRequest(
        builds=("postgres@15.1.0", "postgres@15.2.0"),
        benchmark="insert",
        step="qp100",
        then_src="/src/postgres",
    )
    found = Outcome(builds=list(releases.builds), direction="faster")
    commits = ("postgres@src:/src/postgres#a+rel", "postgres@src:/src/postgres#b+rel")
    follow = commits_request(releases, found, commits)
    assert (follow.direction, follow.builds, follow.then_src) == ("faster", commits, None)
    asked = commits_request(replace(releases, direction="slower"), found, commits)
    assert asked.direction == "slower"


def test_one_of_several_in_a_range_with_changes_both_ways_says_so_too(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    levels = [100.0, 100.0, 90.0, 90.0, 90.0, 97.0, 97.0, 105.0, 105.0]
    b, _ = simulate(monkeypatch, tmp_path, levels, {7: BuildNotFound("gone")})
    o = b.run()
    assert o.first_bad is None and o.candidates == [name(7), name(8)]
    assert o.last_good == name(6) and o.other_way == [name(4), name(6)]
    text = render(o)
    assert "could be any of these 2" in text and "changes both ways" in text
