"""Lab files: TOML in, a validated list of Jobs out.

A lab compares (build, config) pairs, its `[[column]]` tables; the first is the base.
Every error names the file, the line and the key to fix (docs/lab-file.md).
"""

from __future__ import annotations

import os
import random
import re
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dbregress.benchmark_sizes import (
    INSERT_STEPS,
    KV_STEPS,
    InsertSizes,
    KvSizes,
    MicroSizes,
    read_insert,
    read_kv,
    read_micro,
)
from dbregress.errors import BuildNotFound, LabError
from dbregress.provision import BuildSpec
from dbregress.tomlreader import TableReader

# The benchmarks' sizes live in benchmark_sizes.py; these names are part of this module's API.
__all__ = ["INSERT_STEPS", "KV_STEPS", "InsertSizes", "KvSizes", "Lab", "MicroSizes", "load_lab"]

BENCHMARKS = ("insert", "kv", "micro")
PLACEMENT_MODES = ("same", "separate", "unpinned")
ORDERS = ("random", "fixed")
REPEATS_RE = re.compile(r"^\s*(\d+)\s*\.\.\s*(\d+)\s*$")
LABEL_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


@dataclass(frozen=True)
class Placement:
    """Where the server and the loadgen run; None means unpinned."""

    mode: str
    server_cpus: frozenset[int] | None
    client_cpus: frozenset[int] | None

    def to_json(self) -> dict[str, Any]:
        def cpus(s: frozenset[int] | None) -> list[int] | None:
            return sorted(s) if s is not None else None

        return {
            "mode": self.mode,
            "server_cpus": cpus(self.server_cpus),
            "client_cpus": cpus(self.client_cpus),
        }


@dataclass(frozen=True)
class Column:
    """One (build, config) pair: one column of every report."""

    label: str
    build: BuildSpec
    config: str
    settings: dict[str, str] = field(default_factory=dict)
    # A self-test: the loadgen busy-waits this fraction of each operation's own latency
    # after it, so QPS falls by about F/(1+F) whatever the engine (docs/verdicts.md).
    inject_slowdown: float = 0.0


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
        return f"{self.column.label}/r{self.repeat}"

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
    seed: int = 1
    order: str = "random"  # columns within a round: random (seeded) or as listed
    warmup_job: bool = True
    drop_caches: bool | None = None  # None: only for configs that read from storage
    verdict: VerdictPolicy = VerdictPolicy()

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
    try:
        text = path.read_text()
    except OSError as e:
        raise LabError(f"cannot read lab file {path}: {e.strerror}") from e
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise LabError(f"{path}: not valid TOML: {e}") from e
    return parse_lab(data, path, text)


def parse_lab(data: dict[str, Any], path: Path, text: str) -> Lab:
    top = TableReader(path, text, "", data)
    name = top.get("name", str, path.stem)
    if not LABEL_RE.match(name):
        raise top.fail("name", f"{name!r} must be letters, digits, '.', '_' or '-'")
    if "comparison" in data:
        for key in ("column", "benchmark", "insert", "kv", "micro"):
            if key in data:
                raise top.fail(key, "with [[comparison]] blocks, put this inside each of them")
        raw = top.get("comparison", list)
        comparisons = [_comparison(top, f"comparison[{i}]", c) for i, c in enumerate(raw)]
    else:
        comparisons = [_comparison_body(top, top)]
    labels = [c.label for comp in comparisons for c in comp.columns]
    for label in labels:
        if labels.count(label) > 1:
            raise top.fail(
                None,
                f"column label {label!r} is used in two comparisons; "
                "labels name result folders, so they must differ",
            )
    if len({c.name for c in comparisons}) < len(comparisons):
        raise top.fail("comparison", "two comparisons have the same name")
    lab = Lab(
        name=name,
        path=path,
        text=text,
        comparisons=tuple(comparisons),
        placement=_placement(top, top.get("placement", (str, dict), "separate")),
        repeats=_repeats(top),
        sleep_between_s=float(top.get("sleep_between_s", (int, float), 0.0)),
        step_timeout_s=top.positive("step_timeout_s", None, integer=False),  # type: ignore[arg-type]
        seed=top.get("seed", int, 1),
        order=_choice(top, "order", ORDERS, "random"),
        warmup_job=top.get("warmup_job", bool, True),
        drop_caches=top.get("drop_caches", bool, None),
        verdict=_verdict(top),
    )
    top.reject_unknown()
    return lab


def _repeats(top: TableReader) -> Repeats:
    value = top.get("repeats", (int, str), 1)
    if isinstance(value, int):
        if value <= 0:
            raise top.fail("repeats", f"must be greater than 0, got {value}")
        return Repeats(value, value)
    if value.strip().isdigit():
        value = f"{value.strip()}..{value.strip()}"
    m = REPEATS_RE.match(value)
    if not m:
        raise top.fail("repeats", f'{value!r} is neither a number nor a range like "3..10"')
    low, high = int(m.group(1)), int(m.group(2))
    if not 0 < low <= high:
        raise top.fail("repeats", f'the range {value!r} must be "MIN..MAX" with 0 < MIN <= MAX')
    return Repeats(low, high)


def _choice(r: TableReader, key: str, choices: tuple[str, ...], default: str) -> str:
    value: str = r.get(key, str, default)
    if value not in choices:
        raise r.fail(key, f"unknown value {value!r}; use one of {', '.join(choices)}")
    return value


def _fraction(r: TableReader, key: str, default: float, low: float, high: float) -> float:
    value = float(r.get(key, (int, float), default))
    if not low < value < high:
        raise r.fail(key, f"must be between {low} and {high} (exclusive), got {value}")
    return value


def _verdict(top: TableReader) -> VerdictPolicy:
    r = top.child("verdict", top.get("verdict", dict, {}))
    d = VerdictPolicy()
    policy = VerdictPolicy(
        alpha=_fraction(r, "alpha", d.alpha, 0.0, 0.5),
        band=_fraction(r, "band", d.band, 0.0, 1.0),
    )
    r.reject_unknown()
    return policy


def _comparison(top: TableReader, table: str, item: Any) -> Comparison:
    r = TableReader(top.path, top.text, table, item if isinstance(item, dict) else {}, table)
    comparison = _comparison_body(r, r)
    r.reject_unknown()
    return comparison


def _comparison_body(r: TableReader, parent: TableReader) -> Comparison:
    """The keys a comparison has, whether at the file's top level or in [[comparison]]."""
    benchmark = r.get("benchmark", str, "insert")
    if benchmark not in BENCHMARKS:
        raise r.fail(
            "benchmark", f"unknown benchmark {benchmark!r}; known: {', '.join(BENCHMARKS)}"
        )
    name = r.get("name", str, benchmark) if r.scope else benchmark
    if not LABEL_RE.match(name):
        raise r.fail("name", f"{name!r} must be letters, digits, '.', '_' or '-'")
    columns = _columns(r, r.require("column", list))
    for other in BENCHMARKS:
        if other != benchmark and other in r.data:
            raise r.fail(other, f"a [{other}] table does not apply to benchmark {benchmark!r}")
    table = parent.child(benchmark, r.get(benchmark, dict, {}))
    readers: dict[str, Callable[[TableReader], InsertSizes | KvSizes | MicroSizes]] = {
        "insert": read_insert,
        "kv": read_kv,
        "micro": read_micro,
    }
    return Comparison(name, benchmark, columns, readers[benchmark](table))


def _columns(parent: TableReader, raw: list[Any]) -> tuple[Column, ...]:
    if not raw:
        raise parent.fail(
            "column", "a comparison needs at least one [[column]] (build, config) pair"
        )
    columns: list[Column] = []
    for i, item in enumerate(raw):
        r = parent.child(f"column[{i}]", item if isinstance(item, dict) else {})
        label = r.require("label", str)
        if not LABEL_RE.match(label):
            raise r.fail("label", f"{label!r} must be letters, digits, '.', '_' or '-' (max 64)")
        if any(c.label == label for c in columns):
            raise r.fail("label", f"label {label!r} is used twice; labels name report columns")
        try:
            build = BuildSpec.parse(r.require("build", str))
        except BuildNotFound as e:
            raise r.fail("build", str(e)) from e
        settings = r.get("settings", dict, {})
        for key, value in settings.items():
            if not isinstance(value, (str, int, float)):
                raise r.fail("settings", f"setting {key!r} must be a string, a number or a boolean")
        default_config = "default" if build.engine != "rocksdb" else "byrx"
        inject = float(r.get("inject_slowdown", (int, float), 0.0))
        if not 0 <= inject <= 10:
            raise r.fail("inject_slowdown", f"must be a fraction from 0 to 10, got {inject}")
        columns.append(
            Column(
                label,
                build,
                r.get("config", str, default_config),
                {k: _setting(v) for k, v in settings.items()},
                inject,
            )
        )
        r.reject_unknown()
    return tuple(columns)


def _setting(value: str | int | float) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _placement(top: TableReader, value: str | dict[str, Any]) -> Placement:
    if isinstance(value, str):
        if value not in PLACEMENT_MODES:
            raise top.fail(
                "placement",
                f"unknown placement {value!r}; use one of "
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
    cpus: set[int] = set()
    try:
        for part in text.split(","):
            lo, _, hi = part.strip().partition("-")
            cpus.update(range(int(lo), int(hi or lo) + 1))
    except ValueError as e:
        raise r.fail(key, f'{text!r} is not a CPU list like "0", "0-2" or "0,2"') from e
    allowed = os.sched_getaffinity(0)
    if not cpus or not cpus <= allowed:
        raise r.fail(
            key,
            f"CPUs {sorted(cpus - allowed)} are not available; "
            f"this machine offers {sorted(allowed)}",
        )
    return frozenset(cpus)
