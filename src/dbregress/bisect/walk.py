"""The bisection itself: its ends built first, then points measured and judged until two
builds of the list bracket the change; builds that fail are skipped, a failure common to
many builds stops it, and the answer is a single build only when the evidence isolates
one (docs/bisect.md). The building and skipping is building.py's, bisect.json and --try
state.py's, a point's lab and verdicts points.py's; the walk and its rule are here."""

from __future__ import annotations

import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from dbregress import provision
from dbregress.bisect.building import Builder, first_line
from dbregress.bisect.builds import label_of, shown, spec_of
from dbregress.bisect.model import (
    DIRECTIONS,
    BisectError,
    BisectPoint,
    BisectRequest,
    CurrentPoint,
    Notify,
    Outcome,
    load_state,
)
from dbregress.bisect.points import check_step, failures_only_of, point_lab, point_of
from dbregress.bisect.state import Keys, interrupted_run, save_state, tried_build
from dbregress.model import interrupts
from dbregress.model.errors import (
    BuildMoved,
    DbregressError,
    InternalError,
    Interrupted,
    StoreError,
)
from dbregress.workflow.lab_run import run_lab, runner_for

if TYPE_CHECKING:
    from dbregress.execution.runner import Runner
    from dbregress.lab.file import Lab

Where = tuple[str, str, str, int]  # a point: lo, mid, hi and its attempt


def clock(seconds: float) -> str:
    s = max(0, int(seconds))
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}"


class Bisection:
    def __init__(
        self,
        request: BisectRequest,
        root: Path,
        notify: Notify,
        scheduler: str | None = None,
        tls: Path | None = None,
    ) -> None:
        """`scheduler`: a fleet's Dask scheduler to measure the points on (docs/fleet.md),
        `tls` this host's fleet certificates; the bisection itself and its state stay here."""
        self.request, self.root, self.notify = request, root, notify
        self.scheduler, self.tls = scheduler, tls
        self.builds = list(request.builds)
        self.labels = {b: label_of(i, b) for i, b in enumerate(self.builds)}
        self.outcome = Outcome(builds=list(self.builds))
        self.done: dict[tuple[str, str, str, int], BisectPoint] = {}  # measured before a resume
        self.current: CurrentPoint | None = None  # the point being measured
        self.keys = Keys(request.flavors, self.labels, root / "runs", self._say)
        self.started = time.monotonic()
        self.root.mkdir(parents=True, exist_ok=True)
        # builds and skips; _fetch looked up at each call (tests replace it)
        self.builder = Builder(
            self.builds, self.outcome, root, lambda b: self._fetch(b), self._say, self._save
        )

    @classmethod
    def resume(
        cls, root: Path, notify: Notify, scheduler: str | None = None, tls: Path | None = None
    ) -> Bisection:
        saved = load_state(root)
        b = cls(saved.request, root, notify, scheduler, tls)
        b.done = {(p.lo, p.mid, p.hi, p.attempt): p for p in saved.points}
        b.outcome.skipped = saved.skipped
        b.outcome.tries = saved.tries
        b.current = saved.current
        return b

    def add_try(self, text: str) -> str:
        """--try: a skipped build (its spec, its label, or its commit id's first digits)
        to measure in the final bracket; the build it names."""
        build = tried_build(text, self.outcome.skipped, self.labels)
        if build not in self.outcome.tries:
            self.outcome.tries.append(build)
        self._save()
        return build

    def _save(self) -> None:
        save_state(self.root, self.request, self.outcome, self.current)

    def _say(self, text: str) -> None:
        """A progress line (stderr, terminal or not), with the time since the start."""
        self.notify(f"bisect [{clock(time.monotonic() - self.started)}] {text}")

    def _fetch(self, build: str) -> None:
        """Build or fetch one build of the list (a cache hit when it was built before)."""
        provision.fetch(spec_of(build, self.request.flavors))

    def _measure(self, lo: str, mid: str, hi: str, attempt: int) -> BisectPoint:
        lab = point_lab(self.request, self.labels, self.root / "labs", lo, mid, hi, attempt)
        t0 = time.monotonic()
        again = interrupted_run(self.root, self.current, lo, mid, hi, attempt)
        again = self.keys.resumable(again, (lo, mid, hi, self.builds[0]), self._say)
        # A point's run is part of the bisection (bisect.json), not of a lab's history:
        # it is indexed in the bisection's own (runs/history.sqlite), whose counts of the
        # builds a later point shares give it a measured noise floor (points.verdict_of).
        runs = self.root / "runs"
        start = partial(runner_for, lab, runs, self.notify, scheduler=self.scheduler, tls=self.tls)
        runner = run_point(self, start, lab, again, (lo, mid, hi, attempt))
        took = time.monotonic() - t0
        return point_of(self.request, self.labels, lab, runner.path, lo, mid, hi, attempt, took)

    def _point(self, lo: int, i: int, hi: int) -> BisectPoint | None:
        """The point (lo, i, hi) measured until decided (or out of attempts); None if
        the i-th build could not be built or started (it is then skipped)."""
        b_lo, b_mid, b_hi = self.builds[lo], self.builds[i], self.builds[hi]
        built, point = i in (lo, hi), None
        n = len(self.outcome.points) + 1
        between = f"{shown(b_mid)} against {shown(b_lo)} and {shown(b_hi)}"
        for attempt in range(1, self.request.attempts + 1):
            point = self.keys.reusable(
                self.done.get((b_lo, b_mid, b_hi, attempt)), self._say, self.builds[0]
            )
            if point is not None and point.mid_vs_good is None and b_lo != self.builds[0]:
                point = None  # measured by a dbregress that judged it against lo only
            if point is not None:  # measured before the bisection was resumed
                self._say(f"point {n}: {between}: reusing run {point.run}")
                self.outcome.points.append(point)
                if decided(self.outcome.direction, point):
                    break
                continue
            if not built:
                if not self.builder.build_inner(i, lo, hi):
                    return None
                built = True
            self._say(
                f"point {n}: measuring {self.builder.name(i)} against {shown(b_lo)} and "
                f"{shown(b_hi)} (run {attempt})"
            )
            try:
                interrupts.check()
                point = self._measure(b_lo, b_mid, b_hi, attempt)
            except (Interrupted, InternalError):
                raise  # a bug in dbregress is no failed build (exit 3)
            except DbregressError as e:
                if i in (lo, hi) or not self._only(b_mid):
                    raise
                self.current = None
                self.builder.failed(i, e, lo, hi)
                return None
            self.outcome.points.append(point)
            self.current = None
            self._save()
            v = point.judged()
            ratio = f" ({v.ratio:.4f})" if v.ratio is not None else ""
            against = shown(self.builds[0] if point.mid_vs_good is not None else b_lo)
            self._say(
                f"point {n}: measured in {point.took_s:.0f} s: {shown(b_mid)} is "
                f"{v.word} against {against}{ratio}"
            )
            if decided(self.outcome.direction, point):
                break
            self._say(f"point {n}: {shown(b_mid)} is {v.word}; measuring again with more replays")
        return point

    def _only(self, build: str) -> bool:
        """Whether every failure of the last run was a job of `build`."""
        return failures_only_of(self.root / "runs", self.labels[build])

    def run(self) -> Outcome:
        self.started = time.monotonic()
        try:
            return self._run()
        finally:
            self.outcome.took_s = round(time.monotonic() - self.started, 1)
            self._save()

    def check_step(self) -> None:
        """The step is one the benchmark reports, at these sizes: said before any run."""
        ends = [(self.labels[b], b) for b in dict.fromkeys((self.builds[0], self.builds[-1]))]
        check_step(self.request, ends, self.root / "labs" / "check.toml")

    def _run(self) -> Outcome:
        if len(self.builds) < 2:
            raise BisectError("a bisection needs at least two builds, good and bad")
        self.check_step()
        self._save()  # before the first build: a bisection killed while building resumes
        self.builder.build_ends()
        lo, hi = 0, len(self.builds) - 1
        o = self.outcome
        while True:
            i = self.builder.next(lo, hi)
            if i is None:
                if o.direction is not None:
                    break
                i = hi  # the first point has the ends and, if there is one, a build between
            point = self._point(lo, i, hi)
            if point is None:
                continue  # skipped: another build between the same ends
            bracket = self._rule(point, lo, i, hi)
            if bracket is None:
                return o
            lo, hi = bracket
        final = self._tried(lo, hi)
        if final is not None:
            self._say(answer(self.outcome, *final))
        return o

    def _rule(self, point: BisectPoint, lo: int, i: int, hi: int) -> tuple[int, int] | None:
        """The bracket after a point, with the point's decision; None when the
        bisection stops there (nothing to bisect, or a point that stayed undecided).
        Every build is judged against the original good end (point.judged()): lo stays
        a build that is not in the direction looked for against it, hi one that is."""
        o = self.outcome
        b_lo, b_mid, b_hi = self.builds[lo], self.builds[i], self.builds[hi]
        if o.direction is None:
            o.stopped = first_direction(o, self.request, point, b_lo, b_hi)
            if o.stopped:
                self._say(o.stopped)
                return None
            if i == hi:
                between = "its neighbour" if hi == lo + 1 else "no build between could be built"
                point.decision = f"{b_hi} is {o.direction} than {b_lo}; {between}"
                self._say(point.decision)
                return lo, hi
        judged, good = point.judged(), self.builds[0]
        word = judged.word
        against = "the good end " + good if point.mid_vs_good is not None else b_lo
        note_other_way(o, point)
        if word == o.direction:
            bracket = lo, i
            point.decision = f"{b_mid} is {word} than {against}: the change is at or before it"
            if point.mid_vs_hi.word in DIRECTIONS:
                point.decision += (
                    f" ({b_mid} also differs from {b_hi}: more than one change; "
                    "following the first)"
                )
        elif word == "same":
            bracket = i, hi
            point.decision = f"{b_mid} is the same as {against}: the change is after it"
        elif word in DIRECTIONS:  # the other way: better than the good end
            bracket = i, hi
            point.decision = (
                f"{b_mid} is {word} than {against}, the other way: not the change; it is "
                f"after {b_mid}, and every later build is still judged against {good}"
            )
        else:
            o.stopped = (
                f"{b_mid} stayed {word} against {against} after {point.attempt} run(s) "
                f"({judged.reason}); the first bad build is in ({b_lo}, {b_hi}]; no guess"
            )
            self._say(o.stopped)
            return None
        self._say(_short_specs(point.decision, (b_lo, b_mid, b_hi, good)))
        self._save()
        return bracket

    def _tried(self, lo: int, hi: int) -> tuple[int, int] | None:
        """The final bracket after the skipped builds the user asked to measure (--try):
        each one still inside it is measured against its ends, in the order asked."""
        o = self.outcome
        for build in list(o.tries):
            inside = [j for j in range(lo + 1, hi) if self.builds[j] == build]
            if not inside:
                self._say(f"--try {shown(build)}: no longer inside the bracket; not measured")
                continue
            point = self._point(lo, inside[0], hi)
            if point is None:  # it failed again: asked for again with another --try
                o.tries.remove(build)
                continue
            bracket = self._rule(point, lo, inside[0], hi)
            if bracket is None:
                return None
            lo, hi = bracket
        return lo, hi


def run_point(
    b: Bisection, start: Callable[..., Runner], lab: Lab, again: Path | None, at: Where
) -> Runner:
    """The point's run, resuming the interrupted run `again` when it can be: one that
    cannot be continued (another method, since dbregress or valgrind changed; another
    build than its finished jobs measured, refused before any job runs) is said and the
    point measured in a new run, never taken for its build's failure (which would skip
    the build). Any other store failure stops the bisection with `again` still the
    point's run, to resume."""
    if again is not None:
        runner: Runner | None = None
        try:
            runner = started(b, start, again, at)
            run_lab(runner, lab, b.notify)
            return runner
        except StoreError as e:
            if runner is not None and not isinstance(e, BuildMoved):
                raise  # failed while the resumed run ran: it stays the point's, to resume
            b._say(f"{first_line(e)}; measuring the point in a new run")
    runner = started(b, start, None, at)
    run_lab(runner, lab, b.notify)
    return runner


def started(b: Bisection, start: Callable[..., Runner], again: Path | None, at: Where) -> Runner:
    """The point's runner (the interrupted run `again` resumed, else a new run),
    recorded in bisect.json as the point being measured."""
    runner = start(resume=again)
    lo, mid, hi, attempt = at
    b.current = {"lo": lo, "mid": mid, "hi": hi, "attempt": attempt, "run": runner.path.name}
    b._save()
    if again is not None:
        b._say(f"resuming the interrupted run {runner.path.name}")
    return runner


def first_direction(
    o: Outcome, request: BisectRequest, point: BisectPoint, b_lo: str, b_hi: str
) -> str | None:
    """The first point: sets the direction to follow when the ends differ in one (the
    one asked with --direction, or theirs); else why there is none to follow."""
    ends, asked, step = point.hi_vs_lo, request.direction, request.step
    if ends.word == "same":
        o.ends_same = True
        return f"{b_hi} is the same as {b_lo} in {step} ({ends.reason}): nothing to bisect"
    if ends.word not in DIRECTIONS:
        return (
            f"{b_hi} stayed {ends.word} against {b_lo} in {step} after "
            f"{point.attempt} run(s) ({ends.reason}): no direction to follow; no guess"
        )
    if asked is not None and ends.word != asked:
        o.ends_other_way = True
        return (
            f"{b_hi} is {ends.word} than {b_lo} in {step}, not {asked} (--direction): "
            f"nothing {asked} to bisect between the ends; a range with changes both "
            "ways is what --all-changes splits"
        )
    o.direction = ends.word
    return None


def note_other_way(o: Outcome, point: BisectPoint) -> None:
    """Note a build that moved the other way (against the good end or its lo): the
    range holds changes both ways."""
    assert o.direction is not None
    other = DIRECTIONS[1 - DIRECTIONS.index(o.direction)]
    moved = other in (point.judged().word, point.mid_vs_lo.word)
    if moved and point.mid not in o.other_way:
        o.other_way.append(point.mid)


def decided(direction: str | None, p: BisectPoint) -> bool:
    """Whether the point p needs no further run; `direction` None: it is the first point
    (do the ends differ?)."""
    if direction is None:
        if p.hi_vs_lo.word == "same":
            return True
        if p.hi_vs_lo.word not in DIRECTIONS:
            return False
    return p.mid == p.hi or p.judged().word in (*DIRECTIONS, "same")


def answer(o: Outcome, lo: int, hi: int) -> str:
    """The first bad build when the final bracket (lo, hi) of o.builds isolates it; else
    the builds it may be: the skipped ones inside, then hi (set in o, and said)."""
    builds = o.builds
    inside = [builds[j] for j in range(lo + 1, hi) if builds[j] in o.skipped]
    o.last_good = builds[lo]
    if inside:
        o.candidates = [*inside, builds[hi]]
        return (
            f"the first bad build is one of {len(o.candidates)}: "
            f"{', '.join(shown(b) for b in o.candidates)} (last good {shown(o.last_good)})"
            f"{both_ways(o)}"
        )
    o.first_bad = builds[hi]
    return f"first bad build {o.first_bad} (last good {o.last_good}){both_ways(o)}"


def both_ways(o: Outcome) -> str:
    """What an answer adds when the range holds changes both ways."""
    if not o.other_way:
        return ""
    names = ", ".join(shown(b) for b in o.other_way)
    return (
        f"; the range holds changes both ways ({names} moved the other way): every build "
        f"was judged against the good end, and the answer is where they become "
        f"{o.direction} than it; `--all-changes` names every change"
    )


def _short_specs(text: str, builds: tuple[str, ...]) -> str:
    for build in builds:
        text = text.replace(build, shown(build))
    return text
