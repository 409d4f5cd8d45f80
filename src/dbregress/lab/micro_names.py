"""The microbenchmark suite's names and groups (docs/lab-file.md, The micro benchmark),
as the report needs them; the plan in micro.py orders them."""

from __future__ import annotations

POINT = (
    "point-query",
    "random-points",
    "hot-points",
    "points-covered-pk",
    "points-notcovered-pk",
    "points-covered-si",
    "points-notcovered-si",
)
RANGE_PLAIN = (
    "range-covered-pk",
    "range-notcovered-pk",
    "range-covered-si",
    "range-notcovered-si",
    "scan",
)
RANGE_AGG = (
    "read-only-range10",
    "read-only-range100",
    "read-only-range10000",
    "read-only-simple",
    "read-only-sum",
    "read-only-order",
    "read-only-distinct",
    "read-only-count",
)
WRITES = (
    "update-inlist",
    "update-index",
    "update-nonindex",
    "update-one",
    "update-zipf",
    "write-only",
    "read-write-range10",
    "read-write-range100",
    "delete",
    "insert",
)

GROUPS: dict[str, tuple[str, ...]] = {
    "point": POINT,
    "range without aggregation": RANGE_PLAIN,
    "range with aggregation": RANGE_AGG,
    "writes": WRITES,
}
READS = POINT + RANGE_PLAIN + RANGE_AGG
PRE = ".pre"  # the reads run before the writes are reported as e.g. point-query.pre


def group_of(step: str) -> str | None:
    name = step.removesuffix(PRE)
    return next((g for g, names in GROUPS.items() if name in names), None)


def loadgen_step(name: str) -> tuple[str, int | None]:
    """The loadgen's step and range size for a reported name: read-only-range100 ->
    (read-only, 100)."""
    name = name.removesuffix(PRE)
    for prefix in ("read-only-range", "read-write-range"):
        if name.startswith(prefix):
            return prefix.removesuffix("-range"), int(name.removeprefix(prefix))
    return name, None
