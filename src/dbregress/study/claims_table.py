"""The agreement section of a study's page: one row per claim of a change (the seed's
figure, where it was measured, ours in its lane with interval and verdict, our cost
lane's estimated cycles on that step, the agreement and why ours may differ), the
fractions that agree, then the claims of no change apart (docs/studies.md)."""

from __future__ import annotations

from collections.abc import Mapping

from dbregress.report.verdict_tables import table
from dbregress.shapes.verdicts import StepVerdictJson
from dbregress.study import agreement as ag
from dbregress.study.file import Claim, Study

HEAD = ["#", "comparison", "step", "column / base", "seed", "where", "ours"]


def _cell(text: object) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def rule(study: Study) -> str:
    return (
        f"A claim of a change (the seed's figure at least {study.threshold:.0%} from 1, or "
        "only a direction, faster or slower) is set against our figure for the same step "
        "and columns in its lane, the report's own (verdicts.json): **agrees** when our "
        "verdict is decided the seed's way; **disagrees** when it is decided the other way, "
        "or is same (its interval inside the lane's equivalence band) while the seed's "
        "figure lies outside that band; otherwise our verdict decides nothing about the "
        "claim, and the agreement says only on which side of 1 our ratio lies: **agrees in "
        "direction, undecided** on the seed's side, **disagrees in direction, undecided** "
        "on the other side (or at 1); **not measured** when the run has no figure for it. "
        "In the cost lane slower is more work per operation."
    )


def _seed(claim: Claim) -> str:
    return f"{ag.seed_text(claim)}: {claim.said}"


def _ours(claim: Claim, figure: ag.Figure | None) -> str:
    if figure is None:
        return "-"
    digits = 2 if claim.lane == "time" else 3
    shown = figure.text(digits, interval=True, word=True)
    return shown if claim.lane == "time" else f"{ag.METRIC_NAMES[claim.metric]} {shown}"


def _cost(claim: Claim, steps: Mapping[ag.Key, StepVerdictJson]) -> str:
    figure = ag.cost_figure(steps.get((claim.comparison, claim.column, claim.step)))
    return figure.text(3, interval=False, word=True) if figure is not None else "not counted"


def _row(claim: Claim, ours: str) -> list[str]:
    return [
        str(claim.number),
        claim.comparison,
        claim.step,
        f"{claim.column} / {claim.base}",
        _seed(claim),
        claim.where,
        ours,
    ]


def section(
    study: Study,
    steps: Mapping[ag.Key, StepVerdictJson] | None,
    bands: Mapping[str, float] | None = None,
    unfinished: str | None = None,
) -> list[str]:
    """The agreement section; `steps` None: not run (the seed's side alone). `bands`:
    each lane's equivalence band (the run's policy); `unfinished`: why the run did not
    finish, said before its fractions."""
    judged = [c for c in study.claims if c.expected(study.threshold) is not None]
    apart = [c for c in study.claims if c.expected(study.threshold) is None]
    out = ["## Agreement with the seed", "", rule(study), ""]
    if not study.claims:
        return [*out, "The study names no claim.", ""]
    if steps is None:
        rows = [_row(c, "not run") for c in judged]
        out += table(HEAD, [[_cell(x) for x in r] for r in rows]) if rows else []
    else:
        if unfinished:
            out += [
                f"**The run did not finish ({unfinished}): what follows is of what it measured.**",
                "",
            ]
        out += _judged(study, judged, steps, bands or {})
    if apart:
        out += [
            "### No change claimed",
            "",
            f"The seed reports no change of {study.threshold:.0%} or more for these; they "
            "are not counted above.",
            "",
        ]
        rows = [
            _row(c, "not run" if steps is None else _ours(c, ag.ours(c, steps)))
            + ([] if steps is None else [_cost(c, steps)])
            for c in apart
        ]
        head = HEAD + ([] if steps is None else ["ours, cost lane: est. cycles/op"])
        out += table(head, [[_cell(x) for x in r] for r in rows])
    return out


def _judged(
    study: Study,
    judged: list[Claim],
    steps: Mapping[ag.Key, StepVerdictJson],
    bands: Mapping[str, float],
) -> list[str]:
    if not judged:
        return ["No claim of a change to judge.", ""]
    rows: list[list[str]] = []
    classes: dict[str, list[str]] = {}
    for claim in judged:
        figure = ag.ours(claim, steps)
        band = bands.get(claim.lane, 0.05 if claim.lane == "time" else 0.01)
        found = ag.classify(claim, figure, study.threshold, band)
        classes.setdefault(claim.comparison, []).append(found)
        why = claim.why_may_differ if claim.why_may_differ and found != ag.AGREES else ""
        rows.append([*_row(claim, _ours(claim, figure)), _cost(claim, steps), found, why])
    every = [c for found in classes.values() for c in found]
    out = [f"**The study: {ag.summary(every)}.**", ""]
    if len(classes) > 1:
        out += [f"- {name}: {ag.summary(found)}" for name, found in classes.items()]
        out.append("")
    head = [*HEAD, "ours, cost lane: est. cycles/op", "agreement", "why ours may differ"]
    return out + table(head, [[_cell(x) for x in r] for r in rows])
