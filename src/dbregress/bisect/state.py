"""What a bisection keeps between a stop and a resume: bisect.json written (model.py reads
it back), the run of the point that was being measured, and the skipped builds a resumed
bisection is asked to measure (`--try`)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import asdict
from pathlib import Path

from dbregress.bisect.builds import shown
from dbregress.bisect.model import BisectError, BisectRequest, CurrentPoint, Outcome
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
