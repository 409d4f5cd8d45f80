"""The builds a bisection builds on its way: both ends first, then each build a bracket
tries, in probe_order; a build that fails is skipped, and failures in a row that share
their cause at builds far apart stop the bisection (COMMON_FAILURES, docs/bisect.md)."""

from __future__ import annotations

import re
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path

from dbregress.bisect.builds import described, shown
from dbregress.bisect.model import BisectError, Notify, Outcome
from dbregress.model.errors import DbregressError, Interrupted

# Builds that fail in a row with the same error, at builds that are not neighbours in
# the list, with builds left to try in the bracket: a cause common to them, not one
# commit's change; the bisection stops and names it. A run of up to three neighbouring
# commits that do not build never stops it (probe_order tries far from a failure first):
# its answer is "one of" them.
COMMON_FAILURES = 3


def probe_order(lo: int, hi: int) -> list[int]:
    """The builds strictly between lo and hi in the order a bracket tries them: its
    middle, then the middles of its two halves, then of their halves (breadth first).
    The first one not skipped is measured, so after a build that fails the next one
    tried is a quarter of the bracket away: a few neighbouring commits that do not build
    are not taken for a cause common to all. The order depends only on lo and hi, so a
    resumed bisection, which knows every skip from the start, takes the same path."""
    out: list[int] = []
    halves = deque([(lo, hi)])
    while halves:
        a, b = halves.popleft()
        if b - a < 2:
            continue
        m = a + 1 + (b - a - 1) // 2
        out.append(m)
        halves += [(a, m), (m, b)]
    return out


def first_line(e: BaseException) -> str:
    return (str(e).splitlines() or [type(e).__name__])[0]


def cause_of(line: str, build: str) -> str:
    """An error's first line without what differs from build to build: the build's
    spec, its log's path, commit ids and cache keys (hexadecimal runs)."""
    line = line.replace(build, "BUILD")
    line = re.sub(r"; the whole output is in \S+$", "", line)
    return re.sub(r"[0-9a-f]{7,}", "#", line).strip()


class Builder:
    """Builds the builds of a bisection's list and keeps its skips in `outcome.skipped`
    (saved with `save` as each one is skipped); `fetch` builds or fetches one build,
    `say` writes a progress line."""

    def __init__(
        self,
        builds: list[str],
        outcome: Outcome,
        root: Path,
        fetch: Callable[[str], None],
        say: Notify,
        save: Callable[[], None],
    ) -> None:
        self.builds, self.outcome, self.root = builds, outcome, root
        self.fetch, self.say, self.save = fetch, say, save
        self.streak: list[tuple[int, str]] = []  # failed builds in a row: (index, cause)

    def name(self, i: int) -> str:
        return f"{i + 1}/{len(self.builds)} {described(self.builds[i])}"

    def provide(self, i: int, what: str = "") -> None:
        self.say(f"building {what}{self.name(i)}")
        t0 = time.monotonic()
        self.fetch(self.builds[i])
        self.say(f"built {shown(self.builds[i])} in {time.monotonic() - t0:.0f} s")

    def build_ends(self) -> None:
        """Both ends, before anything else: an error of an end is said at once, and it is
        often common to every build (a missing tool, a flavor option)."""
        for i, end in ((0, "good"), (len(self.builds) - 1, "bad")):
            try:
                self.provide(i, f"the {end} end ")
            except Interrupted:
                raise
            except DbregressError as e:
                self.outcome.stopped = (
                    f"the {end} end {self.name(i)} cannot be built: {first_line(e)}"
                )
                raise BisectError(
                    f"{self.outcome.stopped}; no other build was tried (fix it, then start "
                    f"again or continue with `dbregress bisect --resume {self.root}`)"
                ) from None

    def build_inner(self, i: int, lo: int, hi: int) -> bool:
        """Build the i-th build, in the bracket (lo, hi); False when it failed (it is
        then skipped)."""
        try:
            self.provide(i)
        except Interrupted:
            raise
        except DbregressError as e:
            self.failed(i, e, lo, hi)
            return False
        self.streak.clear()
        return True

    def failed(self, i: int, e: DbregressError, lo: int, hi: int) -> None:
        """Skip the i-th build; stop when the failures in a row share a cause that is
        not one commit's (COMMON_FAILURES)."""
        build, line = self.builds[i], first_line(e)
        self.skip(build, line)
        cause = cause_of(line, build)
        if self.streak and self.streak[0][1] != cause:
            self.streak = []
        self.streak.append((i, cause))
        failed = sorted(j for j, _ in self.streak)
        neighbours = all(
            self.builds[j] in self.outcome.skipped for j in range(failed[0], failed[-1] + 1)
        )
        if len(failed) < COMMON_FAILURES or neighbours or self.next(lo, hi) is None:
            return
        for j in failed:  # tried again when the bisection is resumed
            self.outcome.skipped.pop(self.builds[j], None)
        names = ", ".join(shown(self.builds[j]) for j in failed)
        self.outcome.stopped = (
            f"{len(failed)} builds in a row failed with the same error, builds that are not "
            f"neighbours ({names}): {cause}"
        )
        raise BisectError(
            f"{self.outcome.stopped}. A cause common to them (a missing tool or library, a "
            "full disk, a flavor or patch that does not suit them, or a long run of commits "
            "that do not build), not one commit's change: fix it, then continue with "
            f"`dbregress bisect --resume {self.root}`, which builds them again. The first "
            f"one's error: {line}"
        )

    def skip(self, build: str, why: str) -> None:
        self.outcome.skipped[build] = why
        self.say(f"skipping {shown(build)}: {why.removeprefix(build + ': ')}")
        self.save()

    def next(self, lo: int, hi: int) -> int | None:
        """The build the bracket (lo, hi) measures next; None when every build between
        is skipped (or there is none)."""
        skipped = self.outcome.skipped
        return next((i for i in probe_order(lo, hi) if self.builds[i] not in skipped), None)
