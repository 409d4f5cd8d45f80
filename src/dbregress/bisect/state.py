"""What a bisection keeps between a stop and a resume: bisect.json written (model.py reads
it back), the run of the point that was being measured, and the skipped builds a resumed
bisection is asked to measure (`--try`)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable
from dataclasses import asdict
from pathlib import Path

from dbregress.bisect.builds import shown, spec_of
from dbregress.bisect.model import BisectError, BisectPoint, BisectRequest, CurrentPoint, Outcome
from dbregress.model.errors import DbregressError
from dbregress.provision import source
from dbregress.shapes.flavor_table import FlavorTables
from dbregress.store.files import write_atomic


def save_state(
    root: Path, request: BisectRequest, outcome: Outcome, current: CurrentPoint | None
) -> None:
    """bisect.json: the request, the path taken so far and the point being measured."""
    state = {"request": asdict(request), **asdict(outcome)}
    state["current"] = current
    write_atomic(root / "bisect.json", json.dumps(state, indent=2) + "\n")


def interrupted_run(
    root: Path, current: CurrentPoint | None, lo: str, mid: str, hi: str, attempt: int
) -> Path | None:
    """The run folder of the point (lo, mid, hi, attempt) when it is the one that was being
    measured when the bisection stopped and its run was started; None otherwise."""
    where = {"lo": lo, "mid": mid, "hi": hi, "attempt": attempt}
    if current is None or {k: current.get(k) for k in where} != where:
        return None
    again = root / "runs" / str(current.get("run"))
    return again if (again / "run.json").is_file() else None


def tried_build(text: str, skipped: Iterable[str], labels: dict[str, str]) -> str:
    """--try: the skipped build `text` names (its spec, its label, or its commit id's first
    digits); an error naming the skipped builds when it names none or several."""
    skipped = list(skipped)
    if not skipped:
        raise BisectError(
            f"--try {text}: this bisection skipped no build; --try measures a build it "
            "skipped (one that could not be built or started) once you have fixed it"
        )
    found = [b for b in skipped if text in (b, labels[b]) or _commit_is(b, text)]
    if len(found) != 1:
        listed = ", ".join(shown(b) for b in skipped)
        what = "names several" if found else "is not one"
        raise BisectError(f"--try {text}: {what} of the builds this bisection skipped: {listed}")
    return found[0]


def _commit_is(build: str, text: str) -> bool:
    """Whether `text` is the start (4 digits at least) of a source build's commit id."""
    if "#" not in build or len(text) < 4 or not re.fullmatch(r"[0-9a-fA-F]+", text):
        return False
    return build.split("#", 1)[1].lower().startswith(text.lower())


def recorded_keys(run: Path) -> dict[str, str]:
    """The cache key each source build of a point's run was built under, by its label
    (run.json's builds); empty when the run has no run.json or records none, and for a
    fleet's run (its workers' keys: another host's compiler gives another key)."""
    return _keys_and_why(run)[0]


def _keys_and_why(run: Path) -> tuple[dict[str, str], str | None]:
    """recorded_keys, and why the run's builds cannot be checked (None: they can)."""
    try:
        record = json.loads((run / "run.json").read_text())
        builds = record.get("builds", {})
    except (OSError, ValueError, AttributeError) as e:
        return {}, f"its run.json cannot be read ({type(e).__name__})"
    if not isinstance(builds, dict):
        return {}, "its run.json records no builds"
    if record.get("hosts"):
        return {}, "it ran on a fleet, each worker's build with its own compiler"
    keys = {
        label: str(ident["cache_key"])
        for label, ident in builds.items()
        if isinstance(ident, dict) and ident.get("cache_key")
    }
    return keys, None


class Keys:
    """The cache key each build of a bisection builds as now, against those its runs
    recorded: a source build that now builds under another key (a new recipe or fixed
    option, another compiler or package) is another build under the same name, whose
    points and interrupted runs are not carried into a resumed bisection."""

    def __init__(
        self,
        flavors: FlavorTables,
        labels: dict[str, str],
        runs: Path,
        say: Callable[[str], None] = lambda _: None,
    ) -> None:
        self.flavors, self.labels, self.runs, self.say = flavors, labels, runs, say
        self.keys: dict[str, str | None] = {}

    def now(self, build: str) -> str | None:
        """`build`'s cache key now: a source build's; None for a release, and for a
        build whose key cannot be found (said once: what it measured is not checked)."""
        if build not in self.keys:
            spec = spec_of(build, self.flavors)
            try:
                self.keys[build] = source.plan(spec).key if spec.is_source else None
            except DbregressError as e:
                self.keys[build] = None
                first = str(e).splitlines()[0] if str(e) else type(e).__name__
                self.say(
                    f"{shown(build)}: its cache key cannot be found now ({first}); "
                    "the points that measured it are not checked against it"
                )
        return self.keys[build]

    def rebuilt(self, run: Path, builds: Iterable[str]) -> str | None:
        """Which of `builds` the run measured under another key than now (None: none;
        a run whose builds cannot be checked is said)."""
        was, why = _keys_and_why(run)
        if why is not None:
            self.say(f"run {run.name}: its builds' cache keys are not checked: {why}")
        for b in dict.fromkeys(builds):
            before = was.get(self.labels[b])
            now = self.now(b) if before is not None else None
            if before is not None and now is not None and before != now:
                return (
                    f"run {run.name} measured {shown(b)} built as {before}; it builds as {now} now"
                )
        return None

    def reusable(
        self, point: BisectPoint | None, say: Callable[[str], None], good: str
    ) -> BisectPoint | None:
        """`point`, measured before a resume, if it measured the builds of now (its
        ends, its middle and the `good` end it was judged against too); else None
        (said): it is measured again, never compared with the new builds."""
        if point is None:
            return None
        moved = self.rebuilt(self.runs / point.run, (point.lo, point.mid, point.hi, good))
        if moved is not None:
            say(f"{moved}: measuring its point again")
            return None
        return point

    def resumable(
        self, run: Path | None, builds: tuple[str, ...], say: Callable[[str], None]
    ) -> Path | None:
        """The interrupted run to resume, unless its finished jobs measured another build
        (then None, said: the point is measured in a new run)."""
        moved = self.rebuilt(run, builds) if run is not None else None
        if moved is not None:
            say(f"{moved}: measuring the point in a new run")
            return None
        return run
