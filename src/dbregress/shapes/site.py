"""Files the site (site/) reads besides run.json and verdicts.json (shapes/run.py,
shapes/verdicts.py): a bisection's bisect.json and the nightly recipe's state file
(examples/nightly.py, docs/nightly.md), as the site reads them. Every key is optional:
the site reads what is there and says what it could not read, never more."""

from __future__ import annotations

from typing import TypeAlias, TypedDict

# a JSON object as read from a file, before it is narrowed to one of the shapes
JsonObject: TypeAlias = dict[str, object]


class BisectRequestRead(TypedDict, total=False):
    step: str
    lane: str
    builds: list[str]
    all_changes: bool
    direction: str | None


class ChangeRead(TypedDict, total=False):
    """One change of an --all-changes bisection (bisect/model.py ChangeRow)."""

    commit: str
    build: str
    direction: str
    ratio: float | None


class BisectVerdictRead(TypedDict, total=False):
    word: str


class BisectPointRead(TypedDict, total=False):
    lo: str
    mid: str
    mid_vs_lo: BisectVerdictRead | None


class BisectRead(TypedDict, total=False):
    """bisect.json (docs/bisect.md): what the site shows of a bisection."""

    request: BisectRequestRead
    builds: list[str]
    first_bad: str | None
    candidates: list[str] | None
    stopped: str | None
    ends_same: bool
    points: list[BisectPointRead]
    changes: list[ChangeRead]  # --all-changes
    counted: int  # --all-changes: builds counted, once finished
    took_s: float | None


class NightRead(TypedDict, total=False):
    """One night of the nightly recipe's state file (RESULTS/nightly/state.json,
    `nights`): what the site shows of it."""

    night: str
    lab: str
    commit: str
    subject: str
    started: str
    ended: str | None
    outcome: str  # green | unchanged | regression | drift | not judged | failed | ...
    status: int | None
    why: str
    run: str | None
    held: str | None


class NightReferenceRead(TypedDict, total=False):
    """The drift's fixed reference of a lab (state.json `reference`)."""

    run: str
    night: str | None


class NightlyStateRead(TypedDict, total=False):
    format: int
    nights: list[NightRead]
    reference: dict[str, NightReferenceRead]  # lab -> its reference


class ManifestLab(TypedDict):
    """A lab in the site's manifest: the digest of its inputs, the files it made, and
    what the index says of it (site/pages.py index_entry, as JSON)."""

    inputs: str
    files: list[str]
    index: JsonObject


class SiteManifest(TypedDict, total=False):
    """OUT/site.json (site/write.py): what the last write made, read back to write
    only what changed."""

    format: int
    results: str  # the results folder, relative to the site
    labs: dict[str, ManifestLab]
    files: list[str]
