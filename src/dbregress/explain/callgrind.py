"""Reading callgrind's output files (the format of valgrind's callgrind_annotate).

A file holds the costs of one process (or thread) between two dumps: a header
(`events:`, the simulated caches in `desc:` lines, `summary:`), then cost lines per
function, each function under the object (`ob=`) and source file (`fl=`) it came from.
A cost line right after `calls=` is the inclusive cost of that call (every event of the
callee and of all it called, over the calls made from that line), not the function's
own: it is kept apart, per call arc (caller object and function, callee object and
function), so what is summed per function is its self cost and the sum over functions is
the file's total. The callee's object is the `cob=` given just before the `calls=` line,
or, without one, the caller's own object (callgrind writes `cob=` only when they
differ). Names may be compressed: `(12) name` defines id 12, `(12)` reuses it.

`engine_calls` reads the arcs: the inclusive cost of the calls a client makes into an
engine's library, which is how an embedded engine's work is told from its client's.
"""

from __future__ import annotations

import gzip
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from dbregress.model.errors import DbregressError

# The events callgrind reports with --cache-sim=yes --branch-sim=yes, in its order.
EVENTS = (
    *("Ir", "Dr", "Dw", "I1mr", "D1mr", "D1mw", "ILmr", "DLmr", "DLmw"),
    *("Bc", "Bcm", "Bi", "Bim"),
)
K = TypeVar("K")
_COMPRESSED = re.compile(r"^\((\d+)\)(?:\s(.*))?$")


class CallgrindError(DbregressError):
    """A window's callgrind output is missing or says nothing."""


# A call arc: (caller object, caller function, callee object, callee function).
Arc = tuple[str, str, str, str]


@dataclass
class Profile:
    """Costs summed over one or more callgrind files: per event, per function (object,
    name) self cost, and per call arc the calls made and their inclusive cost."""

    events: tuple[str, ...] = EVENTS
    totals: list[int] = field(default_factory=lambda: [0] * len(EVENTS))
    functions: dict[tuple[str, str], list[int]] = field(default_factory=dict)
    caches: dict[str, str] = field(default_factory=dict)  # "I1" -> "32768 B, 64 B, 8-way"
    triggers: list[str] = field(default_factory=list)  # why each file was written
    files: int = 0
    calls: dict[Arc, list[int]] = field(default_factory=dict)  # inclusive cost per arc
    call_counts: dict[Arc, int] = field(default_factory=dict)

    def total(self, event: str) -> int:
        return self.totals[self.events.index(event)]

    def add(self, other: Profile) -> None:
        if other.events != self.events:
            raise ValueError(f"callgrind events differ: {other.events} vs {self.events}")
        self.totals = [a + b for a, b in zip(self.totals, other.totals, strict=True)]
        for key, cost in other.functions.items():
            add_cost(self.functions, key, cost)
        for arc, cost in other.calls.items():
            add_cost(self.calls, arc, cost)
            self.call_counts[arc] = self.call_counts.get(arc, 0) + other.call_counts.get(arc, 0)
        self.caches = self.caches or other.caches
        self.triggers += other.triggers
        self.files += other.files


def add_cost(table: dict[K, list[int]], key: K, cost: list[int]) -> None:
    """Add a function's cost vector into `table` under `key`."""
    mine = table.setdefault(key, [0] * len(cost))
    for i, v in enumerate(cost):
        mine[i] += v


def _add(into: list[int], cost: list[int]) -> None:
    for i, v in enumerate(cost):
        into[i] += v


def _name(value: str, table: dict[str, str]) -> str:
    """A possibly compressed name: `(id) name` defines, `(id)` refers."""
    m = _COMPRESSED.match(value.strip())
    if not m:
        return value.strip()
    ident, name = m.group(1), m.group(2)
    if name is not None:
        table[ident] = name
        return name
    return table.get(ident, f"({ident})")


def parse(lines: Iterable[str]) -> Profile:
    """One callgrind file's costs."""
    profile = Profile(events=(), totals=[], files=1)
    tables: dict[str, dict[str, str]] = {"ob": {}, "fl": {}, "fn": {}}
    ob = fn = "???"
    cob: str | None = None  # the next call's callee object, when not the caller's
    cfn = "???"
    call: tuple[Arc, int] | None = None  # a `calls=` line waiting for its cost line
    current: list[int] | None = None
    n = 0
    positions = 1  # `positions: line` (the default); `instr line` is two columns
    for raw in lines:
        line = raw.rstrip("\n")
        if not line:
            continue
        head = line[0]
        if head.isdigit() or head in "+-*":
            values = line.split()[positions:]
            if call is not None:  # the inclusive cost of a call
                arc, count = call
                cost = profile.calls.setdefault(arc, [0] * n)
                for i, text in enumerate(values[:n]):
                    cost[i] += int(text)
                profile.call_counts[arc] = profile.call_counts.get(arc, 0) + count
                call, cob = None, None
                continue
            if current is None:
                current = profile.functions.setdefault((ob, fn), [0] * n)
            for i, text in enumerate(values[:n]):
                current[i] += int(text)
            continue
        key, _, value = line.partition("=")
        if key == "ob":
            ob, current, cob = _name(value, tables["ob"]), None, None
        elif key == "cob":
            cob = _name(value, tables["ob"])
        elif key in ("fl", "fi", "fe", "cfi", "cfl"):
            _name(value, tables["fl"])  # registers a compressed file name
        elif key == "fn":
            fn, current, cob = _name(value, tables["fn"]), None, None
        elif key == "cfn":
            cfn = _name(value, tables["fn"])
        elif key == "calls":
            made = value.split()
            call = ((ob, fn, ob if cob is None else cob, cfn), int(made[0]) if made else 0)
        elif line.startswith("positions:"):
            positions = len(line.split(":", 1)[1].split())
        elif line.startswith("events:"):
            profile.events = tuple(line.split(":", 1)[1].split())
            n = len(profile.events)
            profile.totals = [0] * n
        elif line.startswith("desc:"):
            _describe(profile, line.split(":", 1)[1].strip())
    for cost in profile.functions.values():
        for i, v in enumerate(cost):
            profile.totals[i] += v
    return profile


def _describe(profile: Profile, text: str) -> None:
    """A `desc:` line of the header: a simulated cache's geometry, or why the file was
    written."""
    cache = re.match(r"(I1|D1|LL) cache:\s*(.*)", text)
    if cache:
        profile.caches[cache.group(1)] = cache.group(2)
    elif text.startswith("Trigger:"):
        profile.triggers.append(text.split(":", 1)[1].strip())


def trigger(path: Path, header_lines: int = 60) -> str:
    """Why callgrind wrote a file (`desc: Trigger:` in its header): `dump HINT` for a
    dump asked through vgdb, `Program termination` at a process's end; "" if none."""
    try:
        with open(path, errors="replace") as f:
            for _, line in zip(range(header_lines), f, strict=False):
                if line.startswith("desc: Trigger:"):
                    return line.split(":", 2)[2].strip()
    except OSError:
        return ""
    return ""


def read(path: Path) -> Profile:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", errors="replace") as f:
        return parse(f)


def merge(profiles: Iterable[Profile]) -> Profile:
    merged = Profile()
    for p in profiles:
        if not p.events:  # an empty file (a process that never ran instrumented)
            continue
        if not merged.files:
            merged = Profile(events=p.events, totals=[0] * len(p.events))
        merged.add(p)
    return merged


def short_name(function: str) -> str:
    """A function's name without its parameter list (C++ signatures change between
    versions; the name is what to match on)."""
    text = function.removesuffix(" const")
    if not text.endswith(")"):
        return function
    depth = 0
    for i in range(len(text) - 1, -1, -1):
        depth += {")": 1, "(": -1}.get(text[i], 0)
        if depth == 0:
            return text[:i] if i > 0 else function
    return function


def object_name(path: str) -> str:
    return path.rsplit("/", 1)[-1] if path not in ("???", "") else "(unknown)"


@dataclass
class EngineCalls:
    """The work an embedded engine did for its client, from a profile's call arcs.

    `total`: the inclusive cost (every event) of the calls made from the client's object
    into the engine's, i.e. the engine's code and everything it called (libc, libstdc++,
    the system calls it made) on the client's threads. Each piece of work is counted
    once: a call from the engine to itself, or from a library back into the engine (a
    std::sort comparator, a pthread_once initializer), is inside the outer call's
    inclusive cost and not added again, since only arcs whose caller is the client's
    object and whose callee is the engine's count; and a client call into the engine
    made from client code that the engine itself called (a callback, reached through
    any chain of calls from the engine) is nested in an outer call too and is left out
    (`nested`). The client's own loop, timing, bookkeeping and the libc calls it makes
    itself are outside.

    The same cost split by where it ran: `objects` has the engine's own code (its self
    cost on these threads) and, per other object, the inclusive cost of the engine's
    calls into it, summing to `total` (what a callback into the engine adds to both is
    taken off the engine's row); `functions` likewise per function (the engine's by self
    cost, the others by the inclusive cost of the engine's calls to them: with callbacks
    into the engine a callback's cost shows in both). `entries`: the engine's functions the client
    called (the C API's `rocksdb_*`), inclusive cost and calls. `reentered`: the
    inclusive cost of calls from the engine into the client's object (callbacks; zero
    for a client that registers none), inside `total`.
    """

    events: tuple[str, ...]
    total: list[int]
    entries: dict[str, list[int]]
    entry_calls: dict[str, int]
    objects: dict[str, list[int]]
    functions: dict[tuple[str, str], list[int]]
    reentered: list[int]
    nested: list[int]


def _reached(calls: Iterable[Arc], is_engine: Callable[[str], bool]) -> set[tuple[str, str]]:
    """The functions outside the engine that run inside calls the engine makes: the
    callees of its calls out, and whatever they call, outside the engine."""
    out: dict[tuple[str, str], list[tuple[str, str]]] = {}
    todo = []
    for caller_ob, caller_fn, callee_ob, callee_fn in calls:
        if is_engine(callee_ob):
            continue
        if is_engine(caller_ob):
            todo.append((callee_ob, callee_fn))
        else:
            out.setdefault((caller_ob, caller_fn), []).append((callee_ob, callee_fn))
    seen = set(todo)
    while todo:
        for callee in out.get(todo.pop(), []):
            if callee not in seen:
                seen.add(callee)
                todo.append(callee)
    return seen


def engine_calls(
    profile: Profile, is_engine: Callable[[str], bool], is_client: Callable[[str], bool]
) -> EngineCalls:
    """The engine's work for its client in `profile` (see EngineCalls); `is_engine` and
    `is_client` tell an object's path (as callgrind names it) for the two sides."""
    n = len(profile.events)
    out = EngineCalls(profile.events, [0] * n, {}, {}, {}, {}, [0] * n, [0] * n)
    inside = _reached(profile.calls, is_engine)
    for (ob, fn), cost in profile.functions.items():
        if is_engine(ob):
            add_cost(out.objects, ob, cost)
            add_cost(out.functions, (ob, fn), cost)
    for arc, cost in profile.calls.items():
        caller_ob, caller_fn, callee_ob, callee_fn = arc
        inward, outward = is_engine(callee_ob), is_engine(caller_ob)
        if inward and not outward and is_client(caller_ob):
            if (caller_ob, caller_fn) in inside:
                _add(out.nested, cost)
                continue
            _add(out.total, cost)
            add_cost(out.entries, callee_fn, cost)
            out.entry_calls[callee_fn] = out.entry_calls.get(callee_fn, 0) + (
                profile.call_counts.get(arc, 0)
            )
        elif outward and not inward:
            add_cost(out.objects, callee_ob, cost)
            add_cost(out.functions, (callee_ob, callee_fn), cost)
            if is_client(callee_ob):
                _add(out.reentered, cost)
    # Calls back into the engine (from a library it called, or nested client calls) are
    # in both its self cost and the inclusive cost of its calls out: take that overlap
    # off the engine's own row, so the objects sum to the total.
    mine = [ob for ob in out.objects if is_engine(ob)]
    if mine:
        overlap = [sum(c[i] for c in out.objects.values()) - out.total[i] for i in range(n)]
        row = out.objects[max(mine, key=lambda ob: out.objects[ob][0])]
        for i, v in enumerate(overlap):
            row[i] -= v
    return out
