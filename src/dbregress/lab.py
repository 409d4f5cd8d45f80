"""Lab files: TOML in, a validated list of Jobs out.

A lab compares (build, config) pairs, its `[[column]]` tables; the first is the base.
Every error names the file, the line and the key to fix (docs/lab-file.md).
"""

from __future__ import annotations

import os
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dbregress.errors import BuildNotFound, LabError
from dbregress.provision import BuildSpec

BENCHMARKS = ("insert",)
INSERT_STEPS = (
    "l.i0",
    "l.x",
    "l.i1",
    "l.i2",
    "cleanup",
    "qr100",
    "qp100",
    "qr500",
    "qp500",
    "qr1000",
    "qp1000",
)
PLACEMENT_MODES = ("same", "separate", "unpinned")
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


@dataclass(frozen=True)
class InsertSizes:
    clients: int = 1
    load_rows: int = 1_000_000  # l.i0 rows per client
    write_rows: int = 250_000  # l.i1 rows per client; l.i2 inserts a quarter of it
    query_seconds: float = 60.0  # per q-step
    cleanup_wait_s: float | None = None  # None: 5 s + 1 s per million rows
    steps: tuple[str, ...] = INSERT_STEPS

    @property
    def total_rows(self) -> int:
        return self.clients * (self.load_rows + self.write_rows)

    def cleanup_wait(self) -> float:
        if self.cleanup_wait_s is not None:
            return self.cleanup_wait_s
        return 5.0 + self.total_rows / 1_000_000


KV_STEPS = (
    "fillseq",
    "revrange",
    "overwritesome",
    "flush_mt_l0",
    "readrandom",
    "fwdrange",
    "revrangewhilewriting",
    "fwdrangewhilewriting",
    "readwhilewriting",
    "overwriteandwait",
)


@dataclass(frozen=True)
class KvSizes:
    """db_bench-style steps on an embedded key-value engine (METHOD.md section 4)."""

    keys: int = 1_000_000
    key_size: int = 20
    value_size: int = 400
    threads: int = 1  # readers in the read steps; fillseq always uses 1
    seconds: float = 60.0  # per timed step
    short_seconds: float = 10.0  # revrange, which lets compaction debt drain
    writer_mb_per_s: float = 2.0  # the *whilewriting steps' background writer
    overwrite_fraction: float = 0.1  # overwritesome
    range_len: int = 10
    steps: tuple[str, ...] = KV_STEPS

    @property
    def data_mb(self) -> int:
        return max(1, self.keys * (self.key_size + self.value_size) // 2**20)


@dataclass(frozen=True)
class Job:
    """One column, one repeat: a fresh engine running every step of the benchmark."""

    column: Column
    repeat: int

    @property
    def name(self) -> str:
        return f"{self.column.label}/r{self.repeat}"


@dataclass(frozen=True)
class Lab:
    name: str
    path: Path
    text: str
    benchmark: str
    columns: tuple[Column, ...]
    insert: InsertSizes
    placement: Placement
    repeats: int = 1
    sleep_between_s: float = 0.0
    step_timeout_s: float | None = None  # None: derived per step from its size
    seed: int = 1

    @property
    def base(self) -> Column:
        return self.columns[0]

    def jobs(self) -> list[Job]:
        """Repeat-major order, so repeats of one column are interleaved with the others."""
        return [Job(c, r) for r in range(1, self.repeats + 1) for c in self.columns]


class _Reader:
    """Typed access to one TOML table that reports file, line and key on error."""

    def __init__(self, path: Path, text: str, table: str, data: dict[str, Any]) -> None:
        self.path, self.text, self.table, self.data = path, text, table, data
        self.used: set[str] = set()

    def fail(self, key: str | None, message: str) -> LabError:
        where = f"{self.path}:{_line_of(self.text, self.table, key)}"
        dotted = ".".join(p for p in (self.table, key) if p)
        return LabError(f"{where}: {dotted or 'lab'}: {message}")

    def get(self, key: str, kind: type | tuple[type, ...], default: Any = None) -> Any:
        self.used.add(key)
        if key not in self.data:
            return default
        value = self.data[key]
        if isinstance(value, bool) and bool not in (kind if isinstance(kind, tuple) else (kind,)):
            raise self.fail(key, f"expected {_kind_name(kind)}, got a boolean")
        if not isinstance(value, kind):
            raise self.fail(key, f"expected {_kind_name(kind)}, got {type(value).__name__}")
        return value

    def positive(self, key: str, default: float, integer: bool = True) -> Any:
        value = self.get(key, int if integer else (int, float), default)
        if value is not None and value <= 0:
            raise self.fail(key, f"must be greater than 0, got {value}")
        return value

    def require(self, key: str, kind: type) -> Any:
        if key not in self.data:
            raise self.fail(None, f"missing required key {key!r}")
        return self.get(key, kind)

    def reject_unknown(self) -> None:
        for key in self.data:
            if key not in self.used:
                known = ", ".join(sorted(self.used))
                raise self.fail(key, f"unknown key {key!r} (known here: {known})")


def _kind_name(kind: type | tuple[type, ...]) -> str:
    kinds = kind if isinstance(kind, tuple) else (kind,)
    names = {
        int: "an integer",
        float: "a number",
        str: "a string",
        list: "a list",
        dict: "a table",
        bool: "true or false",
    }
    return " or ".join(names.get(k, k.__name__) for k in kinds)


def _line_of(text: str, table: str, key: str | None) -> int:
    """Line number of `key` inside `[table]` (or of the table header); 1 if unknown."""
    header = re.compile(r"^\s*\[\[?\s*([A-Za-z0-9_.\-]+)\s*\]\]?")
    base = table.split("[")[0]
    index = int(table.split("[")[1].rstrip("]")) if "[" in table else None
    current, seen, header_line = "", -1, 0
    for number, line in enumerate(text.splitlines(), start=1):
        m = header.match(line)
        if m:
            current = m.group(1)
            if current == base:
                seen += 1
                if index is None or seen == index:
                    header_line = number
            continue
        in_table = current == base and (index is None or seen == index) if base else current == ""
        if in_table and key and re.match(rf"^\s*{re.escape(key)}\s*=", line):
            return number
    return header_line or 1


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
    top = _Reader(path, text, "", data)
    name = top.get("name", str, path.stem)
    if not LABEL_RE.match(name):
        raise top.fail("name", f"{name!r} must be letters, digits, '.', '_' or '-'")
    benchmark = top.get("benchmark", str, "insert")
    if benchmark not in BENCHMARKS:
        raise top.fail(
            "benchmark", f"unknown benchmark {benchmark!r}; known: {', '.join(BENCHMARKS)}"
        )
    columns = _columns(path, text, top.require("column", list))
    insert = _insert(_Reader(path, text, "insert", top.get("insert", dict, {})))
    placement = _placement(top, top.get("placement", (str, dict), "separate"))
    lab = Lab(
        name=name,
        path=path,
        text=text,
        benchmark=benchmark,
        columns=columns,
        insert=insert,
        placement=placement,
        repeats=top.positive("repeats", 1),
        sleep_between_s=float(top.get("sleep_between_s", (int, float), 0.0)),
        step_timeout_s=top.positive("step_timeout_s", None, integer=False),  # type: ignore[arg-type]
        seed=top.get("seed", int, 1),
    )
    top.reject_unknown()
    return lab


def _columns(path: Path, text: str, raw: list[Any]) -> tuple[Column, ...]:
    if not raw:
        raise LabError(f"{path}:1: a lab needs at least one [[column]] (build, config) pair")
    columns: list[Column] = []
    for i, item in enumerate(raw):
        r = _Reader(path, text, f"column[{i}]", item if isinstance(item, dict) else {})
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
            if not isinstance(value, (str, int, float)) or isinstance(value, bool):
                raise r.fail("settings", f"setting {key!r} must be a string or a number")
        columns.append(
            Column(
                label,
                build,
                r.get("config", str, "default"),
                {k: str(v) for k, v in settings.items()},
            )
        )
        r.reject_unknown()
    return tuple(columns)


def _insert(r: _Reader) -> InsertSizes:
    d = InsertSizes()
    steps = r.get("steps", list, list(d.steps))
    for step in steps:
        if step not in INSERT_STEPS:
            raise r.fail("steps", f"unknown step {step!r}; steps are {', '.join(INSERT_STEPS)}")
    order = sorted(steps, key=INSERT_STEPS.index)
    if order != steps:
        raise r.fail("steps", f"steps must keep the benchmark's order: {', '.join(order)}")
    if steps and steps[0] != "l.i0":
        raise r.fail("steps", "the step list must start with l.i0, which creates the tables")
    wait = r.get("cleanup_wait_s", (int, float), None)
    if wait is not None and wait < 0:
        raise r.fail("cleanup_wait_s", "must be 0 or more")
    sizes = InsertSizes(
        clients=r.positive("clients", d.clients),
        load_rows=r.positive("load_rows", d.load_rows),
        write_rows=r.positive("write_rows", d.write_rows),
        query_seconds=float(r.positive("query_seconds", d.query_seconds, integer=False)),
        cleanup_wait_s=None if wait is None else float(wait),
        steps=tuple(steps),
    )
    if sizes.write_rows < 4:
        raise r.fail("write_rows", "must be at least 4 (l.i2 inserts a quarter of it)")
    r.reject_unknown()
    return sizes


def _placement(top: _Reader, value: str | dict[str, Any]) -> Placement:
    ncpu = len(os.sched_getaffinity(0))
    if isinstance(value, str):
        if value not in PLACEMENT_MODES:
            raise top.fail(
                "placement",
                f"unknown placement {value!r}; use one of "
                f'{", ".join(PLACEMENT_MODES)} or {{ server = "0", client = "1" }}',
            )
        if value == "unpinned":
            return Placement("unpinned", None, None)
        cpus = sorted(os.sched_getaffinity(0))
        if value == "same" or ncpu < 2:
            one = frozenset(cpus[:1])
            return Placement("same", one, one)
        return Placement("separate", frozenset(cpus[:-1]), frozenset(cpus[-1:]))
    r = _Reader(top.path, top.text, "placement", value)
    server = _cpu_set(r, "server")
    client = _cpu_set(r, "client")
    r.reject_unknown()
    mode = "same" if server == client else "separate" if not (server & client) else "custom"
    return Placement(mode, server, client)


def _cpu_set(r: _Reader, key: str) -> frozenset[int]:
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
