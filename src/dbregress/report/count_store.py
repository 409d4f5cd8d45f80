"""Which counting replays a run's cost verdicts used were taken from the count store
(store/counted.py, cost/reuse.py) instead of counted in the run, and from which runs,
with what cost/lane.json `store` says of the lane's use of the store: for every report
format (docs/reports.md, "Counted before").

A replay taken from the store is written into the run folder like any other and carries
`reused` (where it was counted); a verdict pools it with the run's own. The reports name
them so that a reader knows which counts came from an earlier run, as the earlier run
counted them.

A run folder written before the count store existed has no replay with `reused` and no
`store` in lane.json: `summarize` then gives None and every format renders as it did,
byte for byte. So does a caller that gives no replays (`replays` None): it is not told.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import NotRequired, TypedDict

from dbregress.analysis.compare import RunVerdicts
from dbregress.analysis.cost_methods import (
    COST_METRICS,
    Key,
    choose_group,
    group_of,
    groups_seen,
    value_of,
)
from dbregress.method import identity as method
from dbregress.shapes import verdicts as shapes
from dbregress.shapes.replay import CostLaneRecord, ReplayRecord, StoreUse
from dbregress.shapes.run import RunJson

DOC = 'docs/reports.md, "Counted before"'
EVERY = "every replay was counted in this run"
RECOUNT = "recount: the store was not used"
# A stored replay whose entry does not name the run it was counted in (hand-made).
UNKNOWN_RUN = "(unknown run)"

Used = tuple[tuple[ReplayRecord, ...], tuple[ReplayRecord, ...]]  # (base's, column's)


# verdicts.json's parts for the count store (schema/verdicts.schema.json): optional keys
# over shapes/verdicts.py's, present only in a run that used the store.
class ReusedCounts(TypedDict):
    """Of the replays a verdict used on each side, how many were taken from the store."""

    base: int
    column: int


class ReusedRuns(TypedDict):
    """The runs each side's replays taken from the store were counted in."""

    base: list[str]
    column: list[str]


class CostVerdictJson(shapes.CostVerdict):
    reused: NotRequired[ReusedCounts]
    reused_from: NotRequired[ReusedRuns]
    fresh: NotRequired[ReusedCounts]  # of the replays used, how many this run counted


class CostLaneNoteJson(shapes.CostLaneNote):
    count_store: NotRequired[StoreUse]  # cost/lane.json `store`


@dataclass(frozen=True)
class Side:
    """Of the replays one side of a verdict used (or a column's, over its verdicts): how
    many, how many were taken from the store, and the runs those were counted in."""

    used: int
    reused: int
    runs: tuple[str, ...]

    @staticmethod
    def of(replays: Iterable[ReplayRecord]) -> Side:
        found = {r["replay"]: r for r in replays}  # a replay counted in two steps is one
        taken = [r["reused"] for r in found.values() if "reused" in r]
        runs = sorted({t.get("run") or UNKNOWN_RUN for t in taken})
        return Side(len(found), len(taken), tuple(runs))

    @property
    def fresh(self) -> int:
        """How many of them this run counted itself."""
        return self.used - self.reused

    def text(self) -> str:
        return f"{self.reused} of {self.used}"


def _kept(record: RunJson, replays: Sequence[ReplayRecord]) -> dict[Key, Used]:
    """Per (comparison, column, step), the base's and the column's replays its headline
    verdict pooled, as analysis/cost.py picks them: ok replays with a count of the step,
    of the one counting method and scope kept where the two sides' replays were counted
    by more than one (`choose_group`)."""
    headline = COST_METRICS[0]
    counted: dict[tuple[str, str], list[ReplayRecord]] = {}
    for r in replays:
        if r.get("status") != "ok":
            continue
        for step, figures in r["steps"].items():
            value = value_of(figures["per_op"], headline)
            if value is not None and value > 0 and math.isfinite(value):
                counted.setdefault((r["column"], step), []).append(r)
    seen = groups_seen(replays)
    mine = method.count_key(record.get("method_identity"))
    out: dict[Key, Used] = {}
    for comp in record["comparisons"]:
        base, *others = comp["labels"]
        for label in others:
            for step in sorted({s for (c, s) in counted if c in (base, label)}):
                x, y = seen.get((base, step), []), seen.get((label, step), [])
                kept = choose_group((x, y), mine) if len(set(x + y)) > 1 else None
                out[(comp["name"], label, step)] = (
                    tuple(r for r in counted.get((base, step), []) if _in(r, step, kept)),
                    tuple(r for r in counted.get((label, step), []) if _in(r, step, kept)),
                )
    return out


def _in(replay: ReplayRecord, step: str, kept: tuple[str | None, str | None] | None) -> bool:
    return kept is None or group_of(replay, step) == kept


@dataclass(frozen=True)
class StoreReport:
    """A run's use of the count store, as its replays and cost/lane.json record it."""

    store: StoreUse | None  # lane.json's `store`; None: it records none
    used: dict[Key, Used]  # per verdict, the replays it pooled
    labels: dict[str, list[str]]  # comparison -> its columns, the base first

    def sides(self, key: Key) -> tuple[Side, Side] | None:
        """The (base, column) replays one verdict used; None: no verdict of the key."""
        found = self.used.get(key)
        return None if found is None else (Side.of(found[0]), Side.of(found[1]))

    def column(self, comparison: str, label: str) -> dict[str, list[ReplayRecord]]:
        """Per step, the replays of a column that its comparison's verdicts used (the
        base's: those any of them used)."""
        base = self.labels[comparison][0]
        by_step: dict[str, list[ReplayRecord]] = {}
        for (comp, other, step), (x, y) in self.used.items():
            if comp == comparison and label in (other, base):
                by_step.setdefault(step, []).extend(y if other == label else x)
        return by_step

    def lines(self, comparison: str) -> list[str]:
        """The comparison's use of the store in words: a sentence, then one item a line
        (each column's replays taken, the recount, the windows adopted, what was not
        taken and why)."""
        labels = self.labels.get(comparison, [])
        columns = {lb: self.column(comparison, lb) for lb in labels}
        wholes = [
            Side.of(r for found in steps.values() for r in found) for steps in columns.values()
        ]
        used, reused = sum(s.used for s in wholes), sum(s.reused for s in wholes)
        items = []
        if reused:
            items += [f"{lb}: {_column_text(steps)}" for lb, steps in columns.items() if steps]
        items += _store_items(self.store, comparison, labels)
        head = (
            f"Counted before: {reused} of {used} counting replays the cost verdicts used were "
            f"taken from the count store, counted in earlier runs ({DOC})"
            if reused
            else f"Counted before: {EVERY}, none was taken from the count store ({DOC})"
        )
        return [head + (":" if items else "."), *items]

    def to_json(self) -> StoreUse | None:
        """cost_lane.count_store of verdicts.json: the lane's use of the store, as
        lane.json records it (None: it records none, an interrupted lane)."""
        store = self.store
        if store is None:
            return None
        out: StoreUse = {
            "path": str(store.get("path", "")),
            "recount": bool(store.get("recount")),
            "adopted": dict(store.get("adopted") or {}),
            "refused": dict(store.get("refused") or {}),
        }
        if "fresh" in store and "taken" in store:  # lanes recorded before lack them
            out["fresh"], out["taken"] = dict(store["fresh"]), dict(store["taken"])
        if "recount_every" in store:
            out["recount_every"] = store["recount_every"]
        return out

    def step_json(self, key: Key) -> tuple[ReusedCounts, ReusedRuns, ReusedCounts] | None:
        """A verdict's `reused`, `reused_from` and `fresh` in verdicts.json."""
        sides = self.sides(key)
        if sides is None:
            return None
        base, column = sides
        return (
            {"base": base.reused, "column": column.reused},
            {"base": list(base.runs), "column": list(column.runs)},
            {"base": base.fresh, "column": column.fresh},
        )

    def fresh_text(self, key: Key) -> str:
        """The report's replays column's note where a verdict pooled replays taken from
        the store: how many of each side's this run counted (` (fresh 0/3)`: none of
        the base's, all three of the column's); "" where it counted every one."""
        sides = self.sides(key)
        if sides is None or not (sides[0].reused or sides[1].reused):
            return ""
        return f" (fresh {sides[0].fresh}/{sides[1].fresh})"

    def csv_cells(self, key: Key | None) -> list[str]:
        """A CSV row's cost_reused_base, cost_reused_column and cost_reused_from."""
        sides = self.sides(key) if key is not None else None
        if sides is None:
            return ["", "", ""]
        base, column = sides
        runs = sorted(set(base.runs) | set(column.runs))
        return [str(base.reused), str(column.reused), "; ".join(runs)]


def _store_items(store: StoreUse | None, comparison: str, labels: list[str]) -> list[str]:
    """What cost/lane.json `store` says of a comparison: the recount, the windows it
    adopted, and why stored replays of it or its columns were not taken."""
    if store is None:
        return []
    items = [RECOUNT] if store.get("recount") else []
    adopted = (store.get("adopted") or {}).get(comparison)
    if adopted:
        items.append(f"windows adopted: where {adopted} stored replay(s) counted each step")
    refused = store.get("refused") or {}
    return items + [f"not taken ({k}): {refused[k]}" for k in (comparison, *labels) if k in refused]


def _column_text(by_step: dict[str, list[ReplayRecord]]) -> str:
    """A column's replays taken: `r of n` when every step's are alike, else per step;
    then the runs they were counted in."""
    steps = {step: Side.of(found) for step, found in by_step.items()}
    if not any(s.reused for s in steps.values()):
        return EVERY
    texts = {s.text() for s in steps.values()}
    said = (
        next(iter(texts))
        if len(texts) == 1
        else ", ".join(f"{step} {s.text()}" for step, s in steps.items())
    )
    runs = sorted({run for s in steps.values() for run in s.runs})
    return f"{said} from {', '.join(runs)}"


def summarize(
    record: RunJson,
    v: RunVerdicts,
    lane: CostLaneRecord | None,
    replays: Sequence[ReplayRecord] | None,
) -> StoreReport | None:
    """The run's use of the count store; None when there is nothing to say: no cost
    lane, no replays given, or neither a replay taken from the store nor `store` in
    lane.json (a run folder written before the store existed)."""
    if v.cost is None or replays is None:
        return None
    store = (lane or {}).get("store")
    if store is None and not any("reused" in r for r in replays):
        return None
    kept = _kept(record, replays)
    used = {k: kept[k] for k in v.cost.headline() if k in kept}  # in the verdicts' order
    labels = {comp["name"]: list(comp["labels"]) for comp in record["comparisons"]}
    return StoreReport(store, used, labels)
