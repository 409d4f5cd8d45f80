"""What the site shows, as plain data: gathered from the history and the run folders
(site/gather.py), drawn by site/charts.py and site/pages.py, and written as JSON beside
the pages (site/write.py), so that other tools read the same figures the pages show."""

from __future__ import annotations

from dataclasses import dataclass, field, is_dataclass
from typing import Any

from dbregress.shapes.verdicts import LedgerJson


@dataclass(frozen=True)
class Verdict:
    """One column's verdict against its run's base, as the run's verdicts.json says."""

    word: str  # slower | faster | same | undecided
    ratio: float | None
    ci: tuple[float, float] | None
    reason: str = ""
    # the cost lane's: a `same` verdict beyond the small-change floor (docs/ledger.md)
    small: bool = False

    @property
    def shown(self) -> str:
        """The word as the site prints it: `small` for a small change."""
        return "small" if self.small and self.word == "same" else self.word


@dataclass(frozen=True)
class Point:
    """One run's level of one (lane, comparison, step, column)."""

    run: int  # the run's place on the lab's axis (site/gather.py: LabRuns)
    run_id: str
    started: str | None
    level: float  # median QPS over the repeats (time), mean est. cycles/op (cost)
    samples: int
    left_out: int  # repeats the host disturbed, left out
    build: str
    config: str
    host: str
    method: str | None
    commit: str | None = None  # a source build's commit and subject
    subject: str | None = None
    verdict: Verdict | None = None  # against the run's base column (None: none read)
    report: str | None = None  # the run's report.html, relative to the site's root
    base: bool = False  # the run's base column


@dataclass(frozen=True)
class ChangeMark:
    """A decided change point: the level shifts at `run_id` (the first run of the new
    level), for `column`."""

    column: str
    run: int
    run_id: str
    word: str  # slower | faster
    ratio: float  # the new level over the old, in the lane's own metric
    ci: tuple[float, float]


@dataclass(frozen=True)
class Break:
    """A method boundary: the runs from `run` on were measured another way than those
    before; no line is drawn across it, and no change point looked for across it."""

    after: int  # the last run of the old method on this chart
    run: int  # the first run of the new one
    what: tuple[str, ...]  # what changed, in words (method.differences)


@dataclass(frozen=True)
class Line:
    column: str
    pieces: tuple[tuple[Point, ...], ...]  # one per method: never joined across


@dataclass(frozen=True)
class Chart:
    """One lane of one step: the time lane per host class, the cost lane across hosts."""

    lane: str
    comparison: str
    step: str
    host: str | None  # the time lane's host class (its name); None in the cost lane
    lines: tuple[Line, ...]
    changes: tuple[ChangeMark, ...]
    breaks: tuple[Break, ...]


@dataclass(frozen=True)
class StepData:
    comparison: str
    step: str
    page: str  # its page, relative to the site's root
    charts: tuple[Chart, ...]


@dataclass(frozen=True)
class Moved:
    """A line of the "what moved" page: a change point between runs, or a confirmed
    verdict of a column against its run's base."""

    kind: str  # change point | verdict
    lane: str
    comparison: str
    step: str
    column: str
    run_id: str
    started: str | None
    word: str
    ratio: float | None
    ci: tuple[float, float] | None
    build: str
    host: str
    commit: str | None = None
    subject: str | None = None
    cause: str | None = None  # explain's named cause, or the verdict's reading
    report: str | None = None
    step_page: str | None = None
    still: str | None = None  # an open regression the later runs did not judge: how many


@dataclass(frozen=True)
class NightLine:
    """A night of the nightly recipe (RESULTS/nightly/state.json), as the index shows it."""

    night: str
    started: str | None
    commit: str  # its first 12 characters
    subject: str
    outcome: str  # green | unchanged | regression | drift | not judged | failed | ...
    status: int | None  # the recipe's exit status
    why: str
    run: str | None
    report: str | None  # the run's report.html, relative to the site's root


@dataclass(frozen=True)
class Bisection:
    folder: str  # relative to the results root
    engine: str  # the engine of its builds (bisect.json names no lab)
    step: str
    lane: str
    good: str
    bad: str
    answer: str  # first bad build, "could be any of", or why it stopped
    first_bad: str | None
    candidates: tuple[str, ...]
    path: tuple[str, ...]  # a line per measured point
    took_s: float | None


@dataclass(frozen=True)
class SeriesRow:
    step: str
    group: str
    time: tuple[float | None, ...]  # per column, relative to the first (1.0 there)
    cost: tuple[float | None, ...]
    time_words: tuple[str, ...]
    cost_words: tuple[str, ...]


@dataclass(frozen=True)
class VersionSeries:
    """A run whose comparison has three or more columns: every column relative to the
    first, per step and per group of steps."""

    run_id: str
    started: str | None
    comparison: str
    columns: tuple[str, ...]
    builds: tuple[str, ...]
    rows: tuple[SeriesRow, ...]
    page: str
    report: str | None


@dataclass(frozen=True)
class RunSummary:
    run_id: str
    started: str | None
    status: str
    host: str
    report: str | None


@dataclass
class LabData:
    name: str
    runs: list[RunSummary]
    steps: list[StepData]
    moved: list[Moved]
    bisections: list[Bisection]
    series: list[VersionSeries]
    open_regressions: list[Moved] = field(default_factory=list)
    last_judged: bool = True  # the last run's verdicts were read
    last_undecided: int = 0  # the last run's verdicts that are undecided or withheld
    last_not_judged: dict[str, str] = field(default_factory=dict)  # lane -> why not
    ledger: LedgerJson | None = None  # since the nightly recipe's reference (report/ledger.py)
    problems: list[str] = field(default_factory=list)  # what could not be read, and why


def as_json(value: Any) -> Any:
    """A dataclass (or a list or tuple of them) as JSON-ready data; dataclasses.asdict
    deep-copies every leaf, a second of a 500-run lab's data."""
    if is_dataclass(value) and not isinstance(value, type):
        return {k: as_json(v) for k, v in vars(value).items()}
    if isinstance(value, list | tuple):
        return [as_json(v) for v in value]
    return value
