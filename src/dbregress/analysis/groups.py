"""Summaries of relative QPS per microbenchmark group (docs/lab-file.md, The micro
benchmark): average, median, min, max and standard deviation over the group's microbenchmarks."""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from dbregress.analysis.relative import relative
from dbregress.analysis.summary import Matrix
from dbregress.lab.micro_names import GROUPS, group_of


@dataclass(frozen=True)
class GroupSummary:
    group: str
    label: str
    count: int
    average: float
    median: float
    minimum: float
    maximum: float
    stddev: float  # population standard deviation; 0 for one value


def summarize(values: list[float]) -> tuple[float, float, float, float, float]:
    """(average, median, min, max, stddev) of relative QPS values."""
    return (
        statistics.fmean(values),
        statistics.median(values),
        min(values),
        max(values),
        statistics.pstdev(values),
    )


def group_summaries(m: Matrix) -> list[GroupSummary]:
    """Per group and non-base column, over the steps both the column and the base ran.
    The reads run before the writes (name.pre) count in their group too."""
    out = []
    for group in GROUPS:
        steps = [s for s in m.steps if group_of(s) == group]
        for label in m.labels[1:]:
            values = []
            for s in steps:
                base, cell = m.cell(m.base, s), m.cell(label, s)
                rel = relative(cell.qps, base.qps) if cell.status == base.status == "ok" else None
                if rel is not None:
                    values.append(rel)
            if values:
                out.append(GroupSummary(group, label, len(values), *summarize(values)))
    return out
