"""Lab files: TOML in, a validated list of Jobs out.

A lab compares (build, config) pairs, its `[[column]]` tables; the first is the base.
Every error names the file, the line and the key to fix (docs/lab-file.md).
"""

from __future__ import annotations

import dataclasses
import os
import random
import re
import shutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dbregress.lab.columns import Column, check_label, read_columns
from dbregress.lab.flavors import attach, read_flavors
from dbregress.lab.sizes import (
    INSERT_STEPS,
    KV_STEPS,
    InsertSizes,
    KvSizes,
    MicroSizes,
    read_insert,
    read_kv,
    read_micro,
)
from dbregress.model import tomlreader
from dbregress.model.records import JobId
from dbregress.model.tomlreader import MAX_SECONDS, TableReader, read_toml, short, value_name
from dbregress.shapes import run as shapes

# The benchmarks' sizes live in lab/sizes.py; these names are part of this module's API.
__all__ = [
    "INSERT_STEPS",
    "KV_STEPS",
    "Column",
    "InsertSizes",
    "KvSizes",
    "Lab",
    "MicroSizes",
    "load_lab",
]

BENCHMARKS = ("insert", "kv", "micro")
PLACEMENT_MODES = ("same", "separate", "unpinned")
ORDERS = ("random", "fixed")
SCHEDULES = ("jobs", "interleaved")
# Configs whose data is read from storage (or the OS cache): the page cache is dropped
# before each of their jobs so every job starts from the same cold state (an interleaved
# schedule would have their engines share the page cache: docs/lab-file.md).
STORAGE_BOUND_CONFIGS = ("iobuf", "iodir")
REPEATS_RE = re.compile(r"\s*([0-9]{1,9})\s*\.\.\s*([0-9]{1,9})\s*")
MAX_REPEATS = 1000  # rounds of a comparison; each is a fresh engine per column
MAX_SEED = 2**53  # the loadgen's u64 seed is seed * 1000 + the job's index
MAX_CPU = 65535  # a CPU list naming more is a typo (and would take long to expand)
MAX_COUNT_REPLAYS = 50  # counting replays per column: each is a fresh engine under valgrind


@dataclass(frozen=True)
class Placement:
    """Where the server and the loadgen run; None means unpinned."""

    mode: str
    server_cpus: frozenset[int] | None
    client_cpus: frozenset[int] | None

    def to_json(self) -> shapes.PlacementJson:
        def cpus(s: frozenset[int] | None) -> list[int] | None:
            return sorted(s) if s is not None else None

        return {
            "mode": self.mode,
            "server_cpus": cpus(self.server_cpus),
            "client_cpus": cpus(self.client_cpus),
        }


@dataclass(frozen=True)
class Comparison:
    """Columns compared on one benchmark; the first column is the base."""

    name: str
    benchmark: str
    columns: tuple[Column, ...]
    sizes: InsertSizes | KvSizes | MicroSizes

    @property
    def base(self) -> Column:
        return self.columns[0]


@dataclass(frozen=True)
class Job:
    """One column, one repeat: a fresh engine running every step of the benchmark.

    Repeat 0 is the discarded warm-up job that runs before the first round: the first
    job of a lab is often an outlier (cold caches, first start of a build)."""

    comparison: Comparison
    column: Column
    repeat: int

    @property
    def name(self) -> str:
        return str(JobId(self.column.label, self.repeat))

    @property
    def warmup(self) -> bool:
        return self.repeat == 0


@dataclass(frozen=True)
class Repeats:
    """`repeats = 5` or `repeats = "3..10"`: after `minimum` rounds the runner adds rounds
    while a step is undecided, up to `maximum`."""

    minimum: int
    maximum: int

    def __str__(self) -> str:
        return (
            str(self.minimum) if self.minimum == self.maximum else f"{self.minimum}..{self.maximum}"
        )


@dataclass(frozen=True)
class VerdictPolicy:
    """How sure a verdict must be (docs/verdicts.md)."""

    alpha: float = 0.05  # false-alarm rate over the whole lab (Benjamini-Hochberg)
    band: float = 0.05  # `same` means the ratio's interval lies within 1 ± band
    cost_band: float = 0.01  # the cost lane's `same` band (its counts are near-exact)
    # a `same` cost verdict whose interval clears 1 ± this (and its noise floor) is a
    # `small` change; two builds of one code stay inside it (docs/ledger.md)
    cost_small_floor: float = 0.0025

    @classmethod
    def of_record(cls, record: Mapping[str, Any]) -> VerdictPolicy:
        """The policy a run is judged with: its run.json's `verdict_policy` (which also
        holds the replay and repeat rules, not fields of this class); a setting the run
        did not store (runs made before it was stored) takes today's default."""
        stored = record.get("verdict_policy") or {}
        known = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in stored.items() if k in known})


@dataclass(frozen=True)
class Lab:
    name: str
    path: Path
    text: str
    comparisons: tuple[Comparison, ...]
    placement: Placement
    repeats: Repeats = Repeats(1, 1)
    sleep_between_s: float = 0.0
    step_timeout_s: float | None = None  # None: derived per step from its size
    start_timeout_s: float = 120.0  # an engine not ready by then fails its job
    seed: int = 1
    order: str = "random"  # columns within a round: random (seeded) or as listed
    # jobs: each column's repeat is a job of its own, one after another. interleaved: a
    # round starts every column's engine at once and runs each step on all of them in
    # turns of slice_ms (timed steps) or of equal work (fixed-work steps), so the host's
    # drift hits every column alike (docs/verdicts.md).
    schedule: str = "jobs"
    slice_ms: int = 100
    warmup_job: bool = True
    drop_caches: bool | None = None  # None: only for configs that read from storage
    # fio on the data's filesystem before and after each comparison (io_baseline.py):
    # None = for comparisons with a column of an IO-bound config (iobuf, iodir)
    io_baseline: bool | None = None
    io_baseline_s: int = 10  # each fio run's measured seconds
    aslr: bool = True  # address-space layout randomization for servers and loadgens
    explain: bool = False  # after the run, `dbregress explain` it
    verdict: VerdictPolicy = VerdictPolicy()
    # The cost lane (docs/verdicts.md): None = on where valgrind is installed, unless
    # the environment's DBREGRESS_COUNT is 0; count_replays per column, up to
    # count_replays_max for a column whose replays of some step disagree beyond the band.
    count: bool | None = None
    count_replays: int = 3
    count_replays_max: int = 5
    count_steps: tuple[str, ...] = ()  # the steps the lane counts; () = every reported step
    # count every replay anew: take none from the store of counting replays (each
    # counted replay still goes into it; docs/count-store.md)
    recount: bool = False
    # a build whose replays were taken from the store counts anew at least once in this
    # many runs (docs/count-store.md, "Counted anew every N runs")
    recount_every: int = 5

    def counts(self) -> bool:
        """Whether this lab's runs have a cost lane."""
        return self.why_no_count() is None

    def why_no_count(self) -> str | None:
        """Why this lab's runs have no cost lane (None: they have one), in words a
        report and a failing gate print."""
        if self.count is not None:
            return None if self.count else "the lab file sets count = false"
        if os.environ.get("DBREGRESS_COUNT", "1").strip() in ("0", "false", "no", "off"):
            return "the environment sets DBREGRESS_COUNT=0"
        missing = [t for t in ("valgrind", "vgdb") if shutil.which(t) is None]
        if missing:
            return f"{' and '.join(missing)} not found on PATH (install valgrind)"
        return None

    def io_bound(self, comparison: Comparison) -> bool:
        """Whether the comparison's run measures the device beside it (fio)."""
        if self.io_baseline is not None:
            return self.io_baseline
        return any(c.config in STORAGE_BOUND_CONFIGS for c in comparison.columns)

    def policy_record(self) -> shapes.VerdictPolicyJson:
        """Every setting a verdict of this lab's runs depends on, as run.json stores it:
        the verdict policy, the cost lane's replay rule and the time lane's repeat rule.
        Reports, compare, history and bisect judge a run with what it stored."""
        return {
            "alpha": self.verdict.alpha,
            "band": self.verdict.band,
            "cost_band": self.verdict.cost_band,
            "cost_small_floor": self.verdict.cost_small_floor,
            "count_replays": self.count_replays,
            "count_replays_max": self.count_replays_max,
            "repeats": {"min": self.repeats.minimum, "max": self.repeats.maximum},
            "schedule": self.schedule,
        }

    @property
    def columns(self) -> tuple[Column, ...]:
        return tuple(c for comp in self.comparisons for c in comp.columns)

    def round(self, comparison: Comparison, number: int) -> list[Job]:
        """Round `number` (1-based) of a comparison: every column once, in an order drawn
        from the lab's seed, so drift and neighbours hit every column alike."""
        columns = list(comparison.columns)
        if self.order == "random":
            index = self.comparisons.index(comparison)
            random.Random(f"{self.seed}/{index}/{number}").shuffle(columns)
        return [Job(comparison, col, number) for col in columns]

    def warmup_jobs(self, comparison: Comparison) -> list[Job]:
        return [Job(comparison, comparison.base, 0)] if self.warmup_job else []

    def jobs(self) -> list[Job]:
        """The jobs of the minimum number of rounds, in the order they run."""
        return [
            job
            for comp in self.comparisons
            for job in [
                *self.warmup_jobs(comp),
                *(j for r in range(1, self.repeats.minimum + 1) for j in self.round(comp, r)),
            ]
        ]


def load_lab(path: Path) -> Lab:
    """The lab in a TOML file; LabError naming the file, the line and the key to fix."""
    text, data = read_toml(path)
    return parse_lab(data, path, text)


def parse_lab(data: tomlreader.TomlTable, path: Path, text: str) -> Lab:
    top = TableReader(path, text, "", data)
    if "name" in data:
        name = check_label(top, "name", top.get("name", str))
    else:
        from_file = 'the lab\'s name comes from the file name: set name = "..." or rename it; '
        name = check_label(top, "name", path.stem, from_file)
    comparisons = _comparisons(top)
    lab = Lab(
        name=name,
        path=path,
        text=text,
        comparisons=tuple(comparisons),
        placement=_placement(top, top.get("placement", (str, dict), "separate")),
        repeats=_repeats(top),
        sleep_between_s=top.number("sleep_between_s", 0.0, low=0, high=MAX_SECONDS),
        step_timeout_s=top.positive("step_timeout_s", None, integer=False),
        start_timeout_s=top.number("start_timeout_s", 120.0, low=1, high=MAX_SECONDS),
        seed=top.number("seed", 1, low=0, high=MAX_SEED, integer=True),
        order=_choice(top, "order", ORDERS, "random"),
        schedule=_choice(top, "schedule", SCHEDULES, "jobs"),
        slice_ms=top.number("slice_ms", 100, low=10, high=10_000, integer=True),
        warmup_job=top.get("warmup_job", bool, True),
        drop_caches=top.get("drop_caches", bool, None),
        io_baseline=top.get("io_baseline", bool, None),
        io_baseline_s=top.number("io_baseline_s", 10, low=1, high=3600, integer=True),
        aslr=top.get("aslr", bool, True),
        explain=top.get("explain", bool, False),
        verdict=_verdict(top),
        count=top.get("count", bool, None),
        recount=top.get("recount", bool, False),
        recount_every=top.number("recount_every", 5, low=1, high=1000, integer=True),
        count_replays=top.number("count_replays", 3, low=2, high=MAX_COUNT_REPLAYS, integer=True),
    )
    lab = _count_rules(top, lab)
    top.reject_unknown()
    return lab


def _comparisons(top: TableReader) -> list[Comparison]:
    """The lab's [[comparison]] blocks, or the one comparison a lab without them is, with
    the flavors' builds attached to their columns."""
    data = top.data
    if "comparison" in data:
        for key in ("column", "benchmark", "insert", "kv", "micro"):
            if key in data:
                raise top.fail(key, "with [[comparison]] blocks, put this inside each of them")
        raw = top.get("comparison", list)
        if not raw:
            raise top.fail("comparison", "a lab needs at least one [[comparison]] block")
        comparisons = [_comparison(top, i, c) for i, c in enumerate(raw)]
    else:
        comparisons = [_comparison_body(top, top)]
    flavors = read_flavors(top)
    within = "comparison[{}]." if "comparison" in data else ""
    comparisons = [
        dataclasses.replace(c, columns=attach(top, c.columns, flavors, within.format(i)))
        for i, c in enumerate(comparisons)
    ]
    _check_unique(top, comparisons)
    return comparisons


def _count_rules(top: TableReader, lab: Lab) -> Lab:
    """The lab with the cost lane's replay ceiling and its counted steps."""
    most = top.number(
        "count_replays_max", max(5, lab.count_replays), low=2, high=MAX_COUNT_REPLAYS, integer=True
    )
    if most < lab.count_replays:
        raise top.fail(
            "count_replays_max",
            f"{most} is below count_replays ({lab.count_replays}); make it at least as "
            "large (equal adds no replays)",
        )
    steps = top.get("count_steps", list, [])
    if not all(isinstance(x, str) and x for x in steps):
        raise top.fail("count_steps", 'must be a list of step names, like ["qp100"]')
    return dataclasses.replace(lab, count_replays_max=most, count_steps=tuple(steps))


def _check_unique(top: TableReader, comparisons: list[Comparison]) -> None:
    """Column labels across the whole lab and comparison names."""
    seen: set[str] = set()
    for i, comp in enumerate(comparisons):
        for j, column in enumerate(comp.columns):
            if column.label in seen:
                table = f"comparison[{i}].column[{j}]"
                raise TableReader(top.path, top.text, table, {}).fail(
                    "label",
                    f"column label {short(column.label)} is used in two comparisons; "
                    "labels name result folders, so they must differ",
                )
            seen.add(column.label)
    names = [c.name for c in comparisons]
    for i, name in enumerate(names):
        if name in names[:i]:
            raise top.child(f"comparison[{i}]", {}).fail(
                "name", f"two comparisons are named {short(name)}; give each its own name"
            )


def _repeats(top: TableReader) -> Repeats:
    value = top.get("repeats", (int, str), 1)
    if isinstance(value, int):
        if not 0 < value <= MAX_REPEATS:
            raise top.fail(
                "repeats", f"must be greater than 0 and at most {MAX_REPEATS}, got {value}"
            )
        return Repeats(value, value)
    if re.fullmatch(r"\s*[0-9]+\s*", value):
        value = f"{value.strip()}..{value.strip()}"
    m = REPEATS_RE.fullmatch(value)
    if not m:
        raise top.fail("repeats", f'{short(value)} is neither a number nor a range like "3..10"')
    low, high = int(m.group(1)), int(m.group(2))
    if not 0 < low <= high <= MAX_REPEATS:
        raise top.fail(
            "repeats",
            f'the range {short(value)} must be "MIN..MAX" with 0 < MIN <= MAX <= {MAX_REPEATS}',
        )
    return Repeats(low, high)


def _choice(r: TableReader, key: str, choices: tuple[str, ...], default: str) -> str:
    value: str = r.get(key, str, default)
    if value not in choices:
        raise r.fail(key, f"unknown value {short(value)}; use one of {', '.join(choices)}")
    return value


def _fraction(r: TableReader, key: str, default: float, low: float, high: float) -> float:
    value: float = r.number(key, default)
    if not low < value < high:
        raise r.fail(key, f"must be between {low} and {high} (exclusive), got {value}")
    return value


def _verdict(top: TableReader) -> VerdictPolicy:
    r = top.child("verdict", top.get("verdict", dict, {}))
    d = VerdictPolicy()
    policy = VerdictPolicy(
        alpha=_fraction(r, "alpha", d.alpha, 0.0, 0.5),
        band=_fraction(r, "band", d.band, 0.0, 1.0),
        cost_band=_fraction(r, "cost_band", d.cost_band, 0.0, 1.0),
        cost_small_floor=_fraction(r, "cost_small_floor", d.cost_small_floor, 0.0, 1.0),
    )
    # a floor the file names lies inside its band (a narrower band alone: nothing small)
    if "cost_small_floor" in r.data and policy.cost_small_floor >= policy.cost_band:
        raise r.fail(
            "cost_small_floor",
            f"must be below cost_band ({policy.cost_band}), got {policy.cost_small_floor}",
        )
    r.reject_unknown()
    return policy


def _comparison(top: TableReader, index: int, item: Any) -> Comparison:
    if not isinstance(item, dict):
        raise top.fail(
            "comparison",
            f"entry {index} is {value_name(item)}; write each comparison as a [[comparison]] table",
        )
    table = f"comparison[{index}]"
    r = TableReader(top.path, top.text, table, item, table)
    comparison = _comparison_body(r, r)
    r.reject_unknown()
    return comparison


def _comparison_body(r: TableReader, parent: TableReader) -> Comparison:
    """The keys a comparison has, whether at the file's top level or in [[comparison]]."""
    benchmark = r.get("benchmark", str, "insert")
    if benchmark not in BENCHMARKS:
        raise r.fail(
            "benchmark", f"unknown benchmark {short(benchmark)}; known: {', '.join(BENCHMARKS)}"
        )
    name = check_label(r, "name", r.get("name", str, benchmark)) if r.scope else benchmark
    columns = read_columns(r, r.require("column", list))
    for other in BENCHMARKS:
        if other != benchmark and other in r.data:
            raise r.fail(other, f"a [{other}] table does not apply to benchmark {benchmark!r}")
    table = parent.child(benchmark, r.get(benchmark, dict, {}))
    readers: dict[str, Callable[[TableReader], InsertSizes | KvSizes | MicroSizes]]
    readers = {"insert": read_insert, "kv": read_kv, "micro": read_micro}
    return Comparison(name, benchmark, columns, readers[benchmark](table))


def _placement(top: TableReader, value: str | tomlreader.TomlTable) -> Placement:
    if isinstance(value, str):
        if value not in PLACEMENT_MODES:
            raise top.fail(
                "placement",
                f"unknown placement {short(value)}; use one of "
                f'{", ".join(PLACEMENT_MODES)} or {{ server = "0", client = "1" }}',
            )
        return placement_for(value)
    r = TableReader(top.path, top.text, "placement", value)
    server = _cpu_set(r, "server")
    client = _cpu_set(r, "client")
    r.reject_unknown()
    mode = "same" if server == client else "separate" if not (server & client) else "custom"
    return Placement(mode, server, client)


def placement_for(mode: str) -> Placement:
    """The CPU sets of a named placement on this machine (one of PLACEMENT_MODES)."""
    if mode == "unpinned":
        return Placement("unpinned", None, None)
    cpus = sorted(os.sched_getaffinity(0))
    if mode == "same" or len(cpus) < 2:
        one = frozenset(cpus[:1])
        return Placement("same", one, one)
    return Placement("separate", frozenset(cpus[:-1]), frozenset(cpus[-1:]))


def _cpu_set(r: TableReader, key: str) -> frozenset[int]:
    text = r.require(key, str)
    allowed = os.sched_getaffinity(0)
    cpus: set[int] = set()
    for part in text.split(","):
        m = re.fullmatch(r"\s*([0-9]{1,5})\s*(?:-\s*([0-9]{1,5})\s*)?", part)
        if not m:
            raise r.fail(key, f'{short(text)} is not a CPU list like "0", "0-2" or "0,2"')
        lo, hi = int(m.group(1)), int(m.group(2) or m.group(1))
        if lo > hi:
            raise r.fail(key, f"the range {short(part.strip())} is backwards; write LOW-HIGH")
        if hi > MAX_CPU or not allowed >= set(range(lo, hi + 1)):
            unavailable = [c for c in range(lo, min(hi, lo + 100) + 1) if c not in allowed]
            raise r.fail(
                key,
                f"CPUs {unavailable[:8]} are not available; this machine offers {sorted(allowed)}",
            )
        cpus.update(range(lo, hi + 1))
    return frozenset(cpus)
