"""The machine-readable verdicts of a run (`dbregress report RUN --format json`),
described by schema/verdicts.schema.json."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Final, Literal, cast

from dbregress.analysis.compare import VERDICT_METRICS, RunVerdicts, lane_gaps
from dbregress.analysis.cost import CostComparison
from dbregress.analysis.cost_floors import FloorSeen
from dbregress.analysis.cost_methods import COST_METRICS
from dbregress.analysis.metrics import Metric
from dbregress.analysis.state import SideState
from dbregress.analysis.verdict import StepVerdict
from dbregress.report import count_store, disclosure, io_tables
from dbregress.report.count_store import CostLaneNoteJson, CostVerdictJson, StoreReport
from dbregress.report.verdict_tables import reading
from dbregress.shapes import verdicts as shapes
from dbregress.shapes.replay import CostLaneRecord, ReplayRecord
from dbregress.shapes.run import ComparisonEntry, RunJson

FORMAT_VERSION: Final = 1
LANES: tuple[shapes.Lane, ...] = ("time", "cost")


def _ci(ci: tuple[float, float] | None) -> list[float] | None:
    return list(ci) if ci is not None else None


def _metric(c: StepVerdict, m: Metric) -> shapes.MetricVerdict:
    return {
        "ratio": c.ratio,
        "ci": _ci(c.ci),
        "verdict": cast(shapes.MetricWord, c.verdict),
        "unit": m.unit,
        "better": m.better,
    }


def _step(
    v: RunVerdicts,
    comparison: str,
    label: str,
    step: str,
    c: StepVerdict,
    stored: StoreReport | None = None,
) -> shapes.StepVerdictJson:
    metrics = {}
    for m in VERDICT_METRICS:
        mc = v.metrics.get(m.key, {}).get((comparison, label, step))
        if mc is not None:
            metrics[m.key] = _metric(mc, m)
    return {
        "step": step,
        "lane": "time",
        "ratio": c.ratio,
        "ci": _ci(c.ci),
        "verdict": cast(shapes.VerdictWord, c.verdict),
        "ci_confidence": c.ci_confidence,
        "p_value": c.p_value,
        "repeats": {"base": c.n_base, "column": c.n_other},
        "more_repeats": c.more_repeats,
        "reason": c.reason,
        "metrics": metrics,
        "cost": _cost(v, (comparison, label, step), stored),
    }


def _count(c: CostComparison, unit: str) -> shapes.CountVerdict:
    return {
        "ratio": c.ratio,
        "ci": _ci(c.ci),
        "verdict": cast(shapes.VerdictWord, c.verdict),
        "replays": {"base": c.replays[0], "column": c.replays[1]},
        "base": c.base,
        "value": c.value,
        "unit": unit,
        "spread": max(c.spread),
    }


def _floor(seen: FloorSeen | None) -> shapes.FloorSource:
    if seen is None:
        return {"sd": None, "runs": [], "note": "not given"}
    return {"sd": seen.sd, "runs": list(seen.runs), "note": seen.note or None}


def _noise(c: CostComparison) -> shapes.Noise:
    """The floor a step's verdict used and where it came from, and what each measured
    floor (the lab's A/A calibration, the history) held for the step."""
    seen = {s.source: s for s in c.floors}
    return {
        "sd": c.noise,
        "from": c.noise_from or None,
        "calibration": _floor(seen.get("calibration")),
        "history": _floor(seen.get("history")),
        "left_out": c.left_out or None,
    }


def _state(s: SideState | None) -> shapes.BaseState | None:
    if s is None:
        return None
    return {
        "counted": s.counted,
        "timed": s.timed,
        "mismatch": s.mismatch,
        "kind": s.kind,
        "counted_misses_per_op": s.counted_misses,
        "timed_misses_per_op": s.timed_misses,
        "tolerance_misses_per_op": s.tolerance,
        "replays": s.replays,
    }


def _cost(
    v: RunVerdicts, key: tuple[str, str, str], stored: StoreReport | None = None
) -> shapes.CostVerdict | None:
    """The cost lane's verdict of a step: estimated cycles per operation, column over
    base (above 1: more work), with every count metric beside it and, in a run that used
    the count store, how many of each side's replays were taken from it and from which
    runs (report/count_store.py); None without a lane."""
    head = v.cost_for(key)
    if head is None:
        return None
    counts = {}
    for m in COST_METRICS:
        c = v.cost_metric(m.key, key)
        if c is not None:
            counts[m.key] = _count(c, m.unit)
    background: shapes.BackgroundEstimatedCycles = {
        "base": head.background[0],
        "column": head.background[1],
    }
    out: CostVerdictJson = {
        "metric": cast(Literal["estimated_cycles"], head.metric),  # the headline's
        "ratio": head.ratio,
        "ci": _ci(head.ci),
        "verdict": cast(shapes.VerdictWord, head.verdict),
        "replays": {"base": head.replays[0], "column": head.replays[1]},
        "p_value": head.p_value,
        "reason": head.reason,
        "reading": reading(v.for_comparison(key[0]).get((key[1], key[2])), head) or None,
        "counts": counts,
        "background_estimated_cycles": background,
        # the sd of log counts each side's variance was floored at, what measured it, and
        # what the A/A calibration and the history gave this step (with their runs)
        "noise": _noise(head),
        # each side's counted windows against its timed window (cache misses per
        # operation, and the hit rate where the engine counts hits); a side further
        # apart than its tolerance gets no verdict
        "state": {"base": _state(head.state[0]), "column": _state(head.state[1])},
        "small": head.small,
        "size": head.size,
        "small_floor": None if head.small_floor is None else math.expm1(head.small_floor),
    }
    reused = stored.step_json(key) if stored is not None else None
    if reused is not None:
        out["reused"], out["reused_from"], out["fresh"] = reused
    return out


def _comparison(
    record: RunJson,
    v: RunVerdicts,
    comp: ComparisonEntry,
    lane: CostLaneRecord | None,
    stored: StoreReport | None = None,
) -> shapes.VerdictComparison:
    """One comparison's verdicts, column by column, and what its counting replays
    changed (report/disclosure.py; None without a cost lane)."""
    name, (base, *others) = comp["name"], comp["labels"]
    found = v.for_comparison(name)
    steps = list(dict.fromkeys(step for (_, step) in found))
    columns: list[shapes.VerdictColumn] = [
        {
            "label": label,
            "steps": [
                _step(v, name, label, s, found[(label, s)], stored)
                for s in steps
                if (label, s) in found
            ],
        }
        for label in others
    ]
    changed = None if v.cost is None else disclosure.disclosure(lane, record, name).to_json()
    return {
        "name": name,
        "benchmark": comp["benchmark"],
        "base": base,
        "columns": columns,
        "counting_replays": changed,
    }


def _cost_lane(v: RunVerdicts, stored: StoreReport | None) -> shapes.CostLaneNote | None:
    """verdicts.json `cost_lane`: its band, replays and method, and where the run used
    the count store, what cost/lane.json says of that use (`count_store`)."""
    if v.cost is None:
        return None
    out: CostLaneNoteJson = {
        "band": v.policy.cost_band,
        "replays_per_column": v.cost.replays,
        "method": "Welch t-test and interval on log counts per operation over counting "
        "replays under valgrind (variance floored per step: its noise, at least 0.02%), "
        "Benjamini-Hochberg across the lab, TOST equivalence; headline estimated cycles",
    }
    used = stored.to_json() if stored is not None else None
    if used is not None:
        out["count_store"] = used
    return out


def render(
    record: RunJson,
    v: RunVerdicts,
    lane: CostLaneRecord | None = None,
    replays: Sequence[ReplayRecord] | None = None,
) -> shapes.Verdicts:
    """verdicts.json of a run (run.json, its cost/lane.json and its counting replays
    typed or as read: store/run.py, store/replays.py; replays None: which were taken
    from the count store is not told)."""
    stored = count_store.summarize(record, v, lane, replays)
    comparisons = [_comparison(record, v, comp, lane, stored) for comp in record["comparisons"]]
    out: shapes.Verdicts = {
        "format_version": FORMAT_VERSION,
        "run_id": record["run_id"],
        "lab": record["lab"],
        "status": record["status"],
        "policy": {
            "alpha": v.policy.alpha,
            "band": v.policy.band,
            "cost_band": v.policy.cost_band,
            "cost_small_floor": v.policy.cost_small_floor,
        },
        # which lanes judged the run; a lane absent from "judged" says why in "not_judged"
        "lanes": {
            "judged": [lane for lane in LANES if lane not in lane_gaps(v, record)],
            "not_judged": lane_gaps(v, record),
        },
        "method_identity": record.get("method_identity"),
        "method": "Hodges-Lehmann ratio of log QPS over repeats, Moses interval, "
        "Mann-Whitney test with Benjamini-Hochberg across the lab, TOST equivalence",
        "cost_lane": _cost_lane(v, stored),
        "comparisons": comparisons,
        "disturbed": [
            {"column": d.column, "repeat": d.repeat, "step": d.step, "why": d.why}
            for d in v.disturbed
        ],
    }
    if v.io:  # per IO-bound comparison: the device baseline (fio), IO efficiency per step
        out["io_efficiency"] = [io_tables.to_json(s) for s in v.io]
    return out
