"""The machine-readable verdicts of a run (`dbregress report RUN --format json`),
described by schema/verdicts.schema.json."""

from __future__ import annotations

from typing import Any

from dbregress.analysis.compare import VERDICT_METRICS, RunVerdicts
from dbregress.analysis.verdict import Comparison

FORMAT_VERSION = 1


def _triple(c: Comparison) -> dict[str, Any]:
    return {
        "ratio": c.ratio,
        "ci": list(c.ci) if c.ci is not None else None,
        "verdict": c.verdict,
    }


def _step(v: RunVerdicts, comparison: str, label: str, step: str, c: Comparison) -> dict[str, Any]:
    metrics = {}
    for m in VERDICT_METRICS:
        mc = v.metrics.get(m.key, {}).get((comparison, label, step))
        if mc is not None:
            metrics[m.key] = {**_triple(mc), "unit": m.unit, "better": m.better}
    return {
        "step": step,
        **_triple(c),
        "ci_confidence": c.ci_confidence,
        "p_value": c.p_value,
        "repeats": {"base": c.n_base, "column": c.n_other},
        "more_repeats": c.more_repeats,
        "reason": c.reason,
        "metrics": metrics,
    }


def render(record: dict[str, Any], v: RunVerdicts) -> dict[str, Any]:
    comparisons = []
    for comp in record["comparisons"]:
        name, (base, *others) = comp["name"], comp["labels"]
        found = v.for_comparison(name)
        steps = list(dict.fromkeys(step for (_, step) in found))
        columns = [
            {
                "label": label,
                "steps": [
                    _step(v, name, label, s, found[(label, s)])
                    for s in steps
                    if (label, s) in found
                ],
            }
            for label in others
        ]
        comparisons.append(
            {"name": name, "benchmark": comp["benchmark"], "base": base, "columns": columns}
        )
    return {
        "format_version": FORMAT_VERSION,
        "run_id": record["run_id"],
        "lab": record["lab"],
        "status": record["status"],
        "policy": {"alpha": v.policy.alpha, "band": v.policy.band},
        "method": "Hodges-Lehmann ratio of log QPS over repeats, Moses interval, "
        "Mann-Whitney test with Benjamini-Hochberg across the lab, TOST equivalence",
        "comparisons": comparisons,
        "disturbed": [
            {"column": d.column, "repeat": d.repeat, "step": d.step, "why": d.why}
            for d in v.disturbed
        ],
    }
