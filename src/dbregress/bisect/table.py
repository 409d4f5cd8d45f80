"""A bisection's answer as text: the path taken and the first bad build (render), or
for `bisect --all-changes` (render_changes) every change (commit, subject, increment
with its interval, share of the whole range's change), the ranges left whole, the part
of the total the changes explain, and what it took (points against their bound, builds,
wall time)."""

from __future__ import annotations

import math

from dbregress.bisect.builds import commit_of, merge_note, shown
from dbregress.bisect.model import BisectRequest, Outcome
from dbregress.bisect.split import point_bound
from dbregress.bisect.walk import both_ways


def _pct(ratio: float | None) -> str:
    return "-" if ratio is None else f"{(ratio - 1) * 100:+.2f}%"


def _size(ratio: float | None, ci: tuple[float, float] | None) -> str:
    text = _pct(ratio)
    return text if ci is None else f"{text} [{_pct(ci[0])}, {_pct(ci[1])}]"


def _share(share: float | None) -> str:
    return "-" if share is None else f"{share:.0%}"


def _ranges(o: Outcome, request: BisectRequest) -> list[str]:
    """The ranges left whole, and what narrows an undecided one."""
    if not o.ranges:
        return []
    minimum = f"{request.minimum * 100:g}%"
    lines = ["", "ranges left whole:", ""]
    lines += ["| from | to | why | total [CI] | share |", "|---|---|---|---|---|"]
    quiet = [r for r in o.ranges if r.kind == "quiet"]
    for r in o.ranges:
        if r.kind == "quiet":
            continue
        why = f"below {minimum}" if r.kind == "below" else f"undecided against {minimum}"
        lines.append(
            f"| {shown(r.first)} | {shown(r.last)} | {why} | {_size(r.ratio, r.ci)} | "
            f"{_share(r.share)} |"
        )
    if quiet:
        together = math.prod(r.ratio for r in quiet if r.ratio is not None) - 1
        lines.append(
            f"| {len(quiet)} range(s) |  | no change shown (each within ±{minimum}) | "
            f"{together:+.2%} together |  |"
        )
    if any(r.kind == "undecided" for r in o.ranges):
        lines += [
            "",
            f"an undecided range's interval reaches ±{minimum} (or it has none): a change "
            "that large may lie in it; more counting replays a build "
            f"(--replays, {request.replays} now) narrow its interval",
        ]
    if o.ranges:
        lines += [
            "",
            "a range left whole was measured at its ends only: changes inside it that add "
            "up, or that cancel, are not ruled out",
        ]
    return lines


def render_changes(o: Outcome, request: BisectRequest) -> str:
    n, k = len(o.builds), len(o.changes)
    lines = [
        f"every change of at least {request.minimum * 100:g}% in {request.step} "
        f"({request.lane} lane, estimated cycles per operation), {n} build(s):",
        "",
        "| change | commit | subject | increment [CI] | share of the total |",
        "|---|---|---|---|---|",
    ]
    for c in o.changes:
        commit = shown(c.build) if c.commit == c.build else c.commit[:12]
        lines.append(
            f"| {c.direction} | {commit} | {c.subject} | {_size(c.ratio, c.ci)} | "
            f"{_share(c.share)} |"
        )
        if c.functions:
            lines.append(f"|  | where: {'; '.join(c.functions)} |  |  |  |")
        if c.candidates:
            lines.append(
                f"|  | one of {len(c.candidates)}: "
                f"{', '.join(shown(b) for b in c.candidates)} (those before the last could "
                f"not be built or run; last good {shown(c.last_good)}) |  |  |  |"
            )
    if not o.changes:
        lines.append("| none |  |  |  |  |")
    lines += _ranges(o, request)
    if o.skipped:
        lines.append("")
    for build, why in o.skipped.items():
        lines.append(f"skipped {shown(build)}: {why.removeprefix(build + ': ')}")
    lines.append("")
    if o.total is not None:
        lines.append(
            f"total: {shown(o.builds[-1])} against {shown(o.builds[0])} "
            f"{_size(o.total.ratio, o.total.ci)}; the named changes explain "
            f"{_share(o.explained)} of it"
        )
    tried = o.counted + len(o.skipped)
    # the bound is for the named changes: a range left undecided may hold one more each,
    # and changes under the minimum that add up to it, and skipped builds, cost points
    bound = point_bound(k, n)
    kinds = [r.kind for r in o.ranges]
    reasons = [f"{kinds.count('undecided')} range(s) undecided"] if "undecided" in kinds else []
    if o.counted > bound and ("below" in kinds or "quiet" in kinds):
        smaller = kinds.count("below") + kinds.count("quiet")
        reasons.append(f"{smaller} range(s) of smaller changes")
    if o.counted > bound and o.skipped:
        reasons.append(f"{len(o.skipped)} build(s) skipped")
    more = f", or more with {', '.join(reasons)}" if reasons else ""
    lines.append(
        f"points: {o.counted} build(s) counted (at most {bound:g} for {k} "
        f"change(s) among {n - 1} increments{more}), {tried} build(s) tried, "
        f"{len(o.points)} run(s), {o.took_s:.0f} s"
    )
    return "\n".join(lines)


def render(o: Outcome) -> str:
    lines = [f"{len(o.builds)} build(s), {len(o.points)} run(s) in {o.took_s:.0f} s:", ""]
    lines.append("| run | measured | vs | verdict | ratio [CI] | then |")
    lines.append("|---|---|---|---|---|---|")
    for p in o.points:
        v = p.judged()
        against = o.builds[0] if p.mid_vs_good is not None else p.lo
        ratio = f"{v.ratio:.4f}" if v.ratio is not None else "-"
        if v.ci is not None:
            ratio += f" [{v.ci[0]:.4f}, {v.ci[1]:.4f}]"
        then = p.decision or "measured again"
        for build in (p.mid, p.lo, p.hi):
            then = then.replace(build, shown(build))
        lines.append(
            f"| {p.run} | {shown(p.mid)} | {shown(against)} | {v.word} | {ratio} | {then} |"
        )
    measured = {p.mid for p in o.points}
    if o.skipped:
        lines.append("")
    order = {b: i for i, b in reversed(list(enumerate(o.builds)))}
    for build in sorted(o.skipped, key=lambda b: order.get(b, len(order))):
        why = o.skipped[build].removeprefix(f"{build}: ")
        later = " (measured later, by --try)" if build in o.tries and build in measured else ""
        lines.append(f"skipped {shown(build)}: {why}{later}")
    lines.append("")
    if o.first_bad:
        lines.append(f"first bad build: {o.first_bad} (last good: {o.last_good}), {o.direction}")
        commit = commit_of(o.first_bad)
        if commit is not None:
            lines.append(f"first bad commit: {commit}")
        merge = merge_note(o.first_bad, o.last_good)
        if merge is not None:
            lines.append(merge)
    elif o.candidates:
        lines += candidates(o)
    elif o.stopped:
        lines.append(f"stopped: {o.stopped}")
    if (o.first_bad or o.candidates) and o.other_way:
        lines.append(both_ways(o).removeprefix("; "))
    return "\n".join(lines)


def candidates(o: Outcome) -> list[str]:
    """The answer when skipped builds leave more than one candidate: every one of them,
    as `git bisect` says it, and never a single one."""
    commits = [commit_of(b) for b in o.candidates]
    what = "commit" if all(commits) else "build"
    lines = [
        f"the first bad {what} could be any of these {len(o.candidates)} ({o.direction} than "
        f"the last good, {shown(o.last_good or '')}; the ones before the last could not be "
        "built or started, so the measurements do not say which):"
    ]
    lines += [f"  {commit or build}" for build, commit in zip(o.candidates, commits, strict=True)]
    return lines
