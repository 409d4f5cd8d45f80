"""`bisect --all-changes`: every change of at least --min in a range, both ways, found by
splitting it (split.py) with a bisection's builds, skips and points: each point is a run
of the range's ends and the build between them (the count store gives the ends' counts
again), each build's counts are taken from the first run that counted it, and any two
builds are compared by their counts alone (analysis.cost.compare_counts). The cost lane
only: counts per operation add up along a history, timings on a shared host do not."""

from __future__ import annotations

from typing import cast

from dbregress.analysis.cost import compare_counts
from dbregress.analysis.cost_methods import COST_METRICS, Group, counts_by_group, group_of
from dbregress.analysis.functions_moved import functions_moved
from dbregress.bisect.builds import commit_and_subject, shown
from dbregress.bisect.model import (
    DIRECTIONS,
    BisectError,
    BisectPoint,
    ChangeRow,
    Outcome,
    RangeRow,
    Verdict,
)
from dbregress.bisect.split import Counts, Split, split
from dbregress.bisect.walk import Bisection
from dbregress.model.errors import DbregressError, InternalError, Interrupted
from dbregress.shapes.replay import ReplayRecord
from dbregress.store.replays import load_replays

METRIC = COST_METRICS[0]  # estimated cycles per operation, the cost lane's headline


def compare(x: Counts, y: Counts) -> Verdict:
    """y's counts against x's, as one cost verdict of a family of one."""
    c = compare_counts(x, y)
    return Verdict(c.verdict, c.ratio, c.ci, c.reason)


class AllChanges(Bisection):
    """A bisection that names every change of at least request.minimum, not the first."""

    def _run(self) -> Outcome:
        if self.request.lane != "cost":
            raise BisectError(LANE_ONLY)
        if len(self.builds) < 2:
            raise BisectError("a bisection needs at least two builds, good and bad")
        self.check_step()
        self._save()
        self.builder.build_ends()
        self.groups: dict[int, Group] = {}
        self.counted_in: dict[int, tuple[str, str]] = {}  # build -> (run, its label)
        # how the builds so far counted the step (_counted_as): spec, engine sizes
        self.first_as: tuple[str | None, str | None] = (None, None)
        found = split(len(self.builds), self._take, compare, self.request.minimum)
        self._answer(found)
        return self.outcome

    def _take(self, lo: int, i: int, hi: int) -> dict[int, Counts] | None:
        """Count build i in a run with the ends lo and hi (a run measured before a
        resume is read again); None when build i cannot be built or run (skipped)."""
        b_lo, b_mid, b_hi = self.builds[lo], self.builds[i], self.builds[hi]
        point = self.keys.reusable(self.done.get((b_lo, b_mid, b_hi, 1)), self._say, self.builds[0])
        n = len(self.outcome.points) + 1
        if point is not None:
            self._say(f"point {n}: {shown(b_mid)}: reusing run {point.run}")
        else:
            if b_mid in self.outcome.skipped and b_mid not in self.outcome.tries:
                return None  # skipped before this resume; --try builds it again
            if i not in (lo, hi) and not self.builder.build_inner(i, lo, hi):
                return None
            self.outcome.skipped.pop(b_mid, None)  # a --try that built
            self._say(
                f"point {n}: counting {self.builder.name(i)} (ends {shown(b_lo)}, {shown(b_hi)})"
            )
            try:
                point = self._measure(b_lo, b_mid, b_hi, 1)
            except (Interrupted, InternalError):
                raise  # a bug in dbregress is no failed build (exit 3)
            except DbregressError as e:
                if i in (lo, hi) or not self._only(b_mid):
                    raise
                self.current = None
                self.builder.failed(i, e, lo, hi)
                return None
            self.current = None
        self.outcome.points.append(point)
        self._save()
        return self._counts_of(point, {lo, i, hi})

    def _counts_of(self, point: BisectPoint, which: set[int]) -> dict[int, Counts]:
        """The step's counts per operation of the builds `which` in the point's run,
        each of one counting method (the first build's: two methods are never pooled)."""
        counted = self.counts(point)
        counted_as = self._counted_as(point)
        out: dict[int, Counts] = {}
        for j in which:
            label = self.labels[self.builds[j]]
            for how in counted_as.get(label, set()):
                for part, before in zip(how, self.first_as, strict=True):
                    if part is not None and before is not None and part != before:
                        raise BisectError(
                            f"{shown(self.builds[j])} was counted as another step or with other "
                            f"engine sizes (run {point.run}) than the builds before it: their "
                            "counts cannot be compared; start again on one host with --recount"
                        )
                spec, sizes = self.first_as
                self.first_as = (spec or how[0], sizes or how[1])
            values = counted.get(label, [])
            groups = {g for _, g in values}
            if len(groups) > 1:
                raise BisectError(
                    f"{shown(self.builds[j])}: counted by several methods in run {point.run}"
                )
            for g in groups:
                first = next(iter(self.groups.values()), g)
                if g != first:
                    raise BisectError(
                        f"{shown(self.builds[j])} was counted by another method ({g}) than the "
                        f"builds before it ({first}): their counts cannot be compared; start "
                        "again with --recount"
                    )
                self.groups.setdefault(j, g)
            out[j] = [v for v, _ in values]
            self.counted_in.setdefault(j, (point.run, label))
        return out

    def _counted_as(self, point: BisectPoint) -> dict[str, set[tuple[str | None, str | None]]]:
        """Column label -> how its replays counted the step: the step as counted (its
        spec: workload, pace, configuration) and the engine sizes, which two builds'
        counts must share to be compared (None: the replay did not record it)."""
        out: dict[str, set[tuple[str | None, str | None]]] = {}
        for r in load_replays(self.root / "runs" / point.run):
            figures = r.get("steps", {}).get(self.request.step)
            if r.get("status") == "ok" and figures is not None:
                sizes = r.get("engine_sizes")
                how = (figures.get("spec"), str(sorted(sizes.items())) if sizes else None)
                out.setdefault(r["column"], set()).add(how)
        return out

    def counts(self, point: BisectPoint) -> dict[str, list[tuple[float, Group]]]:
        """Column label -> the step's counts per operation (and their method) in the
        point's run."""
        replays = load_replays(self.root / "runs" / point.run)
        cells = counts_by_group(replays, METRIC)
        return {col: vs for (col, step), vs in cells.items() if step == self.request.step}

    def _moved(self, lo: int, hi: int) -> list[str]:
        """Where build hi moved from build lo: the functions whose counted instructions
        per operation moved most, from the replays their counts came from."""
        found: list[ReplayRecord] = []
        for j, as_ in ((lo, "lo"), (hi, "hi")):
            where = self.counted_in.get(j)
            if where is None:
                return []
            run, label = where
            found += [
                cast(ReplayRecord, {**r, "column": as_})
                for r in load_replays(self.root / "runs" / run)
                if r.get("column") == label
                and self.request.step in r.get("steps", {})
                and group_of(r, self.request.step) == self.groups.get(j)
            ]
        moved = functions_moved(found, "lo", "hi", self.request.step)
        return [m.words() for m in moved]

    def _answer(self, found: Split) -> None:
        """The table of changes, the ranges left whole and the part explained, in the
        outcome (bisect.json) and said."""
        o, b = self.outcome, self.builds
        o.total, o.counted = found.total, len(found.measured)
        for c in found.changes:
            ratio = c.verdict.ratio or 1.0
            commit, subject = commit_and_subject(b[c.hi]) or (b[c.hi], "")
            o.changes.append(
                ChangeRow(
                    commit=commit,
                    build=b[c.hi],
                    last_good=b[c.lo],
                    subject=subject,
                    direction=DIRECTIONS[0] if ratio > 1 else DIRECTIONS[1],
                    ratio=c.verdict.ratio,
                    ci=c.verdict.ci,
                    share=found.share(c.verdict),
                    candidates=[b[j] for j in c.candidates],
                    functions=self._moved(c.lo, c.hi),
                )
            )
        kinds = (("below", found.below), ("undecided", found.undecided), ("quiet", found.quiet))
        for kind, ranges in kinds:
            o.ranges += [
                RangeRow(
                    b[r.lo], b[r.hi], kind, r.verdict.ratio, r.verdict.ci, found.share(r.verdict)
                )
                for r in ranges
            ]
        o.ranges.sort(key=lambda r: b.index(r.first))
        o.explained = found.explained()
        self._say(
            f"{len(o.changes)} change(s) of at least {self.request.minimum:.2%}; "
            f"{o.counted} build(s) counted, {len(o.skipped)} skipped"
        )


LANE_ONLY = (
    "--all-changes works in the cost lane only: counts per operation add up along a "
    "history, timings on a shared host do not; drop --lane time"
)


def at_least(text: str) -> float:
    """--min: a percentage ('0.25%' or '0.25') as a fraction."""
    try:
        value = float(text.strip().removesuffix("%")) / 100
    except ValueError:
        raise BisectError(f"--min {text}: give a percentage, e.g. --min 0.25%") from None
    if not 0 < value < 1:
        raise BisectError(f"--min {text}: give a percentage above 0 and below 100")
    return value
