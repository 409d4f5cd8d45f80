"""Reading callgrind's output files (the format of valgrind's callgrind_annotate).

A file holds the costs of one process between two dumps: a header (`events:`, the
simulated caches in `desc:` lines, `summary:`), then cost lines per function, each
function under the object (`ob=`) and source file (`fl=`) it came from. A cost line
right after `calls=` is the inclusive cost of that call, not the function's own: it is
skipped, so what is summed per function is its self cost and the sum over functions is
the file's total. Names may be compressed: `(12) name` defines id 12, `(12)` reuses it.
"""

from __future__ import annotations

import gzip
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from dbregress.errors import DbregressError

# The events callgrind reports with --cache-sim=yes --branch-sim=yes, in its order.
EVENTS = (
    *("Ir", "Dr", "Dw", "I1mr", "D1mr", "D1mw", "ILmr", "DLmr", "DLmw"),
    *("Bc", "Bcm", "Bi", "Bim"),
)
_COMPRESSED = re.compile(r"^\((\d+)\)(?:\s(.*))?$")


class CallgrindError(DbregressError):
    """A window's callgrind output is missing or says nothing."""


@dataclass
class Profile:
    """Costs summed over one or more callgrind files: per event, and per function
    (object, name) self cost."""

    events: tuple[str, ...] = EVENTS
    totals: list[int] = field(default_factory=lambda: [0] * len(EVENTS))
    functions: dict[tuple[str, str], list[int]] = field(default_factory=dict)
    caches: dict[str, str] = field(default_factory=dict)  # "I1" -> "32768 B, 64 B, 8-way"
    triggers: list[str] = field(default_factory=list)  # why each file was written
    files: int = 0

    def total(self, event: str) -> int:
        return self.totals[self.events.index(event)]

    def add(self, other: Profile) -> None:
        if other.events != self.events:
            raise ValueError(f"callgrind events differ: {other.events} vs {self.events}")
        self.totals = [a + b for a, b in zip(self.totals, other.totals, strict=True)]
        for key, cost in other.functions.items():
            add_cost(self.functions, key, cost)
        self.caches = self.caches or other.caches
        self.triggers += other.triggers
        self.files += other.files


def add_cost(
    table: dict[tuple[str, str], list[int]], key: tuple[str, str], cost: list[int]
) -> None:
    """Add a function's cost vector into `table` under `key`."""
    mine = table.setdefault(key, [0] * len(cost))
    for i, v in enumerate(cost):
        mine[i] += v


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
    skip_next = False
    current: list[int] | None = None
    n = 0
    positions = 1  # `positions: line` (the default); `instr line` is two columns
    for raw in lines:
        line = raw.rstrip("\n")
        if not line:
            continue
        head = line[0]
        if head.isdigit() or head in "+-*":
            if skip_next:  # the inclusive cost of a call
                skip_next = False
                continue
            if current is None:
                current = profile.functions.setdefault((ob, fn), [0] * n)
            values = line.split()[positions:]
            for i, text in enumerate(values[:n]):
                current[i] += int(text)
            continue
        key, _, value = line.partition("=")
        if key in ("ob", "cob"):
            name = _name(value, tables["ob"])
            if key == "ob":
                ob, current = name, None
        elif key in ("fl", "fi", "fe", "cfi", "cfl"):
            _name(value, tables["fl"])  # registers a compressed file name
        elif key in ("fn", "cfn"):
            name = _name(value, tables["fn"])
            if key == "fn":
                fn, current = name, None
        elif key == "calls":
            skip_next = True
        elif line.startswith("positions:"):
            positions = len(line.split(":", 1)[1].split())
        elif line.startswith("events:"):
            profile.events = tuple(line.split(":", 1)[1].split())
            n = len(profile.events)
            profile.totals = [0] * n
        elif line.startswith("desc:"):
            text = line.split(":", 1)[1].strip()
            cache = re.match(r"(I1|D1|LL) cache:\s*(.*)", text)
            if cache:
                profile.caches[cache.group(1)] = cache.group(2)
            elif text.startswith("Trigger:"):
                profile.triggers.append(text.split(":", 1)[1].strip())
    for cost in profile.functions.values():
        for i, v in enumerate(cost):
            profile.totals[i] += v
    return profile


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
