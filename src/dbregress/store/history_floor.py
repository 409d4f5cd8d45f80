"""The cost verdict's history floor: a step's spread over the earlier counts of the
same thing, from the run history (store/history.py History.cost_floors).

The floor comes from counts independent of the ones the verdict pools: a replay taken
from the count store is pooled once, where it was counted (`counted_in`), and the
replays the run itself took from the store (`taken`: their run, column and number
where they were counted) are left out of its floor, so that no stored replay counts
twice, as a verdict's sample and as its floor.

"The same thing" is what a count depends on (docs/history.md): the counting method
(method.count_key: loadgen binary, valgrind, libc, simulated caches, cost model,
counting profile, the CPU features valgrind presents; not the dbregress version), the
scope of the count, the build (method.build_key) and the step as counted
(method.step_key). The lab and the dbregress version are not part of it: a floor
survives a commit of dbregress, and a bisection's builds find the spread their own
earlier counts had, whichever lab counted them.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from dbregress.analysis.cost_floors import Floors
from dbregress.analysis.cost_stats import pooled_log_sd
from dbregress.store.history_db import COST_COLUMNS

# The earlier runs a floor is pooled over: the latest this many with counts of the step.
LAST_RUNS = 10


# A replay where it was counted: (run, column, replay number).
Counted = tuple[str, str, int]


@dataclass(frozen=True)
class FloorCell:
    """A step of a run whose floor is wanted: its name in the run, and what its counts
    depend on (None: not recorded, no floor)."""

    comparison: str
    step: str
    build_key: str | None
    count_key: str | None
    scope: str | None
    spec_key: str | None

    @property
    def name(self) -> str:
        """Its key in Floors.noise (analysis/cost_floors.py): per build."""
        return f"{self.comparison}/{self.step}@{self.build_key}"


def cost_floors(
    db: sqlite3.Connection,
    cells: Iterable[FloorCell],
    but: str,
    last: int = LAST_RUNS,
    taken: frozenset[Counted] = frozenset(),
) -> Floors:
    """Per metric and cell, the pooled within-(run, column) standard deviation of log
    counts over the latest `last` runs other than `but` that counted the cell's build
    and step by its method and scope, but for the replays `but` took (`taken`); with
    the runs that gave each, and a note when no cell found any."""
    noise: dict[str, dict[str, float]] = {}
    runs: dict[str, tuple[str, ...]] = {}
    wanted = list(dict.fromkeys(cells))
    unkeyed = [c for c in wanted if None in (c.build_key, c.count_key, c.spec_key)]
    for cell in wanted:
        if cell in unkeyed:
            continue
        rows = [r for r in _samples(db, cell, but) if (r[0], r[1], r[2]) not in taken]
        chosen = list(dict.fromkeys(r[0] for r in rows))[:last]
        groups: dict[str, dict[tuple[str, str], list[float]]] = {}
        for run_id, column, _replay, *values in rows:
            if run_id not in chosen:
                continue
            for (_, key), v in zip(COST_COLUMNS, values, strict=True):
                if v is not None and v > 0:
                    groups.setdefault(key, {}).setdefault((run_id, column), []).append(float(v))
        for key, by_group in groups.items():
            sd = pooled_log_sd(by_group.values())
            if sd is not None:
                best = noise.setdefault(key, {})
                if sd > best.get(cell.name, 0.0):  # two methods of one step: the wider
                    best[cell.name] = sd
                    used = sorted({run for (run, _col), vs in by_group.items() if len(vs) > 1})
                    runs[cell.name] = tuple(used)
    note = ""
    if not noise:
        note = (
            "none: no earlier run in the history counted these builds' steps by this "
            "counting method"
        )
        if wanted and len(unkeyed) == len(wanted):
            note = (
                "none: this run's replays do not record the step as counted or the "
                "counting method (counted before dbregress recorded them)"
            )
            if all(c.build_key is None for c in unkeyed):
                note = (
                    "none: this run's builds have no identity that pins their code (a "
                    "build found on the machine recorded before dbregress digested its "
                    "server binary, or none recorded)"
                )
    return Floors(noise, runs, note)


def _samples(db: sqlite3.Connection, cell: FloorCell, but: str) -> list[tuple[Any, ...]]:
    """The cost samples of a cell's build and step by its method and scope, of runs
    other than `but`, the latest run first: (run, column, replay, *COST_COLUMNS)."""
    names = ", ".join(c for c, _ in COST_COLUMNS)
    rows: list[tuple[Any, ...]] = db.execute(
        f"SELECT s.run_id, s.column, s.replay, {names} FROM cost_samples s "
        "JOIN runs r ON r.run_id = s.run_id "
        "WHERE s.spec_key = ? AND s.build_key = ? AND s.count_key = ? AND s.scope IS ? "
        # a replay taken from the count store is pooled once, where it was counted
        "AND s.run_id != ? AND s.counted_in IS NULL "
        "ORDER BY r.started IS NULL, r.started DESC, s.run_id DESC",
        (cell.spec_key, cell.build_key, cell.count_key, cell.scope, but),
    ).fetchall()
    return rows
