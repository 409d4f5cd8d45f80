"""`bisect --all-changes` over synthetic cost histories: several changes both ways, one
below --min, commits that cannot be built (one of them the change's own commit). Every
change at least --min is named at its build, no other build is, the counts are compared
by the cost lane's own statistics (compare_counts on three replays a build, 0.02% apart),
and the builds counted stay within k·log2(N/k) + 2k. The splitting (split.py) is tested
alone, then through a bisection with a simulated provision and counting layer (its
table, bisect.json and the command line's refusals)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from dbregress.analysis.cost_methods import Group
from dbregress.bisect import Bisection, BisectPoint, BisectRequest, Outcome, Verdict
from dbregress.bisect.builds import label_of
from dbregress.bisect.every import AllChanges, compare
from dbregress.bisect.model import RangeRow
from dbregress.bisect.split import Counts, is_change, point_bound, reaches, split
from dbregress.bisect.state import Keys
from dbregress.bisect.table import render_changes
from dbregress.cli.main import main
from dbregress.model.errors import ProvisionError

REPLAYS = (0.9998, 1.0, 1.0002)  # three replays a build, as counts repeat here (0.02%)
MIN = 0.0025


def history(n: int, changes: dict[int, float], start: float = 1000.0) -> list[float]:
    """A build's cost per operation: each change multiplies it from its build on."""
    levels, level = [], start
    for i in range(n):
        level *= changes.get(i, 1.0)
        levels.append(level)
    return levels


def counts(level: float) -> list[float]:
    return [level * m for m in REPLAYS]


def run_split(
    levels: list[float], broken: set[int] = frozenset(), minimum: float = MIN
) -> tuple[object, list[tuple[int, int, int]]]:
    asked: list[tuple[int, int, int]] = []

    def measure(lo: int, i: int, hi: int) -> dict[int, Counts] | None:
        asked.append((lo, i, hi))
        if i in broken:
            return None
        return {j: counts(levels[j]) for j in (lo, i, hi)}

    return split(len(levels), measure, compare, minimum), asked


# 41 builds, 40 increments: +0.4%, -0.8% (an improvement), +1.2%, +0.6%, and +0.1%
# (below --min 0.25%)
CHANGES = {7: 1.004, 15: 0.992, 23: 1.012, 31: 1.006, 36: 1.001}
NAMED = {i: r for i, r in CHANGES.items() if abs(r - 1) >= MIN}


@pytest.mark.parametrize("broken", [set(), {19}, {8, 27}])
def test_every_change_at_least_the_minimum_is_named_and_no_other(broken: set[int]) -> None:
    levels = history(41, CHANGES)
    found, _ = run_split(levels, broken)
    assert [(c.lo, c.hi) for c in found.changes] == [(i - 1, i) for i in NAMED]
    for c in found.changes:
        assert c.verdict.ratio == pytest.approx(NAMED[c.hi], abs=1e-9)
        assert c.verdict.ci is not None and c.verdict.ci[0] <= NAMED[c.hi] <= c.verdict.ci[1]
        assert c.candidates == []
    assert set(found.skipped) <= broken
    # the +0.1% is in a range left whole below the minimum, with its total
    assert any(r.lo < 36 <= r.hi for r in found.below)
    assert all(not is_change(r.verdict, MIN) for r in found.below + found.undecided)
    # the shares add up: the four changes and the +0.1% make the whole
    total = math.log(levels[-1] / levels[0])
    assert found.total.ratio == pytest.approx(levels[-1] / levels[0])
    explained = found.explained()
    assert explained == pytest.approx(1 - math.log(1.001) / total, abs=1e-6)
    k = len(NAMED)
    assert len(found.measured) <= k * math.log2(40 / k) + 2 * k
    assert len(set(found.measured)) == len(found.measured)  # each build counted once


@pytest.mark.parametrize("at", [1, 5, 12, 20, 31, 40])
def test_a_single_change_takes_log2_n_points_and_the_ends(at: int) -> None:
    levels = history(41, {at: 1.005})
    found, _ = run_split(levels)
    assert [(c.lo, c.hi) for c in found.changes] == [(at - 1, at)]
    # ceil(log2 40) builds between the ends: log2(40) + 2 = 7.3 rounded up
    assert len(found.measured) <= point_bound(1, 41) == math.ceil(math.log2(40)) + 2


def test_a_change_whose_commit_does_not_build_is_one_of_it_and_the_next() -> None:
    levels = history(41, CHANGES)
    found, _ = run_split(levels, {23})
    at = {c.hi: c for c in found.changes}
    assert 23 not in at and at[24].lo == 22 and at[24].candidates == [23, 24]
    assert [c.hi for c in found.changes] == [7, 15, 24, 31]


def test_a_range_without_a_change_takes_three_points() -> None:
    found, _ = run_split(history(33, {10: 1.001}))
    assert found.changes == [] and len(found.measured) == 3
    assert len(found.below) == 1 and found.below[0].verdict.ratio == pytest.approx(1.001)


def test_an_interval_straddling_the_minimum_is_not_a_change() -> None:
    v = Verdict("same", 1.0026, (1.0020, 1.0032), "")
    assert reaches(v, MIN) and not is_change(v, MIN)
    assert is_change(Verdict("same", 0.996, (0.9955, 0.9965), ""), MIN)
    found, _ = run_split(history(9, {4: 1.0026}))
    assert found.changes == [] and [(r.lo, r.hi) for r in found.undecided] == [(3, 4)]


def test_a_build_without_an_interval_is_no_claim() -> None:
    def measure(lo: int, i: int, hi: int) -> dict[int, Counts]:
        return {
            j: ([1000.0] if j == 4 else counts(1000.0 * (1.01 if j >= 4 else 1)))
            for j in (lo, i, hi)
        }

    found = split(9, measure, compare, MIN)
    assert found.changes == [] and found.undecided  # never a silent "no change"


# -- through a bisection ---------------------------------------------------------------


class Fake:
    """Builds rocksdb@1.i.0 with cost levels; `broken` do not build."""

    def __init__(self, levels: list[float], broken: set[int] = frozenset()) -> None:
        self.levels, self.broken = levels, broken
        self.builds = tuple(f"rocksdb@1.{i}.0" for i in range(len(levels)))
        self.level = dict(zip(self.builds, levels, strict=True))
        self.built: list[str] = []

    def install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        def fetch(b: Bisection, build: str) -> None:
            self.built.append(build)
            if self.builds.index(build) in self.broken:
                raise ProvisionError(f"{build}: make failed (exit 2): x.c:1: error")

        def measure(b: Bisection, lo: str, mid: str, hi: str, attempt: int) -> BisectPoint:
            v = Verdict("same", 1.0, None, "simulated")
            return BisectPoint(lo, mid, hi, f"run-{b.labels[mid]}", attempt, v, v, v, 1.0)

        def counted(b: AllChanges, p: BisectPoint) -> dict[str, list[tuple[float, Group]]]:
            return {
                b.labels[x]: [(v, ("valgrind", "sessions")) for v in counts(self.level[x])]
                for x in (p.lo, p.mid, p.hi)
            }

        monkeypatch.setattr(Bisection, "_fetch", fetch)
        monkeypatch.setattr(Bisection, "_measure", measure)
        monkeypatch.setattr(Bisection, "check_step", lambda self: None)
        monkeypatch.setattr(AllChanges, "counts", counted)


def test_all_changes_table_and_bisect_json(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    fake = Fake(history(41, CHANGES), {20, 23})  # 20: the first middle tried
    fake.install(monkeypatch)
    request = BisectRequest(builds=fake.builds, benchmark="kv", step="revrange", all_changes=True)
    o = AllChanges(request, tmp_path, print).run()
    saved = json.loads((tmp_path / "bisect.json").read_text())
    rows = saved["changes"]
    assert [r["commit"] for r in rows] == [fake.builds[i] for i in (7, 15, 24, 31)]
    assert rows[2]["candidates"] == [fake.builds[23], fake.builds[24]]
    assert [r["direction"] for r in rows] == ["slower", "faster", "slower", "slower"]
    for r in rows:
        assert {"commit", "ratio", "ci", "share", "last_good"} <= set(r)
        assert r["ci"][0] <= r["ratio"] <= r["ci"][1]
    assert sum(r["share"] for r in rows) == pytest.approx(saved["explained"])
    assert saved["counted"] == o.counted <= point_bound(4, 41)
    # each build counted once; the two that do not build were tried, never counted
    assert len(fake.built) == len(set(fake.built)) == o.counted + 2
    assert set(o.skipped) == {fake.builds[20], fake.builds[23]}
    text = render_changes(o, request)
    assert "| slower | rocksdb@1.7.0 |  | +0.40% [" in text
    assert "| faster | rocksdb@1.15.0 |  | -0.80% [" in text
    assert "one of 2: rocksdb@1.23.0, rocksdb@1.24.0" in text
    assert "below 0.25%" in text and "the named changes explain" in text
    assert f"points: {o.counted} build(s) counted (at most 24 for 4 change(s)" in text


def test_a_resumed_all_changes_reads_its_runs_again(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    fake = Fake(history(17, {5: 1.01, 12: 1.02}))
    fake.install(monkeypatch)
    request = BisectRequest(builds=fake.builds, benchmark="kv", step="x", all_changes=True)
    first = AllChanges(request, tmp_path, print).run()
    fake.built.clear()
    again = AllChanges.resume(tmp_path, print).run()
    assert fake.built[:2] == [fake.builds[0], fake.builds[-1]]  # the ends: a cache hit
    assert [c.commit for c in again.changes] == [c.commit for c in first.changes]
    assert [c.commit for c in first.changes] == [fake.builds[5], fake.builds[12]]
    assert [p.run for p in again.points] == [p.run for p in first.points]


def test_a_resume_measures_again_a_point_whose_build_builds_under_another_key(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A point measured before a resume is another build's when dbregress now builds its
    commit under another cache key (its fixed options moved): it is counted again, never
    compared with the new builds; the points whose keys held are reused."""
    fake = Fake(history(17, {5: 1.01, 12: 1.02}))
    fake.install(monkeypatch)
    request = BisectRequest(builds=fake.builds, benchmark="kv", step="x", all_changes=True)
    first = AllChanges(request, tmp_path, print).run()
    moved = fake.builds[8]
    assert moved in {p.mid for p in first.points}
    for p in first.points:  # each run records the keys it built, as a real run.json does
        keys = {b: f"key-{b}" for b in (p.lo, p.mid, p.hi)}
        run = tmp_path / "runs" / p.run
        run.mkdir(parents=True, exist_ok=True)
        builds = {label_of(fake.builds.index(b), b): {"cache_key": k} for b, k in keys.items()}
        (run / "run.json").write_text(json.dumps({"builds": builds}))
    monkeypatch.setattr(Keys, "now", lambda self, b: f"key-{b}" + ("-new" if b == moved else ""))
    lines: list[str] = []
    again = AllChanges.resume(tmp_path, lines.append).run()
    said = [line for line in lines if "measuring its point again" in line]
    stale = [p for p in first.points if moved in (p.lo, p.mid, p.hi)]
    assert len(said) == len(stale) >= 1
    assert f"built as key-{moved}; it builds as key-{moved}-new now" in said[0]
    assert sum("reusing run" in line for line in lines) == len(first.points) - len(stale)
    assert [c.commit for c in again.changes] == [c.commit for c in first.changes]


@pytest.mark.parametrize(
    ("extra", "said"),
    [
        (["--all-changes", "--lane", "time"], "--all-changes works in the cost lane only"),
        (["--min", "0.5%"], "--min is the smallest change --all-changes names"),
        (["--all-changes", "--min", "x"], "--min x: give a percentage"),
        (["--all-changes", "--direction", "slower"], "finds changes both ways"),
    ],
)
def test_all_changes_options_are_checked(
    capsys: pytest.CaptureFixture[str], extra: list[str], said: str
) -> None:
    builds = "rocksdb@7.10.2,rocksdb@8.0.0,rocksdb@10.2.1"
    assert main(["bisect", "--builds", builds, "--step", "readrandom", *extra]) == 2
    assert said in capsys.readouterr().err


def test_a_resumed_all_changes_builds_a_skipped_build_again_only_when_tried(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    fake = Fake(history(17, {5: 1.01, 12: 1.02}), {5})
    fake.install(monkeypatch)
    request = BisectRequest(builds=fake.builds, benchmark="kv", step="x", all_changes=True)
    first = AllChanges(request, tmp_path, print).run()
    assert first.changes[0].candidates == [fake.builds[5], fake.builds[6]]
    fake.built.clear()
    again = AllChanges.resume(tmp_path, print).run()
    assert fake.builds[5] not in fake.built  # not built again
    assert again.changes[0].candidates == [fake.builds[5], fake.builds[6]]
    fake.broken = set()  # fixed: --try measures it, and the change is isolated
    tried = AllChanges.resume(tmp_path, print)
    tried.add_try(fake.builds[5])
    o = tried.run()
    assert (o.changes[0].build, o.changes[0].candidates) == (fake.builds[5], [])
    assert fake.builds[5] not in o.skipped


def test_a_range_whose_interval_holds_1_but_reaches_the_minimum_is_said_undecided() -> None:
    """bench/all_changes.py with two replays a build: +0.5% and -0.8% in one half net
    -0.3%, and counts 0.06% apart gave that half 0.9975 [0.9941, 1.0009]. The split
    stopped there and said nothing of it; a change of 0.25% (or two that cancel) could
    hide in it, so it is listed as undecided against the minimum."""
    wide = Verdict("same", 0.9975, (0.9941, 1.0009), "")
    assert not reaches(wide, MIN)
    levels = history(41, {6: 1.005, 14: 0.992, 22: 1.012})

    def noisy(lo: int, i: int, hi: int) -> dict[int, Counts] | None:
        # two replays a build, 0.3% apart: every interval is wide
        return {j: [levels[j] * 0.9985, levels[j] * 1.0015] for j in (lo, i, hi)}

    found = split(41, noisy, compare, MIN)
    assert not any(c.lo < 14 <= c.hi for c in found.changes)  # not shown: -0.8% hides
    assert any(r.lo < 14 <= r.hi for r in found.undecided)  # and said to be possible
    for r in found.undecided:
        assert r.verdict.ci is not None
        assert max(1 / r.verdict.ci[0], r.verdict.ci[1]) - 1 >= MIN


def test_two_changes_that_cancel_over_the_range_are_found_through_the_measured_middle() -> None:
    """+0.6% at build 2 and -0.6% at build 6: the ends agree, but the middle build,
    measured first, differs from both; its halves are split, not dropped."""
    found, _ = run_split(history(9, {2: 1.006, 6: 1 / 1.006}))
    assert [(c.lo, c.hi) for c in found.changes] == [(1, 2), (5, 6)]


def test_the_point_bound_says_the_undecided_ranges_may_hold_more() -> None:
    """The bound printed is for the named changes; with ranges left undecided the count
    of builds may pass it, and the line says why rather than look like a failure."""
    builds = tuple(f"rocksdb@1.{i}.0" for i in range(9))
    request = BisectRequest(builds=builds, benchmark="kv", step="x", all_changes=True)
    o = Outcome(builds=list(builds))
    o.counted = 5
    o.ranges = [RangeRow(builds[0], builds[4], "undecided", 1.002, (0.999, 1.005), None)]
    text = render_changes(o, request)
    assert (
        "(at most 3 for 0 change(s) among 8 increments, or more with 1 range(s) undecided)" in text
    )
    o.ranges = []
    assert "among 8 increments), " in render_changes(o, request)
    # smaller changes that add up to the minimum are split too: beyond the bound, said
    o.ranges = [RangeRow(builds[0], builds[4], "below", 1.002, (1.001, 1.003), None)]
    assert "among 8 increments, or more with 1 range(s) of smaller changes)" in render_changes(
        o, request
    )
    o.counted = 3
    assert "among 8 increments), " in render_changes(o, request)


def test_ranges_with_no_change_shown_are_said_not_dropped() -> None:
    """Two changes that cancel inside a range its ends cannot tell apart, and small ones
    that add up, leave ranges with no change shown: each is kept (quiet), and the table
    says what a range measured at its ends only cannot rule out."""
    found, _ = run_split(history(41, {12: 1.05, 14: 1 / 1.05}))
    assert found.changes == [] and found.quiet  # the +5% and -5% cancel in 0..20
    assert any(r.lo <= 12 and r.hi >= 14 for r in found.quiet)
    builds = tuple(f"rocksdb@1.{i}.0" for i in range(41))
    request = BisectRequest(builds=builds, benchmark="kv", step="x", all_changes=True)
    o = Outcome(builds=list(builds))
    o.counted = len(found.measured)
    o.ranges = [
        RangeRow(builds[r.lo], builds[r.hi], "quiet", r.verdict.ratio, r.verdict.ci, None)
        for r in found.quiet
    ]
    text = render_changes(o, request)
    assert f"| {len(found.quiet)} range(s) |  | no change shown (each within ±0.25%)" in text
    assert "changes inside it that add up, or that cancel, are not ruled out" in text
