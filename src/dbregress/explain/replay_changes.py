"""What a run's counting replays changed, as cost/lane.json records it (`replay_changes`)
and every report format discloses (docs/verdicts.md, "What the counting replays
change"): per column, the engine settings the replays set over its own (count_settings)
and what they hold off the windows (the MySQL family's purge); per counted step, the
adjustments of its spec (prepare.count_spec: lockstep, a settled engine; paced writers
on the query thread) and each column's window as the replays were told it (its calls,
where it opens, and the block-cache hit rate at which it may open earlier).

It is read from the same code that prepares the replays (count_settings, count_spec,
the lane's chosen windows) and from the columns as the replays ran them (the cost lane's
replay_column: a test hook's settings over the column's own), so what the reports say
is what the replays did.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import cast

from dbregress import benchmarks
from dbregress.engines.registry import engine_class
from dbregress.execution import prepare
from dbregress.explain.explainer import Sizing
from dbregress.explain.jobs import Choice
from dbregress.explain.threads import client_binary
from dbregress.lab.file import Column, Comparison, Lab
from dbregress.method import identity as method
from dbregress.provision import Build
from dbregress.shapes.replay import ComparisonChanges, ReplayChanges, ReplayWindow, StepChanges
from dbregress.shapes.spec import EngineSpec, StepSpec

LOCKSTEP = "lockstep"
SETTLED = "settled"
PACED = "paced_on_query_thread"
# A step's own fields that pace a background writer (insert's q-steps, kv's *whilewriting)
PACED_FIELDS = ("insert_rate", "writer_mb_per_s")
HELD = "purge held off each window by a read view of the build's own client"
NOT_HELD = "purge not held off the windows: the build has no command-line client"
HELD_WHERE = "purge held off each window where the build has a command-line client"


def setting_changes(
    column: Column, ran: Column | None = None, build: Build | None = None
) -> dict[str, str]:
    """The engine settings a column's counting replays set that its own do not: its
    engine's counting settings for the build's version (what `build` says of itself,
    else the version the lab names) under the settings the replays ran it with (`ran`,
    the column as the replays ran it; explain/jobs.py count_settings), each where it
    differs from the column's own."""
    ran = column if ran is None else ran
    version = build.version_string if build is not None else ran.build.version
    quiet = engine_class(ran.build.engine).counting_settings(version)
    counted = {**quiet, **dict(ran.settings)}
    return {k: v for k, v in counted.items() if column.settings.get(k) != v}


def held(column: Column, build: Build | None) -> str | None:
    """What the column's replays hold off their windows (the MySQL family's purge, held
    by a read view where the build has a client: counting._read_view_hold)."""
    if column.build.engine not in ("mariadb", "mysql"):
        return None
    if build is None:  # a fleet's workers fetch the builds: not seen here
        return HELD_WHERE
    return HELD if client_binary(build.basedir) is not None else NOT_HELD


def adjustments(spec: StepSpec) -> list[str]:
    """The step's adjustments for counting (prepare.count_spec) and its paced writers."""
    counted = prepare.count_spec(spec)
    workload = counted["workload"]
    out = []
    if workload.get("lockstep"):
        out.append(LOCKSTEP)
    if counted.get("settle_first"):
        out.append(SETTLED)
    if any(workload.get(f) for f in PACED_FIELDS):
        out.append(PACED)
    return out


def _window(choice: Choice, clients: int) -> ReplayWindow:
    told = choice.window().to_spec(clients)
    until = told.get("until_hit_rate")
    return {
        "skip_ops": told["skip_ops"],
        "ops": told["ops"],
        "warm_ops": told.get("warm_ops", 0),
        "q_per_s": told["q_per_s"],
        "until_hit_rate": float(until) if until is not None else None,
    }


def _as_is(column: Column) -> Column:
    return column


def comparison_changes(
    comparison: Comparison,
    choices: dict[str, dict[str, Choice]],
    builds: dict[str, Build],
    replayed: Callable[[Column], Column] = _as_is,
) -> ComparisonChanges:
    """One comparison's changes: `choices` are the lane's windows (column label -> step
    -> Choice), `builds` the columns' builds, `replayed` a column as the replays ran it
    (the cost lane's replay_column)."""
    plans = {p.name: p for p in benchmarks.plans(comparison)}
    steps: dict[str, StepChanges] = {}
    for column in comparison.columns:
        for name, choice in (choices.get(column.label) or {}).items():
            if not choice.counted or name not in plans:
                continue
            # the connection is not read: only the workload and the clients are
            spec = benchmarks.step_spec(comparison, cast(EngineSpec, {}), plans[name], 0)
            entry = steps.setdefault(name, {"adjustments": adjustments(spec), "windows": {}})
            entry["windows"][column.label] = _window(choice, int(spec.get("clients", 1)))
    holds = {c.label: h for c in comparison.columns if (h := held(c, builds.get(c.label)))}
    return {
        "settings": {
            c.label: setting_changes(c, replayed(c), builds.get(c.label))
            for c in comparison.columns
        },
        "held": holds,
        "steps": steps,
    }


def replay_changes(
    lab: Lab,
    sizing: Sizing,
    choices: dict[str, dict[str, Choice]],
    builds: dict[str, Build],
    replayed: Callable[[Column], Column] = _as_is,
) -> ReplayChanges:
    """cost/lane.json's `replay_changes` of a lane that counted `choices` with `sizing`,
    its replays running each column as `replayed` gives it (the cost lane's
    replay_column, with a test hook's settings: disclosed with the rest)."""
    return {
        "profile": method.COUNTING_PROFILE,
        "sizing": {k: v for k, v in dataclasses.asdict(sizing).items()},
        "comparisons": {
            comp.name: comparison_changes(comp, choices, builds, replayed)
            for comp in lab.comparisons
        },
    }
