"""The cost verdicts' measured floors from outside the run: the lab's A/A calibration
and the history give each step a spread of its log counts (`Floors`, `replay_noise`
measures them from earlier runs), and each verdict keeps what every source gave its
step (`FloorSeen`). Apart from analysis/cost.py, which takes the largest floor into
its test, because the calibration store and the history compute and carry these
without judging a run."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from dbregress.analysis.cost_methods import COST_METRICS, Group, Key, counts_by_group
from dbregress.analysis.cost_stats import pooled_log_sd
from dbregress.method import identity as method
from dbregress.shapes.replay import ReplayRecord
from dbregress.shapes.run import RunJson

# Per count metric, per step ("comparison/step", or a bare step name for every
# comparison): a standard deviation of log counts per replay, measured elsewhere.
Noise = Mapping[str, Mapping[str, float]]


@dataclass(frozen=True)
class Floors:
    """One source of measured floors (the lab's A/A calibration, or the history): per
    metric and step key a standard deviation of log counts, the runs that measured each
    step key, and a note when there are none (why) or reading them failed. Step keys:
    "comparison/step", a bare step name (every comparison), or "comparison/step@BUILD"
    for one build (method.build_key): the history's are per build."""

    noise: Noise = field(default_factory=dict)
    runs: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    note: str = ""


@dataclass(frozen=True)
class FloorSeen:
    """What one floor source gave a step: its sd (None: none for this step), the runs
    that measured it, and the source's note."""

    source: str  # "calibration" | "history"
    sd: float | None
    runs: tuple[str, ...] = ()
    note: str = ""


SOURCES = {"calibration": "the A/A calibration", "history": "history"}


def as_floors(given: Floors | Noise | None) -> Floors:
    if given is None:
        return Floors(note="not looked up: the caller gave none")
    return given if isinstance(given, Floors) else Floors(given)


def floor_seen(
    metric: str, key: Key, builds: tuple[str | None, str | None], source: str, floors: Floors
) -> FloorSeen:
    """What one floor source holds for a step: the larger of its sides' builds' spreads
    ("comparison/step@BUILD"), else the step's ("comparison/step", or the bare step)."""
    by_step = floors.noise.get(metric) or {}
    names = [f"{key[0]}/{key[2]}@{b}" for b in builds if b]
    found = [(by_step[n], n) for n in names if _usable(by_step.get(n))]
    if not found:
        names = [f"{key[0]}/{key[2]}", key[2]]
        found = [(by_step[n], n) for n in names[:1] if _usable(by_step.get(n))]
        found = found or [(by_step[n], n) for n in names[1:] if _usable(by_step.get(n))]
    if not found:
        return FloorSeen(source, None, (), floors.note or "none for this step and its builds")
    sd, name = max(found)
    return FloorSeen(source, float(sd), tuple(floors.runs.get(name, ())), floors.note)


def _usable(sd: float | None) -> bool:
    return sd is not None and math.isfinite(sd) and sd > 0


def known_floors(seen: Sequence[FloorSeen]) -> list[tuple[str, float]]:
    return [(SOURCES[s.source], s.sd) for s in seen if s.sd is not None]


def side_builds(record: RunJson, key: Key) -> tuple[str | None, str | None]:
    """The build keys (method.build_key) of a key's base and column."""
    comp = next((c for c in record["comparisons"] if c["name"] == key[0]), None)
    base = comp["labels"][0] if comp else ""
    builds = record.get("builds") or {}
    return method.build_key(builds.get(base)), method.build_key(builds.get(key[1]))


def replay_noise(
    runs: Iterable[tuple[RunJson, list[ReplayRecord]]],
) -> dict[str, dict[str, float]]:
    """Measured spread of every step for `cost_verdicts`' calibration or history floors,
    from earlier runs' (record, replays): per metric and "comparison/step", the pooled
    within-build standard deviation of log counts, each run's column one group (one
    build, one run; replays of one column counted by two methods or scopes are two
    groups). Give it an A/A calibration run of the lab, or earlier runs of the same
    counting method (method.count_key) whose steps match."""
    given = list(runs)
    out: dict[str, dict[str, float]] = {}
    for metric in COST_METRICS:
        groups: dict[str, list[list[float]]] = {}
        for record, replays in given:
            cells: dict[tuple[str, str, Group], list[float]] = {}
            for (column, step), values in counts_by_group(replays, metric).items():
                for v, g in values:
                    cells.setdefault((column, step, g), []).append(v)
            for comp in record["comparisons"]:
                for (column, step, _), vs in cells.items():
                    if column in comp["labels"]:
                        groups.setdefault(f"{comp['name']}/{step}", []).append(vs)
        found = {k: sd for k, g in groups.items() if (sd := pooled_log_sd(g)) is not None}
        if found:
            out[metric.key] = found
    return out
