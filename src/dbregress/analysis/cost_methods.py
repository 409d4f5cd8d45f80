"""One method per figure: which counting replays a cost verdict may pool, and the count
metrics they carry. A replay's count of a step was made by a counting method
(method.count_key of its identity) and in a scope (engine-calls, sessions, engine);
replays of two methods or scopes are never pooled: a verdict keeps the replays of one
group (`choose_group`, `pooled_methods`) and says how many it left out. Apart from
analysis/cost.py (the verdicts' statistics) because the reports, the history and the
count store ask the same questions of replays without judging them."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from dbregress.analysis import state
from dbregress.method import identity as method
from dbregress.shapes.replay import ReplayRecord
from dbregress.shapes.run import RunJson

Key = tuple[str, str, str]  # (comparison, column, step)

# What a replay of a step was counted by: (method.count_key of its identity, its scope).
Group = tuple[str | None, str | None]
# The scopes a count can have, the most specific first (explain/jobs.py): the engine's
# calls only, the sessions' processes or threads, the whole engine.
SCOPES = ("engine-calls", "sessions", "engine")


@dataclass(frozen=True)
class CostMetric:
    key: str
    label: str  # short, for tables
    unit: str
    parts: tuple[str, ...]  # explain's per-op figures summed into this one


# The lane's metrics, the headline first. All per operation of the step's Q unit.
COST_METRICS: tuple[CostMetric, ...] = (
    CostMetric("estimated_cycles", "est. cycles/op", "cycles/op", ("estimated_cycles",)),
    CostMetric("instructions", "instr/op", "instr/op", ("instructions",)),
    CostMetric(
        "l1_misses",
        "L1 miss/op",
        "misses/op",
        ("i1_misses", "d1_read_misses", "d1_write_misses"),
    ),
    CostMetric("ll_misses", "LL miss/op", "misses/op", ("ll_read_misses", "ll_write_misses")),
    CostMetric(
        "branch_mispredictions", "mispred/op", "mispredictions/op", ("branch_mispredictions",)
    ),
    CostMetric("system_calls", "syscalls/op", "syscalls/op", ("system_calls",)),
)
HEADLINE = COST_METRICS[0].key


def value_of(per_op: Mapping[str, float], metric: CostMetric) -> float | None:
    if not all(p in per_op for p in metric.parts):
        return None
    return float(sum(per_op[p] for p in metric.parts))


def group_of(replay: ReplayRecord, step: str) -> Group:
    """What a replay's count of a step was made by: its method's count key and its
    scope (None where the replay recorded none)."""
    figures = replay["steps"].get(step)
    scope = figures.get("scope") if figures else None
    return method.count_key(replay.get("method_identity")), scope if scope else None


def counts_by_group(
    replays: Iterable[ReplayRecord], metric: CostMetric
) -> dict[tuple[str, str], list[tuple[float, Group]]]:
    """(column, step) -> the metric per operation of each ok replay with what counted
    it, in replay order."""
    cells: dict[tuple[str, str], list[tuple[float, Group]]] = {}
    for r in replays:
        if r.get("status") != "ok":
            continue
        for step, figures in r["steps"].items():
            v = value_of(figures["per_op"], metric)
            if v is not None and v > 0 and math.isfinite(v):
                cells.setdefault((r["column"], step), []).append((v, group_of(r, step)))
    return cells


def cells(
    replays: Iterable[ReplayRecord], metric: CostMetric
) -> dict[tuple[str, str], list[float]]:
    """(column, step) -> the metric per operation of each ok replay, in replay order."""
    return {k: [v for v, _ in vs] for k, vs in counts_by_group(replays, metric).items()}


def describe(group: Group) -> str:
    how, scope = group
    return f"method {how or 'not recorded'}, scope {scope or 'not recorded'}"


def choose_group(sides: Sequence[Sequence[Group]], mine: str | None) -> Group:
    """The one (method, scope) kept of the groups that counted a step on each side (a
    verdict's base and column, or every column of a series): the group with replays on
    the most sides, then the run's own counting method `mine`, then the most replays,
    then the most specific scope (SCOPES)."""
    counts = Counter(g for side in sides for g in side)
    return max(
        counts,
        key=lambda g: (
            sum(g in side for side in sides),
            g[0] == mine,
            counts[g],
            -SCOPES.index(g[1]) if g[1] in SCOPES else -len(SCOPES),
        ),
    )


def groups_seen(replays: Iterable[ReplayRecord]) -> dict[tuple[str, str], list[Group]]:
    """(column, step) -> what counted each ok replay of the step, in replay order."""
    seen: dict[tuple[str, str], list[Group]] = {}
    for r in replays:
        if r.get("status") == "ok":
            for step in r["steps"]:
                seen.setdefault((r["column"], step), []).append(group_of(r, step))
    return seen


def pooled_methods(record: RunJson, replays: list[ReplayRecord]) -> dict[Key, tuple[Group, str]]:
    """Per key, the one (method, scope) whose replays it pools (`choose_group`), and a
    note of the replays left out, where its base's and column's ok replays of the step
    were not all counted alike; the rest are left out, never pooled with it."""
    mine = method.count_key(record.get("method_identity"))
    seen = groups_seen(replays)
    out: dict[Key, tuple[Group, str]] = {}
    for comp in record["comparisons"]:
        base, *others = comp["labels"]
        for label in others:
            for step in {s for (c, s) in seen if c in (base, label)}:
                x, y = seen.get((base, step), []), seen.get((label, step), [])
                counts = Counter(x + y)
                if len(counts) < 2:
                    continue
                kept = choose_group((x, y), mine)
                gone = sum(n for g, n in counts.items() if g != kept)
                others_seen = "; ".join(describe(g) for g in counts if g != kept)
                out[(comp["name"], label, step)] = (
                    kept,
                    f"{gone} replay(s) left out, counted another way ({others_seen}) than "
                    f"those kept ({describe(kept)}): replays of two methods or scopes are "
                    "never pooled",
                )
    return out


def keeps(methods: Mapping[Key, tuple[Group, str]]) -> state.Keep:
    """Whether a replay's count of a key's step is one the key's verdict pools: of the
    group `pooled_methods` keeps, where it names one (analysis/state.py `sides`)."""

    def keep(key: Key, replay: ReplayRecord) -> bool:
        return key not in methods or group_of(replay, key[2]) == methods[key][0]

    return keep
