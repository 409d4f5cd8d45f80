"""A stopped bisection resumes from its bisect.json: measured points are reused, the
interrupted point's run is resumed, skips are remembered, a bisection killed while
building its ends resumes, and `--try` measures a skipped build once it builds
(simulated builds and levels, as in test_bisect_rule.py: no engines)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from dbregress.bisect import (
    BisectError,
    Bisection,
    BisectPoint,
    BisectRequest,
    Outcome,
    Verdict,
    load_state,
    walk,
)
from dbregress.bisect.state import Keys, recorded_keys
from dbregress.cli.main import main
from dbregress.model.errors import BuildNotFound, ProvisionError, StoreError
from tests.unit.test_bisect_rule import Fake, build_error, name, step_at

LEVELS = [100.0] * 11 + [110.0] * 6  # the first bad build is the 12th of 17


class Stop(Exception):
    """Ctrl-C, a crash or a kill in the middle of something."""


def stopping(monkeypatch: pytest.MonkeyPatch, fake: Fake, at: int, log: list[Any]) -> None:
    """The fake's measuring layer, stopped in the middle of its `at`-th point (after it
    recorded its run folder as the point being measured); `log` gets (mid, resumed)."""
    measure = Bisection._measure

    def measured(self: Bisection, lo: str, mid: str, hi: str, attempt: int) -> BisectPoint:
        resumed = self.current is not None and self.current.get("mid") == mid
        self.current = {"lo": lo, "mid": mid, "hi": hi, "attempt": attempt, "run": f"r-{mid}"}
        self._save()
        log.append((mid, resumed))
        if len(log) == at:
            raise Stop
        return measure(self, lo, mid, hi, attempt)

    monkeypatch.setattr(Bisection, "_measure", measured)


def test_a_stopped_bisection_resumes_where_it_stopped(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    whole = Fake(LEVELS)
    whole.install(monkeypatch)
    straight = whole.bisection(tmp_path / "straight").run()

    first = Fake(LEVELS)
    first.install(monkeypatch)
    log: list[Any] = []
    stopping(monkeypatch, first, 3, log)
    with pytest.raises(Stop):
        first.bisection(tmp_path / "b").run()
    saved = load_state(tmp_path / "b")
    assert saved.request == BisectRequest(builds=first.builds, benchmark="kv", step="revrange")
    assert len(saved.points) == 2
    assert saved.current is not None and saved.current["mid"] == log[2][0]

    again = Fake(LEVELS)
    again.install(monkeypatch)
    log2: list[Any] = []
    stopping(monkeypatch, again, 0, log2)
    lines: list[str] = []
    o = Bisection.resume(tmp_path / "b", lines.append).run()
    assert (o.first_bad, o.last_good) == (straight.first_bad, straight.last_good)
    assert o.first_bad == name(11)
    assert [p.mid for p in o.points] == [p.mid for p in straight.points]
    # the two finished points were reused, not measured; the interrupted one resumed
    assert sum("reusing run" in line for line in lines) == 2
    assert log2[0] == (log[2][0], True)
    assert len(log) - 1 + len(log2) == len(whole.measured)
    saved_json = json.loads((tmp_path / "b" / "bisect.json").read_text())
    assert saved_json["first_bad"] == name(11) and saved_json["current"] is None


def test_a_resumed_bisection_with_skips_takes_the_same_path(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    broken: dict[int, Exception] = {16: build_error(name(16)), 23: build_error(name(23))}
    levels = step_at(32, 21)
    whole = Fake(levels, broken)
    whole.install(monkeypatch)
    straight = whole.bisection(tmp_path / "straight").run()
    assert set(straight.skipped) == {name(16), name(23)} and straight.first_bad == name(21)

    first = Fake(levels, broken)
    first.install(monkeypatch)
    log: list[Any] = []
    stopping(monkeypatch, first, len(whole.measured), log)  # the last point
    with pytest.raises(Stop):
        first.bisection(tmp_path / "b").run()
    again = Fake(levels, broken)
    again.install(monkeypatch)
    o = Bisection.resume(tmp_path / "b", lambda _: None).run()
    assert [p.mid for p in o.points] == [p.mid for p in straight.points]
    assert again.measured == [whole.measured[-1]]  # only the interrupted point
    # no skipped build is built again: the ends, and the interrupted point's mid
    assert again.built == [name(0), name(31), whole.measured[-1]]
    assert o.first_bad == straight.first_bad


def test_a_bisection_killed_while_building_its_ends_resumes(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    fake = Fake(step_at(9, 5))
    fake.install(monkeypatch)

    def killed(self: Bisection, build: str) -> None:
        raise Stop  # the first minute: the good end is still compiling

    monkeypatch.setattr(Bisection, "_fetch", killed)
    with pytest.raises(Stop):
        fake.bisection(tmp_path).run()
    saved = load_state(tmp_path)  # written before the first build
    assert saved.points == [] and saved.current is None
    fake.install(monkeypatch)
    o = Bisection.resume(tmp_path, lambda _: None).run()
    assert o.first_bad == name(5)


def test_try_measures_a_skipped_candidate_once_it_builds(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    levels = step_at(32, 21)
    broken: dict[int, Exception] = {j: build_error(name(j)) for j in (21, 22, 23)}
    fake = Fake(levels, broken)
    fake.install(monkeypatch)
    o = fake.bisection(tmp_path).run()
    assert o.candidates == [name(21), name(22), name(23), name(24)]
    points = len(o.points)

    # 22 still does not build: the answer stays "one of", and the try is used up
    fake.built.clear()
    b = Bisection.resume(tmp_path, lambda _: None)
    assert b.add_try("b22-1.22.0") == name(22)
    o = b.run()
    assert o.candidates == [name(21), name(22), name(23), name(24)]
    assert o.tries == [] and name(22) in fake.built and len(o.points) == points

    # the user fixed the patch: 22 builds (slower), then 21 (slower): isolated
    del fake.broken[22], fake.broken[21]
    b = Bisection.resume(tmp_path, lambda _: None)
    b.add_try(name(22))
    b.add_try(name(21))
    o = b.run()
    assert o.first_bad == name(21) and o.candidates == [] and o.last_good == name(20)
    assert [p.mid for p in o.points[-2:]] == [name(22), name(21)]
    # resumed again: the tried points are reused, the answer the same
    fake.measured.clear()
    o = Bisection.resume(tmp_path, lambda _: None).run()
    assert o.first_bad == name(21) and fake.measured == []


def test_try_names_only_a_skipped_build(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    fake = Fake(step_at(9, 4), {4: BuildNotFound("gone")})
    fake.install(monkeypatch)
    fake.bisection(tmp_path).run()
    b = Bisection.resume(tmp_path, lambda _: None)
    with pytest.raises(BisectError, match=r"--try rocksdb@1\.5\.0: is not one .*: rocksdb@1\.4\.0"):
        b.add_try(name(5))
    clean = Fake(step_at(9, 4))
    clean.install(monkeypatch)
    clean.bisection(tmp_path / "clean").run()
    with pytest.raises(BisectError, match="skipped no build"):
        Bisection.resume(tmp_path / "clean", lambda _: None).add_try(name(4))


def test_a_common_failure_fixed_then_resumed_builds_those_builds_again(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    missing = ProvisionError("configure failed (exit 1): configure: error: bison not found")
    fake = Fake(step_at(40, 13), dict.fromkeys(range(1, 39), missing))
    fake.install(monkeypatch)
    with pytest.raises(BisectError, match="bison not found"):
        fake.bisection(tmp_path).run()
    fake.broken.clear()  # bison installed
    o = Bisection.resume(tmp_path, lambda _: None).run()
    assert o.first_bad == name(13) and o.skipped == {}


def test_resuming_something_else_says_what_to_give(tmp_path: Path) -> None:
    (tmp_path / "bisect.json").write_text("{}")
    with pytest.raises(BisectError, match="not a bisection that can be resumed"):
        load_state(tmp_path)


@pytest.mark.parametrize(
    ("benchmark", "builds", "step", "known"),
    [
        ("kv", ("rocksdb@7.10.2", "rocksdb@10.2.1"), "readrandom", True),
        ("kv", ("rocksdb@7.10.2", "rocksdb@10.2.1"), "qp100", False),
        ("insert", ("postgres@12.20.0", "postgres@17.2.0"), "qp100", True),
        ("insert", ("postgres@12.20.0", "postgres@17.2.0"), "qp101", False),
    ],
)
def test_an_unknown_step_is_said_before_any_run(
    tmp_path: Path, benchmark: str, builds: tuple[str, ...], step: str, known: bool
) -> None:
    b = Bisection(BisectRequest(builds=builds, benchmark=benchmark, step=step), tmp_path, print)
    if known:
        b.check_step()
    else:
        with pytest.raises(BisectError, match=f"{step}.*steps are"):
            b.check_step()


@pytest.mark.parametrize(
    ("option", "said"),
    [
        (["--lane", "time"], "--lane time (it has cost)"),
        (["--replays", "5"], "--replays 5 (it has 3)"),
        (["--size", "keys=5000"], "--size keys=5000 (it has none)"),
        (["--recount"], "--recount true (it has false)"),
        (["--direction", "faster"], "--direction faster (it has none)"),
    ],
)
def test_resume_refuses_another_way_of_measuring_in_one_line(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    option: list[str],
    said: str,
) -> None:
    fake = Fake(LEVELS)
    fake.install(monkeypatch)
    log: list[Any] = []
    stopping(monkeypatch, fake, 2, log)
    with pytest.raises(Stop):
        fake.bisection(tmp_path / "b").run()
    before = (tmp_path / "b" / "bisect.json").read_text()
    assert main(["bisect", "--resume", str(tmp_path / "b"), *option]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "that bisection measures otherwise" in err, err
    assert said in err
    assert (tmp_path / "b" / "bisect.json").read_text() == before  # nothing measured
    # the same value as the saved one is no difference
    same = {"--lane": "cost", "--replays": "3"}.get(option[0])
    if same is not None:
        monkeypatch.setattr(Bisection, "run", lambda self: Outcome(builds=[], stopped=None))
        assert main(["bisect", "--resume", str(tmp_path / "b"), option[0], same]) == 0


def test_an_interrupted_run_that_cannot_be_resumed_is_measured_anew_not_skipped(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The interrupted point's run was measured by another method (dbregress changed
    between the stop and the resume): its refusal was taken for the build's failure and
    the build skipped (seen in tests/e2e/test_bisect.py's Ctrl-C test, which then
    answered "one of"); the point is measured in a new run instead."""
    builds = Fake(LEVELS).builds
    lines: list[str] = []
    b = Bisection(
        BisectRequest(builds=builds, benchmark="kv", step="readrandom"), tmp_path, lines.append
    )
    (tmp_path / "runs" / "r-old").mkdir(parents=True)
    (tmp_path / "runs" / "r-old" / "run.json").write_text("{}")
    b.current = {"lo": builds[0], "mid": builds[8], "hi": builds[16], "attempt": 1, "run": "r-old"}
    started: list[Path | None] = []

    def runner_for(*args: Any, resume: Path | None = None, **kw: Any) -> Any:
        started.append(resume)
        if resume is not None:
            raise StoreError(f"cannot resume {resume}: it was measured by another method (x)")
        return type("R", (), {"path": tmp_path / "runs" / "r-new"})()

    v = Verdict("same", 1.0, None, "simulated")
    monkeypatch.setattr(walk, "runner_for", runner_for)
    monkeypatch.setattr(walk, "run_lab", lambda *a: None)
    monkeypatch.setattr(
        walk,
        "point_of",
        lambda r, labels, lab, run, lo, mid, hi, a, t: BisectPoint(
            lo, mid, hi, run.name, a, v, v, v, t
        ),
    )
    point = b._measure(builds[0], builds[8], builds[16], 1)
    assert started == [tmp_path / "runs" / "r-old", None]
    assert point.run == "r-new" and b.current is not None and b.current["run"] == "r-new"
    assert any("measuring the point in a new run" in ln for ln in lines)


def test_keys_compare_the_good_end_and_skip_what_they_cannot_know(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A reused point is checked for every build its run measured, the good end it was
    judged against included; a fleet's run (its workers' own keys) and a build whose key
    cannot be found now (its commit gone: building it will say) are not refused."""
    builds = [name(i) for i in range(4)]
    labels = {b: f"b{i}" for i, b in enumerate(builds)}
    run = tmp_path / "runs" / "r1"
    run.mkdir(parents=True)
    record: dict[str, Any] = {"builds": {f"b{i}": {"cache_key": f"k{i}"} for i in range(4)}}
    (run / "run.json").write_text(json.dumps(record))
    now = {b: f"k{i}" for i, b in enumerate(builds)}
    monkeypatch.setattr(Keys, "now", lambda self, b: now[b])
    keys = Keys({}, labels, tmp_path / "runs")
    v = Verdict("same", 1.0, None, "")
    point = BisectPoint(builds[1], builds[2], builds[3], "r1", 1, v, v, v, 1.0)
    said: list[str] = []
    assert keys.reusable(point, said.append, builds[0]) is point and not said
    now[builds[0]] = "k0-new"  # the good end, a column of the point's run
    assert keys.reusable(point, said.append, builds[0]) is None
    moved = f"run r1 measured {builds[0]} built as k0; it builds as k0-new now"
    assert said == [f"{moved}: measuring its point again"]
    record["hosts"] = {"w1": {}}
    (run / "run.json").write_text(json.dumps(record))
    assert recorded_keys(run) == {}
    assert keys.reusable(point, said.append, builds[0]) is point
    told: list[str] = []  # a run whose builds are not checked is said, never silently
    Keys({}, labels, tmp_path / "runs", told.append).rebuilt(run, builds)
    assert told == [
        "run r1: its builds' cache keys are not checked: it ran on a fleet, "
        "each worker's build with its own compiler"
    ]


def test_a_build_whose_key_cannot_be_found_is_not_refused(tmp_path: Path) -> None:
    gone = f"postgres@src:{tmp_path / 'no-tree'}#abc123"
    assert Keys({}, {gone: "b0"}, tmp_path).now(gone) is None


def test_a_resumed_point_run_is_started_anew_only_when_refused_before_its_jobs(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """run_point: a resumed run refused at reopen (another method) or at its builds
    (BuildMoved) gives way to a new run, said; a store failure while the resumed run
    runs stops the bisection with that run still the point's, to resume again."""
    from dbregress.model.errors import BuildMoved

    class Run:
        def __init__(self, name: str) -> None:
            self.path = tmp_path / name

    class B:
        current: Any = None
        notify = print

        def __init__(self) -> None:
            self.said: list[str] = []

        def _save(self) -> None:
            pass

        def _say(self, text: str) -> None:
            self.said.append(text)

    again = tmp_path / "old"
    at = ("lo", "mid", "hi", 1)

    def start(resume: Path | None) -> Run:
        return Run("old" if resume is not None else "new")

    for failure, anew in ((BuildMoved("b moved"), True), (StoreError("disk full"), False)):
        ran: list[str] = []

        def run_lab(
            runner: Any, lab: Any, notify: Any, failure: Exception = failure, ran: list[str] = ran
        ) -> None:
            ran.append(runner.path.name)
            if runner.path.name == "old":
                raise failure

        monkeypatch.setattr(walk, "run_lab", run_lab)
        b = B()
        if anew:
            assert walk.run_point(b, start, None, again, at).path.name == "new"  # type: ignore[arg-type]
            assert ran == ["old", "new"] and "b moved; measuring the point in a new run" in b.said
        else:
            with pytest.raises(StoreError, match="disk full"):
                walk.run_point(b, start, None, again, at)  # type: ignore[arg-type]
            assert ran == ["old"] and b.current["run"] == "old"
