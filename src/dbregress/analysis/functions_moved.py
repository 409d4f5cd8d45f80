"""Where a change moved: the functions whose counted instructions per operation changed
most between two columns' replays of a step, from the same replays the cost verdict
pools (each replay keeps its costliest functions: cost/replay.py). A 0.3% step change
that is a 12% change of one function says where to look, as Meta's FBDetect finds
regressions far below a service's noise by looking at subroutines (docs/ledger.md).

A function is compared where both sides' replays kept it (the costliest 300 of each
window); one kept by one side only is named as appearing (or gone) among the costliest,
its other side's figure unknown but below that side's 300th.
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Iterable
from dataclasses import dataclass

from dbregress.shapes.replay import ReplayRecord


@dataclass(frozen=True)
class FunctionMove:
    function: str  # "name (object file)"
    base: float | None  # instructions per operation (None: not among its costliest)
    value: float | None
    share: float | None  # of the step's own change in instructions per operation

    @property
    def delta(self) -> float:
        return (self.value or 0.0) - (self.base or 0.0)

    @property
    def ratio(self) -> float | None:
        if self.base is None or self.value is None or self.base <= 0:
            return None
        return self.value / self.base

    def words(self) -> str:
        if self.base is None:
            return f"{self.function} new among the costliest, {self.value:,.0f} instr/op"
        if self.value is None:
            return f"{self.function} left the costliest (was {self.base:,.0f} instr/op)"
        ratio = self.ratio
        rel = f" ({100 * (ratio - 1):+.1f}%)" if ratio is not None else ""
        return f"{self.function} {self.delta:+,.0f} instr/op{rel}"


# An object file's version suffix (librocksdb.so.7.10.2) and MariaDB's server name: the
# same function in two versions is one function.
_SONAME = re.compile(r"(\.so)(\.[0-9]+)+(?=\)$)")
_ALIASES = {"(mariadbd)": "(mysqld)"}


def same_function(name: str) -> str:
    """A function's key as kept, without what differs between versions of one build."""
    name = _SONAME.sub(r"\1", name)
    for a, b in _ALIASES.items():
        if name.endswith(a):
            name = name[: -len(a)] + b
    return name


def _mean_functions(replays: Iterable[ReplayRecord], column: str, step: str) -> dict[str, float]:
    tables = [
        {same_function(k): v for k, v in (r["steps"][step].get("functions") or {}).items()}
        for r in replays
        if r.get("status") == "ok" and r.get("column") == column and step in r.get("steps", {})
    ]
    kept = [t for t in tables if t]
    if not kept:
        return {}
    names = set().union(*kept)
    # a function absent from one replay's 300 is not averaged as 0: it is left out there
    return {n: statistics.fmean(t[n] for t in kept if n in t) for n in names}


def _instructions(replays: Iterable[ReplayRecord], column: str, step: str) -> float | None:
    values = [
        r["steps"][step]["per_op"].get("instructions")
        for r in replays
        if r.get("status") == "ok" and r.get("column") == column and step in r.get("steps", {})
    ]
    found = [v for v in values if v is not None]
    return statistics.fmean(found) if found else None


def functions_moved(
    replays: list[ReplayRecord], base: str, column: str, step: str, top: int = 3
) -> list[FunctionMove]:
    """The `top` functions whose instructions per operation moved most (absolute) from
    `base` to `column` in `step`; [] where the replays kept no functions."""
    x, y = _mean_functions(replays, base, step), _mean_functions(replays, column, step)
    if not x or not y:
        return []
    bx, by = _instructions(replays, base, step), _instructions(replays, column, step)
    total = (by - bx) if bx is not None and by is not None else None
    moves = []
    for name in set(x) | set(y):
        m = FunctionMove(name, x.get(name), y.get(name), None)
        share = m.delta / total if total else None
        moves.append(FunctionMove(name, m.base, m.value, share))
    # functions both sides kept first (their change is measured), then those one side
    # kept only (their change is bounded by the other side's cut, not measured)
    moves.sort(key=lambda m: (m.base is None or m.value is None, -abs(m.delta)))
    return moves[:top]
