"""What a comparison's counting replays changed in the engines and steps they counted,
read from cost/lane.json (`replay_changes`, explain/replay_changes.py), for every report
format: a paragraph in Markdown and HTML, an object in verdicts.json, lines in TSV and a
column in CSV (docs/verdicts.md, "What the counting replays change").

A lane.json written by an earlier dbregress records only each engine family's settings
and the lockstep steps: the disclosure then gives those and says what it lacks; a run
with replays but no lane.json (the lane was interrupted) says that nothing is recorded.
Nothing is filled in from what this version of dbregress would do.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from dbregress.configs import family_of
from dbregress.shapes import verdicts as shapes
from dbregress.shapes.replay import CostLaneRecord, ReplayWindow
from dbregress.shapes.run import RunJson

DOC = 'docs/verdicts.md, "What the counting replays change"'
# The step adjustments (explain/replay_changes.py) in words.
ADJUSTMENTS = {
    "lockstep": "the inserter and the deleter take turns (lockstep)",
    "settled": "the step starts from a settled engine (memtables flushed and compaction "
    "done; InnoDB's dirty pages written)",
    "paced_on_query_thread": "the paced writers run on the query thread, a write every fixed "
    "number of Q calls (the step's pinned pace, not the time lane's rate)",
}
MISSING = (
    "cost/lane.json is missing (the cost lane did not finish): what its replays changed "
    "is not recorded"
)
EARLIER = (
    "recorded by an earlier dbregress: only each engine family's settings and the lockstep "
    "steps, not the windows, the settled and paced steps or what is held off the windows"
)


@dataclass(frozen=True)
class Disclosure:
    """One comparison's counting-replay changes as lane.json records them."""

    comparison: str
    recorded: bool  # lane.json has the full record
    note: str | None  # what is missing, and why
    profile: str | None = None
    settings: dict[str, dict[str, str]] = field(default_factory=dict)  # column -> changes
    held: dict[str, str] = field(default_factory=dict)  # column -> what is held off
    steps: dict[str, list[str]] = field(default_factory=dict)  # step -> adjustments
    windows: dict[str, dict[str, ReplayWindow]] = field(default_factory=dict)  # step -> column

    def lines(self) -> list[str]:
        """The changes in words, one line each: settings, holds, steps, windows."""
        out = _settings_lines(self.settings) + _grouped(self.held, "")
        by_adjustment: dict[str, list[str]] = {}
        for step, found in self.steps.items():
            for a in found:
                by_adjustment.setdefault(a, []).append(step)
        out += [f"{', '.join(s)}: {ADJUSTMENTS.get(a, a)}" for a, s in by_adjustment.items()]
        if self.windows:
            out.append("windows (Q calls counted, after how many): " + _windows(self.windows))
        if self.note is not None:
            out.append(f"not complete: {self.note}")
        return out

    def for_cell(self, column: str, step: str) -> str:
        """What the replays of one column changed for one step (a CSV cell)."""
        parts = [f"{k} = {v}" for k, v in self.settings.get(column, {}).items()]
        if column in self.held:
            parts.append(self.held[column])
        parts += [ADJUSTMENTS.get(a, a) for a in self.steps.get(step, [])]
        window = self.windows.get(step, {}).get(column)
        if window is not None:
            parts.append(f"window {_window(window)}")
        if self.note is not None:
            parts.append(f"not complete: {self.note}")
        return "; ".join(parts)

    def to_json(self) -> shapes.CountingReplays:
        return {
            "recorded": self.recorded,
            "profile": self.profile,
            "note": self.note,
            "settings": self.settings,
            "held": self.held,
            "steps": {
                s: {"adjustments": a, "windows": self.windows.get(s, {})}
                for s, a in self.steps.items()
            },
            "lines": self.lines(),
        }


def _settings_lines(settings: dict[str, dict[str, str]]) -> list[str]:
    words = {
        lb: ", ".join(f"{k} = {v}" for k, v in s.items()) or "no engine setting changed"
        for lb, s in settings.items()
    }
    return _grouped(words, "engine settings of ")


def _grouped(by_column: dict[str, str], prefix: str) -> list[str]:
    """Columns with the same words named together: `prefix<a, b>: words`."""
    groups: dict[str, list[str]] = {}
    for label, words in by_column.items():
        groups.setdefault(words, []).append(label)
    return [f"{prefix}{', '.join(labels)}: {words}" for words, labels in groups.items()]


def _window(w: ReplayWindow) -> str:
    text = f"{w['ops']:,} after {w['skip_ops']:,}"
    if w.get("until_hit_rate"):
        text += f", or earlier once the block cache hits {w['until_hit_rate']:.1%}"
    return text


def _windows(windows: dict[str, dict[str, ReplayWindow]]) -> str:
    parts = []
    for step, by_column in windows.items():
        texts = {lb: _window(w) for lb, w in by_column.items()}
        if len(set(texts.values())) == 1:
            parts.append(f"{step} {next(iter(texts.values()))}")
        else:
            parts.append(f"{step} " + ", ".join(f"{lb} {t}" for lb, t in texts.items()))
    return "; ".join(parts)


def _columns(record: RunJson, comparison: str) -> list[tuple[str, str]]:
    """(label, engine) of the comparison's columns, from run.json."""
    return [
        (c["label"], str(c.get("build", "")).split("@")[0])
        for c in record.get("columns", [])
        if c.get("comparison") == comparison
    ]


def disclosure(lane: CostLaneRecord | None, record: RunJson, comparison: str) -> Disclosure:
    """A comparison's disclosure from cost/lane.json (None: the run has none)."""
    if lane is None:
        return Disclosure(comparison, False, MISSING)
    changes = lane.get("replay_changes")
    if changes is None:
        return _earlier(lane, record, comparison)
    found = changes["comparisons"].get(comparison)
    if found is None:
        return Disclosure(comparison, False, "cost/lane.json records no replay of it")
    return Disclosure(
        comparison,
        True,
        None,
        changes.get("profile"),
        found["settings"],
        found["held"],
        {s: c["adjustments"] for s, c in found["steps"].items()},
        {s: c["windows"] for s, c in found["steps"].items()},
    )


def _earlier(lane: CostLaneRecord, record: RunJson, comparison: str) -> Disclosure:
    """What an earlier lane.json says: its settings per engine family, lockstep steps."""
    families = lane.get("replay_settings") or {}
    settings = {}
    for label, engine in _columns(record, comparison):
        family = family_of(engine)
        settings[label] = dict(families.get(family, {}))
    lockstep = {s: ["lockstep"] for s in lane.get("lockstep_steps") or []}
    return Disclosure(comparison, False, EARLIER, settings=settings, steps=lockstep)


def markdown(d: Disclosure) -> list[str]:
    """A paragraph and its list, for report.md and the HTML page."""
    return [
        f"The counting replays ran adjusted engines and steps, not the time lane's exactly "
        f"({DOC}):",
        "",
        *(f"- {line}" for line in d.lines()),
        "",
    ]


def tsv(d: Disclosure) -> list[str]:
    return [f"{d.comparison}: what the counting replays changed ({DOC})", *d.lines(), ""]
