"""What an A/A run says about this host's noise (pure: step results in, figures out).

An A/A run compares the base column with a copy of itself: every repeat of both is a
sample of the same build, so their spread is the between-repeat noise, the smallest
change the lab's repeats can detect follows from it, and so does the number of repeats
a chosen change needs. An optional third column with an injected slowdown checks that
the verdicts find a change of known size.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

from dbregress.analysis import stats
from dbregress.analysis.compare import RunVerdicts, usable
from dbregress.shapes.run import RunJson
from dbregress.shapes.step_result import StepResultJson

AA_SUFFIX = "-aa"  # the base's copy in an A/A comparison
SLOW_SUFFIX = "-slow"  # the copy with an injected slowdown


@dataclass(frozen=True)
class StepNoise:
    comparison: str
    step: str
    repeats: int  # samples of the base build (both A columns) used
    cv: float | None  # between-repeat coefficient of variation of QPS
    sd_log: float | None  # robust spread of log QPS, what the power figures use
    min_change: float | None  # smallest detectable change at the lab's repeats per side
    repeats_for_change: int | None  # repeats per side to detect `change`
    aa_verdict: str | None
    injected_verdict: str | None


def _qps_by_step(
    steps_by_job: dict[str, list[StepResultJson]], labels: set[str]
) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {}
    for r in usable(r for rs in steps_by_job.values() for r in rs):
        if r["column"] in labels:
            out.setdefault(r["step"], []).append(float(r["q"]["value"]))
    return out


def step_noise(
    record: RunJson,
    steps_by_job: dict[str, list[StepResultJson]],
    verdicts: RunVerdicts,
    repeats: int,
    change: float,
) -> list[StepNoise]:
    """Per comparison and step of an A/A run: noise, detectable change, repeats needed
    (run.json and its step results by job, typed or as read: store/run.py)."""
    alpha = verdicts.policy.alpha
    out = []
    for comp in record["comparisons"]:
        base = comp["labels"][0]
        same = {base, base + AA_SUFFIX}
        for step, values in _qps_by_step(steps_by_job, same).items():
            positive = [v for v in values if v > 0]
            sd = stats.robust_log_sd(positive) if len(positive) >= 2 else math.nan
            ok = math.isfinite(sd) and sd > 0
            aa = verdicts.qps.get((comp["name"], base + AA_SUFFIX, step))
            slow = verdicts.qps.get((comp["name"], base + SLOW_SUFFIX, step))
            out.append(
                StepNoise(
                    comp["name"],
                    step,
                    len(positive),
                    stats.cv(positive) if len(positive) >= 2 else None,
                    sd if math.isfinite(sd) else None,
                    stats.min_detectable_change(sd, repeats, alpha, 0.8) if ok else None,
                    stats.repeats_for_change(sd, change, alpha, 0.8) if ok else None,
                    aa.verdict if aa else None,
                    slow.verdict if slow else None,
                )
            )
    return out


def median_cv(noise: list[StepNoise]) -> float | None:
    values = [n.cv for n in noise if n.cv is not None]
    return statistics.median(values) if values else None
