"""A run's ordered series -> change points (docs/changepoints.md).

A comparison whose columns are three or more (versions, or configs in the order the lab
gives them) is a series. Per step and lane, each column is one point of it holding its
samples: the time lane's usable repeats of QPS (the same samples the time verdicts use:
no warm-up, no failed or disturbed repeat), the cost lane's ok replays of estimated cycles
per operation (of one counting method and scope, none of a column whose counted state
the state check withholds: as the cost verdicts pool them). One call of the method per
lane, so that its false-alarm rate holds over every series of the report.
"""

from __future__ import annotations

import math

from dbregress.analysis import changepoints, state
from dbregress.analysis.changepoints import RunChanges, SeriesKey
from dbregress.analysis.compare import measured, usable
from dbregress.analysis.cost import FLOOR_SD
from dbregress.analysis.cost_methods import (
    COST_METRICS,
    HEADLINE,
    choose_group,
    group_of,
    groups_seen,
    value_of,
)
from dbregress.lab.file import VerdictPolicy
from dbregress.method import identity as method
from dbregress.shapes.replay import ReplayRecord
from dbregress.shapes.run import ComparisonEntry, RunJson
from dbregress.shapes.step_result import StepResultJson

MIN_COLUMNS = 3  # fewer is a comparison, not a series


def _series_comparisons(record: RunJson) -> list[ComparisonEntry]:
    return [c for c in record.get("comparisons", []) if len(c["labels"]) >= MIN_COLUMNS]


def _by_series(
    record: RunJson, by_cell: dict[tuple[str, str], list[float]], order: list[str]
) -> dict[SeriesKey, list[list[float]]]:
    """(comparison, step) -> samples per column in the lab's order, for every series."""
    out: dict[SeriesKey, list[list[float]]] = {}
    for comp in _series_comparisons(record):
        for step in order:
            cols = [by_cell.get((lb, step), []) for lb in comp["labels"]]
            if any(cols):
                out[(comp["name"], step)] = cols
    return out


def time_samples(
    record: RunJson, steps_by_job: dict[str, list[StepResultJson]]
) -> dict[SeriesKey, list[list[float]]]:
    every = [r for rs in steps_by_job.values() for r in rs]
    by_cell: dict[tuple[str, str], list[float]] = {}
    order: list[str] = []
    for r in usable(every):
        q = figures.get("value") if (figures := r.get("q")) else None
        if q is not None and math.isfinite(q) and q > 0:
            by_cell.setdefault((r["column"], r["step"]), []).append(float(q))
    for r in every:
        if measured(r) and r["step"] not in order:
            order.append(r["step"])
    return _by_series(record, by_cell, order)


def cost_samples(
    record: RunJson, replays: list[ReplayRecord], band: float | None = None
) -> dict[SeriesKey, list[list[float]]]:
    """Per series step, each column's ok replays of estimated cycles per operation: only
    those of the one counting method and scope the series keeps (cost.py
    `choose_group`, over every column of the series), and none of a column whose
    counted state the state check withholds at the cost band `band` (None: the run's
    policy's; analysis/state.py), as its cost verdicts are."""
    if band is None:
        band = VerdictPolicy.of_record(record).cost_band
    metric = next(m for m in COST_METRICS if m.key == HEADLINE)
    mine = method.count_key(record.get("method_identity"))
    seen = groups_seen(replays)
    ok = [r for r in replays if r.get("status") == "ok"]
    order: list[str] = []
    for r in ok:
        order += [step for step in r.get("steps", {}) if step not in order]
    out: dict[SeriesKey, list[list[float]]] = {}
    for comp in _series_comparisons(record):
        for step in order:
            groups = [seen.get((label, step), []) for label in comp["labels"]]
            if not any(groups):
                continue
            kept = choose_group(groups, mine)
            cols = []
            for label in comp["labels"]:
                mine_kept = [r for r in ok if r["column"] == label and step in r["steps"]]
                mine_kept = [r for r in mine_kept if group_of(r, step) == kept]
                side = state.side_state(record, mine_kept, label, step, band)
                if side is not None and side.mismatch is not None:
                    mine_kept = []  # counted in another state than timed: left out
                values = (value_of(r["steps"][step].get("per_op", {}), metric) for r in mine_kept)
                cols.append([v for v in values if v is not None and math.isfinite(v) and v > 0])
            if any(cols):
                out[(comp["name"], step)] = cols
    return out


def run_changes(
    record: RunJson,
    steps_by_job: dict[str, list[StepResultJson]],
    replays: list[ReplayRecord],
    policy: VerdictPolicy | None = None,
) -> RunChanges | None:
    """Change points of every series of a run on both lanes; None when the run has no
    comparison of three or more columns. run.json, its step results by job and its
    counting replays come typed or as read (store/run.py, store/replays.py)."""
    if not _series_comparisons(record):
        return None
    if policy is None:
        policy = VerdictPolicy.of_record(record)
    time = changepoints.find_all(
        time_samples(record, steps_by_job), better="higher", band=policy.band
    )
    cost = changepoints.find_all(
        cost_samples(record, replays, policy.cost_band),
        better="lower",
        band=policy.cost_band,
        floor_sd=FLOOR_SD,
        small_floor=policy.cost_small_floor,
    )
    return RunChanges(time, cost, changepoints.ALPHA)
