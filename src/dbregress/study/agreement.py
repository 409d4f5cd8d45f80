"""How a claim of the seed and our run agree (docs/studies.md, "Agreement"): our figure
is the report's own, as verdicts.json gives it (the time lane's ratio, interval and
verdict, or a cost metric's); nothing here judges anew. Pure."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from dbregress.report.verdict_tables import QPS_MARKS
from dbregress.shapes.verdicts import StepVerdictJson, Verdicts
from dbregress.study.file import EPSILON, Claim

AGREES = "agrees"
DIRECTION = "agrees in direction, undecided"
AGAINST = "disagrees in direction, undecided"
DISAGREES = "disagrees"
NOT_MEASURED = "not measured"
CLASSES = (AGREES, DIRECTION, AGAINST, DISAGREES, NOT_MEASURED)
METRIC_NAMES = {
    "qps": "QPS",
    "estimated_cycles": "est. cycles/op",
    "instructions": "instr/op",
    "l1_misses": "L1 misses/op",
    "ll_misses": "LL misses/op",
    "branch_mispredictions": "mispredictions/op",
    "system_calls": "system calls/op",
}

Key = tuple[str, str, str]  # comparison, column, step


@dataclass(frozen=True)
class Figure:
    """A ratio (column over base) with its interval and the report's verdict."""

    ratio: float | None
    ci: tuple[float, float] | None
    verdict: str
    small: bool = False

    def text(self, digits: int, interval: bool = True, word: bool = False) -> str:
        if self.ratio is None:
            return "-"
        out = f"{self.ratio:.{digits}f} {QPS_MARKS.get(self.verdict, '?')}"
        if self.small:
            out += " small"
        if interval and self.ci is not None:
            out += f" [{self.ci[0]:.{digits}f}, {self.ci[1]:.{digits}f}]"
        return f"{out} {self.verdict}" if word else out


def index(verdicts: Verdicts) -> dict[Key, StepVerdictJson]:
    """Every step verdict of verdicts.json by (comparison, column, step)."""
    return {
        (comp["name"], col["label"], s["step"]): s
        for comp in verdicts["comparisons"]
        for col in comp["columns"]
        for s in col["steps"]
    }


def _ci(value: Any) -> tuple[float, float] | None:
    return (
        (float(value[0]), float(value[1])) if isinstance(value, list) and len(value) == 2 else None
    )


def time_figure(step: StepVerdictJson | None) -> Figure | None:
    if step is None or step.get("ratio") is None:
        return None
    return Figure(step["ratio"], _ci(step.get("ci")), str(step.get("verdict", "undecided")))


def cost_figure(step: StepVerdictJson | None, metric: str = "estimated_cycles") -> Figure | None:
    """A cost metric's figure of a step (the headline's for estimated cycles, with its
    small-change mark); None where the step was not counted."""
    cost = step.get("cost") if step is not None else None
    if not cost:
        return None
    if metric == "estimated_cycles" and cost.get("ratio") is not None:
        small = bool(cost.get("small"))
        return Figure(cost["ratio"], _ci(cost.get("ci")), str(cost["verdict"]), small)
    count = (cost.get("counts") or {}).get(metric)
    if not count or count.get("ratio") is None:
        return None
    return Figure(count["ratio"], _ci(count.get("ci")), str(count["verdict"]))


def ours(claim: Claim, steps: Mapping[Key, StepVerdictJson]) -> Figure | None:
    """Our figure for a claim: its lane's, for its metric."""
    step = steps.get((claim.comparison, claim.column, claim.step))
    return time_figure(step) if claim.lane == "time" else cost_figure(step, claim.metric)


def classify(claim: Claim, figure: Figure | None, threshold: float, band: float) -> str:
    """`agrees`: our verdict is decided the seed's way (our ratio on its side of 1);
    `disagrees`: decided the other way, or `same` (our interval inside 1 ± `band`, the
    lane's equivalence band) where the seed's figure lies outside that band; otherwise
    our figure decides nothing about the claim (undecided, or `same` within a band that
    holds the seed's figure, or a figure with no size): `agrees in direction,
    undecided` with our ratio on the seed's side of 1, `disagrees in direction,
    undecided` on the other side or at 1; `not measured`: no figure."""
    expected, above = claim.expected(threshold), claim.expects_above_one(threshold)
    if expected is None or above is None:
        raise ValueError(f"claim {claim.number} claims no change; it is not classified")
    if figure is None or figure.ratio is None:
        return NOT_MEASURED
    seed_side = figure.ratio > 1 if above else figure.ratio < 1
    if figure.verdict in ("faster", "slower"):
        return AGREES if figure.verdict == expected and seed_side else DISAGREES
    ratio = claim.seed_ratio
    if figure.verdict == "same" and ratio is not None and abs(ratio - 1) > band + EPSILON:
        return DISAGREES  # our interval lies inside the band, the seed's figure outside it
    return DIRECTION if seed_side else AGAINST


def summary(classes: Iterable[str]) -> str:
    """The fractions: decided agreements of the claims, agreements in direction only
    (our verdict undecided), both together, then decided disagreements, disagreements
    in direction only and the claims not measured."""
    seen = Counter(classes)
    n = sum(seen.values())
    if n == 0:
        return "no claim of a change to judge"
    agree, direction = seen[AGREES], seen[DIRECTION]
    return (
        f"{agree} of {n} claims agree, decided ({_pct(agree, n)}); {direction} of {n} agree "
        f"in direction only, undecided ({_pct(direction, n)}); in direction at all "
        f"{agree + direction} of {n} ({_pct(agree + direction, n)}); disagree, decided: "
        f"{seen[DISAGREES]}; disagree in direction only, undecided: {seen[AGAINST]}; "
        f"not measured: {seen[NOT_MEASURED]}"
    )


def _pct(part: int, whole: int) -> str:
    return f"{100 * part / whole:.0f}%"


def seed_text(claim: Claim) -> str:
    """The seed's figure as published: its ratio, or its direction with no size."""
    if claim.seed_ratio is not None:
        what = "" if claim.metric == "qps" else f" {METRIC_NAMES[claim.metric]}"
        return f"{claim.seed_ratio:.2f}{what}"
    return f"{claim.direction} (no size given)"
