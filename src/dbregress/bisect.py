"""Bisection: the first build, in an ordered list, whose step differs from a good one's.

The list is the registry's versions between a good and a bad build (what `dbregress
versions` prints), or a user's ordered builds. Each point is a real run of a generated
lab with three columns, the bracket's two ends and the build between them (`lo`, `mid`,
`hi`), judged by the verdict machinery: the cost lane by default (exact counts, a few
replays decide), the time lane when asked (repeats added while undecided). The first run
confirms that the ends differ and in which direction (`slower` or `faster`); then

- `mid` differs from `lo` in that direction: the change arrived at or before `mid`
  (hi = mid); if `mid` also differs from `hi`, there is more than one change and the
  search follows the first;
- `mid` is `same` as `lo`: it arrived after `mid` (lo = mid);
- `mid` differs from `lo` the other way (it is better than the good build): it is not
  the change, which came after it (lo = mid, and later points are judged against it);
- `undecided`: the point is measured again with more replays (repeats), up to
  `attempts` times; then the bisection stops and says where, never guessing.

A build that cannot be fetched or started is skipped (left out of the list, as `git
bisect skip` does), and the run that failed is kept. Every run is stored under the
bisection's folder, with bisect.json recording the request, the path taken and the point
being measured. A stopped bisection (Ctrl-C, a crash) resumes from that file: the path is
walked again, every point already measured is reused, and the run of the interrupted
point is resumed (its finished jobs and counting replays kept).
"""

from __future__ import annotations

import copy
import json
import re
import time
import tomllib
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, NotRequired, TypeAlias, TypedDict

from dbregress import benchmarks, provision
from dbregress.analysis.compare import compare_run
from dbregress.analysis.cost import cost_verdicts
from dbregress.errors import BuildNotFound, DbregressError, LabError, ProvisionError
from dbregress.lab import Lab, parse_lab
from dbregress.provision import source
from dbregress.provision.versioning import version_key
from dbregress.store.files import write_atomic
from dbregress.store.replays import load_lane, load_replays
from dbregress.store.run import read_run
from dbregress.workflow import run_lab, runner_for

Notify = Callable[[str], None]

LANES = ("cost", "time")
BENCHMARKS = ("insert", "kv", "micro")
# A benchmark size as a lab file's [insert], [kv] or [micro] table holds it.
Size: TypeAlias = int | float | str | list[str]
# The benchmark's sizes at a bisection's points: the quickstart's (a point takes a minute
# or two); `sizes` overrides any of them.
DEFAULT_SIZES: dict[str, dict[str, Size]] = {
    "insert": {
        "clients": 1,
        "load_rows": 100000,
        "write_rows": 20000,
        "query_seconds": 1,
        "warmup_s": 0.5,
        "cleanup_wait_s": 1,
    },
    "kv": {"keys": 200000, "seconds": 1, "short_seconds": 1, "warmup_s": 0.5},
    "micro": {"tables": 1, "rows": 100000, "seconds": 1, "warmup_s": 0.5},
}
ATTEMPTS = 3  # runs of one point at most (more replays or repeats each time)
DIRECTIONS = ("slower", "faster")


class BisectError(DbregressError):
    """A bisection that cannot start or cannot go on (said with where it stopped)."""


@dataclass(frozen=True)
class BisectRequest:
    builds: tuple[str, ...]  # ordered build specs, good first, bad last
    benchmark: str
    step: str
    config: str | None = None  # None: the engine's default profile
    lane: str = "cost"
    sizes: dict[str, Size] = field(default_factory=dict)
    replays: int = 3  # counting replays per column at a point's first attempt
    attempts: int = ATTEMPTS
    # Releases, then commits: the source tree whose commits between the two adjacent
    # releases the registry bisection ends on are bisected next (their release tags),
    # in this flavor, first-parent unless all_commits.
    then_src: str | None = None
    then_flavor: str = "rel"
    then_all_commits: bool = False


@dataclass
class Verdict:
    word: str  # same | slower | faster | undecided
    ratio: float | None
    ci: tuple[float, float] | None
    reason: str


@dataclass
class BisectPoint:
    lo: str
    mid: str
    hi: str
    run: str  # the run folder's name
    attempt: int
    mid_vs_lo: Verdict
    mid_vs_hi: Verdict
    hi_vs_lo: Verdict
    took_s: float
    decision: str = ""


class VerdictJson(TypedDict):
    """A Verdict as bisect.json stores it (a bisection of an earlier dbregress may lack
    the reason)."""

    word: str
    ratio: float | None
    ci: list[float] | None
    reason: NotRequired[str]


class BisectPointJson(TypedDict):
    """A measured point as bisect.json stores it (asdict of a BisectPoint)."""

    lo: str
    mid: str
    hi: str
    run: str
    attempt: int
    mid_vs_lo: VerdictJson
    mid_vs_hi: VerdictJson
    hi_vs_lo: VerdictJson
    took_s: NotRequired[float]
    decision: NotRequired[str]


class CurrentPoint(TypedDict):
    """The point being measured, and its run folder, kept in bisect.json so that a
    resumed bisection continues that run instead of starting the point over."""

    lo: str
    mid: str
    hi: str
    attempt: int
    run: str


@dataclass
class Outcome:
    builds: list[str]
    direction: str | None = None
    first_bad: str | None = None
    last_good: str | None = None
    points: list[BisectPoint] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)
    stopped: str | None = None  # why it ended without an answer
    took_s: float = 0.0


def between(engine: str, good: str, bad: str, available: list[str]) -> list[str]:
    """The registry's versions from good to bad, both included, in the registry's order."""
    for v in (good, bad):
        if v not in available:
            raise BisectError(
                f"{engine}@{v} is not in the registry's list; `dbregress versions {engine}` "
                "prints the versions that can be fetched"
            )
    i, j = available.index(good), available.index(bad)
    if i == j:
        raise BisectError(f"{engine}@{good}: give two different versions")
    if i > j:
        raise BisectError(
            f"{engine}@{good} comes after {engine}@{bad} in the registry: give the good "
            "(older) version first, or use --builds for another order"
        )
    return available[i : j + 1]


def registry_builds(good: str, bad: str) -> tuple[str, ...]:
    """ENGINE@GOOD ENGINE@BAD -> every registry build spec between them, in order."""
    g, b = provision.BuildSpec.parse(good), provision.BuildSpec.parse(bad)
    if g.engine != b.engine:
        raise BisectError(f"{good} and {bad} are builds of different engines")
    versions = between(g.engine, g.version, b.version, provision.versions(g.engine))
    return tuple(f"{g.engine}@{v}" for v in versions)


def source_builds(
    engine: str, path: str, good: str, bad: str, flavor: str, first_parent: bool = True
) -> tuple[str, ...]:
    """--src PATH GOOD BAD: a build spec per commit from good to bad, in order (each
    built from the tree at that commit in `flavor` when the bisection measures it)."""
    tree = Path(path).expanduser().resolve()
    source.require_tree(engine, tree)
    source.recipe(engine, flavor)  # an unknown flavor: now, not at the first point
    commits = source.commits_between(tree, good, bad, first_parent)
    return tuple(f"{engine}@src:{tree}#{c.id}+{flavor}" for c in commits)


# The tags a project gives its releases, per engine: PostgreSQL's REL_17_2 (REL9_6_10
# before 10), MariaDB's mariadb-10.11.5, MySQL's mysql-8.0.28, RocksDB's v9.10.0.
def release_tags(engine: str, version: str) -> list[str]:
    """The tags release `version` may have in the engine's repository, likeliest first."""
    parts = list(version_key(version.split("-")[0]))
    if not parts:
        return []
    dotted = ".".join(map(str, parts))
    if engine == "postgres":
        if parts[0] >= 10:
            # Maven's 17.2.0 is PostgreSQL 17.2
            major, minor = parts[0], parts[1] if len(parts) > 1 else 0
            return [f"REL_{major}_{minor}"]
        return ["REL" + "_".join(map(str, parts[:3]))]
    if engine == "mariadb":
        return [f"mariadb-{dotted}"]
    if engine == "mysql":
        return [f"mysql-{dotted}", f"Percona-Server-{dotted}"]
    if engine == "rocksdb":
        return [f"v{dotted}", f"rocksdb-{dotted}"]
    return []


def release_commit(engine: str, tree: Path, spec: str) -> str:
    """The tag of a registry build's release in the git checkout at `tree`; BisectError
    naming the tags tried when the tree has none of them."""
    version = provision.BuildSpec.parse(spec).version
    tried = release_tags(engine, version)
    for tag in tried:
        try:
            source.resolve_commit(tree, tag)
        except BuildNotFound:
            continue
        return tag
    raise BisectError(
        f"{spec}: no release tag for it in {tree} (tried {', '.join(tried) or 'none'}); "
        f"bisect the commits yourself: dbregress bisect --src {tree} GOOD BAD"
    )


def commits_after(request: BisectRequest, outcome: Outcome) -> tuple[str, ...] | None:
    """Releases, then commits: the source builds between the two adjacent releases the
    registry bisection ended on, or None when there is no second phase."""
    if not request.then_src or not outcome.first_bad or not outcome.last_good:
        return None
    engine = provision.BuildSpec.parse(outcome.first_bad).engine
    tree = Path(request.then_src)
    good = release_commit(engine, tree, outcome.last_good)
    bad = release_commit(engine, tree, outcome.first_bad)
    return source_builds(
        engine, str(tree), good, bad, request.then_flavor, not request.then_all_commits
    )


def label_of(index: int, spec: str) -> str:
    """A column label for the index-th build of the list (labels must be unique and
    short: a path becomes its last part, a source tree's commit its first 12 digits)."""
    tail = spec.split("@", 1)[-1].rstrip("/").rsplit("/", 1)[-1]
    if "#" in tail:  # a commit of a source tree: its id and flavor say which
        ref, _, flavor = tail.partition("#")[2].partition("+")
        tail = f"{ref[:12]}-{flavor}" if flavor else ref[:12]
    clean = re.sub(r"[^A-Za-z0-9._-]", "-", tail)[:40].strip("-._") or "build"
    return f"b{index:02d}-{clean}"


def lab_text(
    request: BisectRequest, columns: list[tuple[str, str]], replays: int, name: str
) -> str:
    """The lab of one point: its columns (label, build), the benchmark's sizes, only the
    step (and what it needs) measured and counted."""
    sizes = {**DEFAULT_SIZES[request.benchmark], **request.sizes}
    if request.benchmark == "kv":
        sizes.setdefault(
            "steps", ["fillseq"] + ([request.step] if request.step != "fillseq" else [])
        )
    if request.benchmark == "micro":
        sizes.setdefault("only", [request.step])
    head = {
        "name": name,
        "benchmark": request.benchmark,
        "placement": "separate",
        "warmup_job": request.lane == "time",
        "repeats": 1 if request.lane == "cost" else f"3..{3 + 4 * replays}",
        "count": request.lane == "cost",
        "count_replays": replays,
        "count_replays_max": max(replays, 5),
        "count_steps": [request.step],
    }
    lines = [f"{k} = {_toml(v)}" for k, v in head.items()]
    for label, build in columns:
        lines += [
            "",
            "[[column]]",
            f"label = {_toml(label)}",
            f"build = {_toml(build)}",
            *([f"config = {_toml(request.config)}"] if request.config else []),
        ]
    lines += ["", f"[{request.benchmark}]"] + [f"{k} = {_toml(v)}" for k, v in sizes.items()]
    return "\n".join(lines) + "\n"


def _toml(value: Any) -> str:
    return json.dumps(value) if not isinstance(value, bool) else str(value).lower()


def _verdict_of(run: Path, comparison: str, base: str, label: str, step: str, lane: str) -> Verdict:
    """One column's verdict against any other column of the run (not only the lab's
    base): the run's record with the comparison's columns narrowed to the two."""
    data = read_run(run)
    record = copy.deepcopy(data.record)
    for comp in record["comparisons"]:
        if comp["name"] == comparison:
            comp["labels"] = [base, label]
    key = (comparison, label, step)
    if lane == "cost":
        lane_record = load_lane(run) or {}
        found = cost_verdicts(record, load_replays(run), settled=lane_record.get("replays_max", 5))
        c = found.headline().get(key) if found is not None else None
        if c is None:
            return Verdict("undecided", None, None, "no counting replays of this step")
        return Verdict(c.verdict, c.ratio, c.ci, c.reason)
    t = compare_run(record, data.steps).qps.get(key)
    if t is None:
        return Verdict("undecided", None, None, "no measured repeats of this step")
    return Verdict(t.verdict, t.ratio, t.ci, t.reason)


def _verdict_from(v: VerdictJson) -> Verdict:
    pair = v.get("ci")
    ci = (float(pair[0]), float(pair[1])) if pair is not None else None
    return Verdict(str(v["word"]), v.get("ratio"), ci, str(v.get("reason", "")))


def _point_from(d: BisectPointJson) -> BisectPoint:
    return BisectPoint(
        lo=str(d["lo"]),
        mid=str(d["mid"]),
        hi=str(d["hi"]),
        run=str(d["run"]),
        attempt=int(d["attempt"]),
        mid_vs_lo=_verdict_from(d["mid_vs_lo"]),
        mid_vs_hi=_verdict_from(d["mid_vs_hi"]),
        hi_vs_lo=_verdict_from(d["hi_vs_lo"]),
        took_s=float(d.get("took_s", 0.0)),
        decision=str(d.get("decision", "")),
    )


def load_state(
    root: Path,
) -> tuple[BisectRequest, list[BisectPoint], dict[str, str], CurrentPoint | None]:
    """A stopped bisection's request, measured points, skipped builds and the point it
    was measuring, from its bisect.json (as json.loads reads it: its points and current
    point are taken as the shapes _save wrote, each field converted where it is read)."""
    path = root / "bisect.json"
    try:
        state = json.loads(path.read_text())
        req = dict(state["request"])
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise BisectError(
            f"{path}: not a bisection that can be resumed ({type(e).__name__}: {e}); "
            "give the folder a `dbregress bisect` printed"
        ) from None
    req["builds"] = tuple(req["builds"])
    request = BisectRequest(**req)
    points = [_point_from(p) for p in state.get("points", [])]
    return request, points, dict(state.get("skipped") or {}), state.get("current")


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
        self.root.mkdir(parents=True, exist_ok=True)

    @classmethod
    def resume(
        cls, root: Path, notify: Notify, scheduler: str | None = None, tls: Path | None = None
    ) -> Bisection:
        request, points, skipped, current = load_state(root)
        b = cls(request, root, notify, scheduler, tls)
        b.done = {(p.lo, p.mid, p.hi, p.attempt): p for p in points}
        b.outcome.skipped = skipped
        b.current = current
        return b

    def _save(self) -> None:
        state = {"request": asdict(self.request), **asdict(self.outcome)}
        state["current"] = self.current
        write_atomic(self.root / "bisect.json", json.dumps(state, indent=2) + "\n")

    def _measure(self, lo: str, mid: str, hi: str, attempt: int) -> BisectPoint:
        replays = self.request.replays + 3 * (attempt - 1)
        name = f"bisect-{attempt}"
        columns = [(self.labels[b], b) for b in dict.fromkeys((lo, mid, hi))]
        text = lab_text(self.request, columns, replays, name)
        path = self.root / "labs" / f"{self.labels[mid]}-{attempt}.toml"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        lab = parse_lab(tomllib.loads(text), path, text)
        t0 = time.monotonic()
        where = {"lo": lo, "mid": mid, "hi": hi, "attempt": attempt}
        again = None
        if self.current is not None and {k: self.current.get(k) for k in where} == where:
            again = self.root / "runs" / str(self.current.get("run"))
            if not (again / "run.json").is_file():
                again = None
        # A point's run is part of the bisection (bisect.json), not of a lab's history.
        runs = self.root / "runs"
        runner = runner_for(
            lab,
            runs,
            self.notify,
            scheduler=self.scheduler,
            tls=self.tls,
            resume=again,
            history=False,
        )
        self.current = {"lo": lo, "mid": mid, "hi": hi, "attempt": attempt, "run": runner.path.name}
        self._save()
        verb = "resuming" if again is not None else "measuring"
        self.notify(f"bisect: {verb} {mid} between {lo} and {hi} ({runner.path.name})")
        run_lab(runner, lab, self.notify)
        return self._judge(lab, runner.path, lo, mid, hi, attempt, time.monotonic() - t0)

    def _judge(
        self, lab: Lab, run: Path, lo: str, mid: str, hi: str, attempt: int, took: float
    ) -> BisectPoint:
        comp, step, lane = lab.comparisons[0].name, self.request.step, self.request.lane
        label = self.labels.__getitem__
        return BisectPoint(
            lo=lo,
            mid=mid,
            hi=hi,
            run=run.name,
            attempt=attempt,
            mid_vs_lo=_verdict_of(run, comp, label(lo), label(mid), step, lane),
            mid_vs_hi=(
                Verdict("same", 1.0, None, "the same build")
                if mid == hi
                else _verdict_of(run, comp, label(hi), label(mid), step, lane)
            ),
            hi_vs_lo=_verdict_of(run, comp, label(lo), label(hi), step, lane),
            took_s=round(took, 1),
        )

    def _point(self, lo: str, mid: str, hi: str) -> BisectPoint | None:
        """A point measured until decided (or out of attempts); None if a build of it
        could not be fetched or started (it is then skipped)."""
        point = None
        try:
            provision.fetch(provision.BuildSpec.parse(mid))
        except (BuildNotFound, ProvisionError) as e:
            if mid in (lo, hi):
                raise
            self._skip(mid, e)
            return None
        for attempt in range(1, self.request.attempts + 1):
            point = self.done.get((lo, mid, hi, attempt))
            if point is not None:  # measured before the bisection was resumed
                self.notify(f"bisect: {mid} between {lo} and {hi}: reusing run {point.run}")
                self.outcome.points.append(point)
                if self._decided(point):
                    break
                continue
            try:
                point = self._measure(lo, mid, hi, attempt)
            except DbregressError as e:
                if mid in (lo, hi) or not self._only(mid):
                    raise
                self._skip(mid, e)
                return None
            self.outcome.points.append(point)
            self.current = None
            self._save()
            if self._decided(point):
                break
            self.notify(
                f"bisect: {mid} is {point.mid_vs_lo.word} against {lo}; measuring again "
                "with more replays"
            )
        return point

    def _skip(self, build: str, e: Exception) -> None:
        self.outcome.skipped[build] = str(e).splitlines()[0]
        self.notify(f"bisect: skipping {build}: {self.outcome.skipped[build]}")
        self._save()

    def _only(self, build: str) -> bool:
        """Whether every failure of the last run was a job of `build` (it could not be
        started or crashed): the build is then skipped, not the bisection stopped."""
        runs = sorted((self.root / "runs").glob("*/run.json"))
        if not runs:
            return False
        failures = json.loads(runs[-1].read_text()).get("failures") or []
        label = self.labels[build]
        return bool(failures) and all(str(f.get("where", "")).startswith(label) for f in failures)

    def _decided(self, p: BisectPoint) -> bool:
        d = self.outcome.direction
        if d is None:  # the first point: do the ends differ, and which way?
            if p.hi_vs_lo.word == "same":
                return True
            if p.hi_vs_lo.word not in DIRECTIONS:
                return False
            d = p.hi_vs_lo.word
        return p.mid == p.hi or p.mid_vs_lo.word in (*DIRECTIONS, "same")

    def run(self) -> Outcome:
        started = time.monotonic()
        try:
            return self._run()
        finally:
            self.outcome.took_s = round(time.monotonic() - started, 1)
            self._save()

    def check_step(self) -> None:
        """The step is one the benchmark reports, at these sizes: said before any run."""
        ends = [(self.labels[b], b) for b in dict.fromkeys((self.builds[0], self.builds[-1]))]
        text = lab_text(self.request, ends, self.request.replays, "bisect-check")
        try:
            lab = parse_lab(tomllib.loads(text), self.root / "labs" / "check.toml", text)
        except LabError as e:  # a --size or --step the benchmark does not take
            said = str(e).split(": ", 1)[-1]
            raise BisectError(f"--step/--size: {said}") from None
        reported = [p.name for p in benchmarks.plans(lab.comparisons[0]) if p.reported]
        if self.request.step not in reported:
            raise BisectError(
                f"--step {self.request.step}: not a step the {self.request.benchmark} "
                f"benchmark reports at these sizes; its steps are {', '.join(reported)}"
            )

    def _run(self) -> Outcome:
        if len(self.builds) < 2:
            raise BisectError("a bisection needs at least two builds, good and bad")
        self.check_step()
        lo, hi = 0, len(self.builds) - 1
        o = self.outcome
        while True:
            inner = [i for i in range(lo + 1, hi) if self.builds[i] not in o.skipped]
            if not inner and o.direction is not None:
                break
            # the first point has the ends and, if there is one, a build between them
            i = inner[len(inner) // 2] if inner else hi
            b_lo, b_mid, b_hi = self.builds[lo], self.builds[i], self.builds[hi]
            point = self._point(b_lo, b_mid, b_hi)
            if point is None:
                continue  # skipped: another build between the same ends
            if o.direction is None:
                if point.hi_vs_lo.word not in DIRECTIONS:
                    o.stopped = (
                        f"{b_hi} is {point.hi_vs_lo.word} against {b_lo} in "
                        f"{self.request.step} ({point.hi_vs_lo.reason}): nothing to bisect"
                    )
                    self.notify(f"bisect: {o.stopped}")
                    return o
                o.direction = point.hi_vs_lo.word
                if i == hi:
                    point.decision = f"{b_hi} is {o.direction} than {b_lo}, its neighbour"
                    break
            word = point.mid_vs_lo.word
            if word == o.direction:
                hi = i
                point.decision = f"{b_mid} is {word} than {b_lo}: the change is at or before it"
                if point.mid_vs_hi.word in DIRECTIONS:
                    point.decision += (
                        f" ({b_mid} also differs from {b_hi}: more than one change; "
                        "following the first)"
                    )
            elif word == "same":
                lo = i
                point.decision = f"{b_mid} is the same as {b_lo}: the change is after it"
            elif word in DIRECTIONS:  # the other way: better than the good build
                lo = i
                point.decision = (
                    f"{b_mid} is {word} than {b_lo}, the other way: not the change; it is "
                    f"after {b_mid}, and the bisection goes on against {b_mid}"
                )
            else:
                o.stopped = (
                    f"{b_mid} stayed {word} against {b_lo} after {point.attempt} run(s) "
                    f"({point.mid_vs_lo.reason}); the first bad build is in "
                    f"({b_lo}, {b_hi}]; no guess"
                )
                self.notify(f"bisect: {o.stopped}")
                return o
            self.notify(f"bisect: {point.decision}")
            self._save()
        o.first_bad, o.last_good = self.builds[hi], self.builds[lo]
        self.notify(f"bisect: first bad build {o.first_bad} (last good {o.last_good})")
        return o
