"""Every change in a range, not the first: split it where its ends differ.

Work per operation is multiplicative along a history, so the log-ratio of a range's ends
is the sum of its builds' own increments (METHOD.md 14). Measure the ends and the middle;
recurse into each half whose ends differ by more than their noise and the minimum asked
for; stop at neighbours. With k changes among N builds this takes about k·log2(N/k) + 2k
measured builds (each counted once, whatever the number of ranges it is an end of),
against git bisect's one change in log2(N).

A change is named only when the interval of its build against its neighbour excludes
1 ± the minimum; a range whose ends' interval lies inside it is left whole ("below the
minimum", with its total when that is beyond the noise); neighbours whose interval
straddles the minimum, and a range whose ends' interval holds 1 but reaches the minimum
(a change that large, or two that cancel, could hide in it), are said to be undecided
against it. A build that cannot be
measured is skipped as the bisection skips it (the next build of probe_order), and a
change whose range holds only skipped builds is "one of" them and its end.

Pure: `measure(lo, i, hi)` counts build i (and the ends, the first time) and returns
each build's counts, or None when build i cannot be built or run; `compare(x, y)` is
y's counts against x's (analysis.cost.compare_counts)."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from dbregress.bisect.building import probe_order
from dbregress.bisect.model import Verdict

Counts = Sequence[float]
Measure = Callable[[int, int, int], Mapping[int, Counts] | None]
Compare = Callable[[Counts, Counts], Verdict]


@dataclass
class Change:
    """An increment at least the minimum: build `hi` against build `lo`. `candidates`:
    when builds between them could not be measured, the builds it may be (those, then
    hi), in order; [] when lo and hi are neighbours."""

    lo: int
    hi: int
    verdict: Verdict
    candidates: list[int] = field(default_factory=list)


@dataclass
class Range:
    """A range left whole: below the minimum (beyond the noise or not), or neighbours
    whose interval straddles it (undecided against it)."""

    lo: int
    hi: int
    verdict: Verdict


@dataclass
class Split:
    total: Verdict  # the last build against the first
    changes: list[Change] = field(default_factory=list)
    below: list[Range] = field(default_factory=list)  # beyond the noise, below the minimum
    undecided: list[Range] = field(default_factory=list)
    # left whole with no change shown (the interval holds 1 within ±the minimum): small
    # changes that add up, or larger ones that cancel, are not ruled out in them
    quiet: list[Range] = field(default_factory=list)
    measured: list[int] = field(default_factory=list)  # builds counted, in that order
    skipped: list[int] = field(default_factory=list)  # builds that could not be measured

    def share(self, v: Verdict) -> float | None:
        """v's log-ratio as a part of the total's (None when the total has no size)."""
        whole = _log(self.total)
        part = _log(v)
        if whole is None or part is None or abs(whole) < 1e-9:
            return None
        return part / whole

    def explained(self) -> float | None:
        """The part of the total change the named changes make up (their log-ratios add)."""
        shares = [self.share(c.verdict) for c in self.changes]
        if any(s is None for s in shares):
            return None
        return sum(s for s in shares if s is not None)


def _log(v: Verdict) -> float | None:
    return math.log(v.ratio) if v.ratio is not None and v.ratio > 0 else None


def reaches(v: Verdict, minimum: float) -> bool:
    """The interval excludes 1 (beyond the noise) and reaches the minimum: the range may
    hold a change at least that large, so it is split."""
    if v.ci is None:
        return False
    lo, hi = math.log(v.ci[0]), math.log(v.ci[1])
    return (lo > 0 or hi < 0) and max(abs(lo), abs(hi)) >= math.log1p(minimum)


def is_change(v: Verdict, minimum: float) -> bool:
    """The interval excludes 1 ± the minimum: a change at least that large."""
    if v.ci is None:
        return False
    m = math.log1p(minimum)
    return math.log(v.ci[0]) >= m or math.log(v.ci[1]) <= -m


def too_wide(v: Verdict, minimum: float) -> bool:
    """The interval holds 1 and reaches the minimum on a side: no change is shown, and
    none that large is ruled out."""
    if v.ci is None:
        return False
    return max(-math.log(v.ci[0]), math.log(v.ci[1])) >= math.log1p(minimum)


def beyond_noise(v: Verdict) -> bool:
    return v.ci is not None and (v.ci[0] > 1 or v.ci[1] < 1)


def split(n: int, measure: Measure, compare: Compare, minimum: float) -> Split:
    """Every change of at least `minimum` (0.0025: 0.25%) among builds 0..n-1, both ways."""
    counts: dict[int, Counts] = {}
    skipped: list[int] = []
    order: list[int] = []

    def take(lo: int, i: int, hi: int) -> bool:
        got = measure(lo, i, hi)
        if got is None:
            skipped.append(i)
            return False
        for j in sorted({lo, i, hi}):
            if j not in counts:
                counts[j] = got[j]
                order.append(j)
        return True

    def pick(lo: int, hi: int) -> int | None:
        """The build the range (lo, hi) is split at (measured): probe_order's first one
        that can be measured."""
        for i in probe_order(lo, hi):
            if i in counts:
                return i
            if i not in skipped and take(lo, i, hi):
                return i
        return None

    if n < 2:
        raise ValueError("a range needs two builds")
    first = pick(0, n - 1)
    if first is None:  # no build between, or none could be measured
        take(0, n - 1, n - 1)
    total = compare(counts[0], counts[n - 1])
    out = Split(total=total)

    def visit(lo: int, hi: int) -> None:
        v = compare(counts[lo], counts[hi])
        if v.ci is None:  # no interval (a build without two ok replays): no claim
            out.undecided.append(Range(lo, hi, v))
            return
        # a build inside measured already is evidence too: two changes that cancel over
        # the range show in its halves
        inside = next((i for i in probe_order(lo, hi) if i in counts), None)
        if not reaches(v, minimum) and inside is None:
            _leave(out, Range(lo, hi, v), minimum)
            return
        m = inside if inside is not None else pick(lo, hi)
        if m is not None:
            visit(lo, m)
            visit(m, hi)
        elif is_change(v, minimum):
            hidden = list(range(lo + 1, hi))
            out.changes.append(Change(lo, hi, v, [*hidden, hi] if hidden else []))
        else:
            out.undecided.append(Range(lo, hi, v))

    visit(0, n - 1)
    out.measured, out.skipped = order, skipped
    return out


def _leave(out: Split, r: Range, minimum: float) -> None:
    """A range left whole: below the minimum when beyond the noise; undecided when its
    interval holds 1 yet reaches the minimum (a change that large could hide in it);
    else quiet, no change shown. Each is said, none dropped: changes that cancel over a
    range may lie in any of them."""
    if beyond_noise(r.verdict):
        out.below.append(r)
    elif too_wide(r.verdict, minimum):
        out.undecided.append(r)
    else:
        out.quiet.append(r)


def point_bound(k: int, n: int) -> float:
    """The measured builds splitting takes for k changes among n builds at most:
    k·log2(N/k) + 2k with N = n - 1 (the increments), log2 rounded up (a single change
    among N increments takes ceil(log2 N) builds between the ends), 2 for k = 0."""
    if k == 0:
        return 3  # the ends and the middle
    steps = n - 1
    return k * math.ceil(math.log2(max(steps / k, 1))) + 2 * k
