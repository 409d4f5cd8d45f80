"""A counted window's per-operation figures from its callgrind profile: the events
explain reports (FIGURES), the estimated cycles, the function and object tables and an
embedded engine's entry points. Pure arithmetic over profiles, apart from counting.py's
replay; the cost lane reads its cycle model (CYCLES_LL, CYCLES_RAM) too.
"""

from __future__ import annotations

from dbregress.explain import callgrind
from dbregress.explain.jobs import Choice
from dbregress.shapes.events import Summary
from dbregress.shapes.explain import CountFigures, EntryFigures, FunctionFigures, WindowEvent

# What explain reports per operation, from callgrind's events.
FIGURES: dict[str, tuple[str, ...]] = {
    "instructions": ("Ir",),
    "d1_read_misses": ("D1mr",),
    "d1_write_misses": ("D1mw",),
    "ll_read_misses": ("ILmr", "DLmr"),
    "ll_write_misses": ("DLmw",),
    "i1_misses": ("I1mr",),
    "branches": ("Bc", "Bi"),
    "branch_mispredictions": ("Bcm", "Bim"),
}
# The figures of each function in the table (shapes/explain.py FunctionFigures).
FUNCTION_FIGURES = ("instructions", "d1_read_misses", "ll_read_misses", "branch_mispredictions")
FUNCTIONS_KEPT = 300


# Estimated cycles, from the simulated caches' events by the model gungraun (formerly
# iai-callgrind) uses, after Itamar Turner-Trauring's "Beyond instruction counts"
# (pythonspeed.com, 2021): an access that misses the last level goes to RAM, one that
# misses L1 only hits the last level, every other instruction fetch and data access hits
# L1; cycles = L1 hits + 5 x LL hits + 35 x RAM accesses. A model, not a measurement:
# it weighs memory-system bloat beside code bloat with fixed costs, the same on any host.
CYCLES_LL, CYCLES_RAM = 5, 35


def estimated_cycles(events: tuple[str, ...], costs: list[int]) -> float:
    def e(name: str) -> int:
        return costs[events.index(name)]

    ram = e("ILmr") + e("DLmr") + e("DLmw")
    ll_hits = e("I1mr") + e("D1mr") + e("D1mw") - ram
    l1_hits = e("Ir") + e("Dr") + e("Dw") - ll_hits - ram
    return float(l1_hits + CYCLES_LL * ll_hits + CYCLES_RAM * ram)


def per_op(events: tuple[str, ...], costs: list[int], divisor: float) -> dict[str, float]:
    out = {
        name: sum(costs[events.index(e)] for e in parts) / divisor
        for name, parts in FIGURES.items()
    }
    out["estimated_cycles"] = estimated_cycles(events, costs) / divisor
    if "sysCount" in events:  # --collect-systime: system calls made by the counted code
        out["system_calls"] = costs[events.index("sysCount")] / divisor
    return out


ENTRIES_KEPT = 20  # the engine's entry points (its C API functions) kept per step


def figures(
    profile: callgrind.Profile,
    close: WindowEvent,
    summary: Summary,
    choice: Choice,
    files: int,
    functions: bool = True,
    engine: callgrind.EngineCalls | None = None,
) -> CountFigures:
    """Per-operation figures of one window: per op of the step's Q unit (rows for the
    load steps, calls otherwise), as the run's per-op metrics are.

    With `engine` (an embedded engine), `per_op`, `objects` and `functions` are the
    engine's calls' (callgrind.EngineCalls): every event of the calls into its library,
    inclusive; `client_per_op` is the whole of the profile's threads (the loadgen's
    loop and the engine's calls together, as counted before), `entries` the engine's
    functions the loadgen called, `reentered_per_op` the cost of calls from the engine
    back into the loadgen and `nested_per_op` that of the loadgen's engine calls made
    inside them, left out (both 0 unless the loadgen registers callbacks)."""
    unit = summary.get("q_unit", "ops")
    divisor = float(close["rows"] if unit == "rows" else close["ops"])
    if divisor <= 0:
        raise callgrind.CallgrindError(
            f"{choice.plan.name}: the window counted no {unit}; nothing to divide by"
        )
    events = profile.events
    merged, objects = _by_function(profile, engine, divisor)
    kept = FUNCTIONS_KEPT if functions else 0
    top = sorted(merged.items(), key=lambda kv: -kv[1][0])[:kept]
    totals = profile.totals if engine is None else engine.total
    out: CountFigures = {
        "index": choice.index,
        "unit": unit,
        "ops": close["ops"],
        "rows": close["rows"],
        "divisor": divisor,
        "skip_ops": choice.skip_ops,
        "q_per_s": choice.q_per_s,
        "files": files,
        "caches": profile.caches,
        "per_op": per_op(events, totals, divisor),
        "objects": dict(sorted(objects.items(), key=lambda kv: -kv[1])),
        "functions": [
            _function_figures(fn, ob, per_op(events, cost, divisor)) for (ob, fn), cost in top
        ],
    }
    if engine is not None:
        out["client_per_op"] = per_op(events, profile.totals, divisor)
        out["reentered_per_op"] = per_op(events, engine.reentered, divisor)
        out["nested_per_op"] = per_op(events, engine.nested, divisor)
        out["entries"] = _entries(engine, divisor)
    return out


def _by_function(
    profile: callgrind.Profile, engine: callgrind.EngineCalls | None, divisor: float
) -> tuple[dict[tuple[str, str], list[int]], dict[str, float]]:
    """The window's costs by (object, function), by name without parameters and
    object file: overloads (and C++ signatures that change between versions) count as
    one function; and its instructions per operation by object file. With `engine`, the
    engine's calls'."""
    merged: dict[tuple[str, str], list[int]] = {}
    objects: dict[str, float] = {}
    table = profile.functions if engine is None else engine.functions
    for (ob, fn), cost in table.items():
        key = (callgrind.object_name(ob), callgrind.short_name(fn))
        callgrind.add_cost(merged, key, cost)
    by_object = (
        [(ob, c) for (ob, _), c in table.items()] if engine is None else engine.objects.items()
    )
    for ob, cost in by_object:
        name = callgrind.object_name(ob)
        objects[name] = objects.get(name, 0.0) + cost[0] / divisor
    return merged, objects


def _function_figures(function: str, obj: str, figures: dict[str, float]) -> FunctionFigures:
    """A function's row of the table: FUNCTION_FIGURES of its per-operation figures."""
    return {
        "function": function,
        "object": obj,
        "instructions": figures["instructions"],
        "d1_read_misses": figures["d1_read_misses"],
        "ll_read_misses": figures["ll_read_misses"],
        "branch_mispredictions": figures["branch_mispredictions"],
    }


def _entries(engine: callgrind.EngineCalls, divisor: float) -> list[EntryFigures]:
    """The embedded engine's entry points the loadgen called most, per operation."""
    entries = sorted(engine.entries.items(), key=lambda kv: -kv[1][0])[:ENTRIES_KEPT]
    return [
        {
            "function": callgrind.short_name(fn),
            "calls_per_op": engine.entry_calls.get(fn, 0) / divisor,
            "instructions": cost[0] / divisor,
        }
        for fn, cost in entries
    ]


def per_op_of(profile: callgrind.Profile, window: CountFigures) -> dict[str, float]:
    """Another profile of the same window (the background processes or threads, each
    counted whole) per operation."""
    return per_op(profile.events, profile.totals, window["divisor"])
