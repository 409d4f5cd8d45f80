"""What a bisection is asked (BisectRequest), what each point found (BisectPoint and its
Verdicts), what it concluded (Outcome), and bisect.json, where all of it is kept between
a stop and a resume."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import NotRequired, TypeAlias, TypedDict

from dbregress.model.errors import DbregressError
from dbregress.shapes.flavor_table import FlavorTables

Notify = Callable[[str], None]

LANES = ("cost", "time")
BENCHMARKS = ("insert", "kv", "micro")
ATTEMPTS = 3  # runs of one point at most (more replays or repeats each time)
DIRECTIONS = ("slower", "faster")
# A benchmark size as a lab file's [insert], [kv] or [micro] table holds it.
Size: TypeAlias = int | float | str | list[str]


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
    # The user's own compile flavors (--flavors FILE): family -> name -> the flavor's
    # table as the lab file's [flavors.FAMILY.NAME] holds it, patch paths absolute (the
    # patches are read again at every point, so a fixed patch is used from then on).
    flavors: FlavorTables = field(default_factory=dict)
    # --recount: take no counting replay from the count store (store/counted.py)
    recount: bool = False
    # --direction: the change looked for (slower or faster); None: the ends' own
    direction: str | None = None
    # --all-changes: every change of at least `minimum` (a fraction: 0.0025 is 0.25%),
    # both ways, by splitting the range (split.py), instead of the first one
    all_changes: bool = False
    minimum: float = 0.0025


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
    # mid against the bisection's original good end, when lo is not that end: every
    # candidate is judged against it too, so a build that moved the other way never
    # becomes the end the rest is judged against (None: lo is the good end)
    mid_vs_good: Verdict | None = None

    def judged(self) -> Verdict:
        """mid against the original good end: the verdict the walk decides on."""
        return self.mid_vs_good if self.mid_vs_good is not None else self.mid_vs_lo


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
    mid_vs_good: NotRequired[VerdictJson | None]


class CurrentPoint(TypedDict):
    """The point being measured, and its run folder, kept in bisect.json so that a
    resumed bisection continues that run instead of starting the point over."""

    lo: str
    mid: str
    hi: str
    attempt: int
    run: str


@dataclass
class ChangeRow:
    """One change --all-changes names: `build` against `last_good`, the build before it
    (both measured), its size with its interval and its share of the whole range's
    change (log-ratios add along a history). When builds between them could not be
    measured, the change is in one of `candidates` (those, then `build`)."""

    commit: str  # a source build's commit id, or the build's spec
    build: str
    last_good: str
    subject: str  # the commit's subject ("" for a build that is not a commit)
    direction: str  # slower | faster
    ratio: float | None
    ci: tuple[float, float] | None
    share: float | None
    candidates: list[str] = field(default_factory=list)
    # where it moved: the functions whose instructions per operation moved most between
    # last_good and build, from the same replays (analysis/functions_moved.py)
    functions: list[str] = field(default_factory=list)


@dataclass
class RangeRow:
    """A range --all-changes left whole: `below` the minimum (its total beyond the
    noise), or neighbours `undecided` against it (the interval straddles it, or no
    interval)."""

    first: str
    last: str
    kind: str  # below | undecided | quiet (no change shown: each within ±the minimum)
    ratio: float | None
    ci: tuple[float, float] | None
    share: float | None


@dataclass
class Outcome:
    builds: list[str]
    direction: str | None = None
    # The first bad build, only when the evidence isolates it: its neighbour before it
    # in the list was measured and is good.
    first_bad: str | None = None
    last_good: str | None = None
    # When builds that could not be built or started lie between the last good and the
    # first bad measured build: the first bad build is one of these (those builds, then
    # the first bad measured one), in list order; first_bad stays None.
    candidates: list[str] = field(default_factory=list)
    points: list[BisectPoint] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)  # build -> why (its first line)
    tries: list[str] = field(default_factory=list)  # skipped builds to measure (--try)
    stopped: str | None = None  # why it ended without an answer
    ends_same: bool = False  # stopped: the ends are `same`, nothing to bisect (an answer)
    # stopped: the ends differ the other way than --direction asked (an answer)
    ends_other_way: bool = False
    # builds measured that moved the other way (against the good end or their bracket's
    # lo): the range holds changes both ways, and the answer says so
    other_way: list[str] = field(default_factory=list)
    # --all-changes: every change found, the ranges left whole, the last build against
    # the first, the part of it the changes explain, and how many builds were counted
    changes: list[ChangeRow] = field(default_factory=list)
    ranges: list[RangeRow] = field(default_factory=list)
    total: Verdict | None = None
    explained: float | None = None
    counted: int = 0
    took_s: float = 0.0


@dataclass
class Saved:
    """A stopped bisection as its bisect.json has it."""

    request: BisectRequest
    points: list[BisectPoint]
    skipped: dict[str, str]
    tries: list[str]
    current: CurrentPoint | None


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
        mid_vs_good=_verdict_from(good) if (good := d.get("mid_vs_good")) else None,
    )


def load_state(root: Path) -> Saved:
    """A stopped bisection's request, measured points, skipped builds, builds to try
    and the point it was measuring, from its bisect.json (as json.loads reads it: its
    points and current point are taken as the shapes the bisection wrote, each field
    converted where it is read)."""
    path = root / "bisect.json"
    try:
        state = json.loads(path.read_text())
        req = dict(state["request"])
        req["builds"] = tuple(req["builds"])
        request = BisectRequest(**req)
        points = [_point_from(p) for p in state.get("points", [])]
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise BisectError(
            f"{path}: not a bisection that can be resumed ({type(e).__name__}: {e}); "
            "give the folder a `dbregress bisect` printed"
        ) from None
    skipped = {str(k): str(v) for k, v in (state.get("skipped") or {}).items()}
    tries = [str(t) for t in state.get("tries") or []]
    return Saved(request, points, skipped, tries, state.get("current"))
