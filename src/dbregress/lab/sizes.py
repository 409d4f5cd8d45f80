"""The sizes of each benchmark, as a lab file gives them: the `[insert]`, `[kv]` and
`[micro]` tables, their defaults and their checks (docs/lab-file.md)."""

from __future__ import annotations

from dataclasses import dataclass

from dbregress.model import spec_schema
from dbregress.model.tomlreader import MAX_SECONDS, TableReader, short

# The [kv] keys passed on to the step spec as they are take the spec's own defaults.
_KV = spec_schema.workload("kv")

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


def default_warmup(seconds: float) -> float:
    """A duration-based step first runs this long, kept out of its figures: a fifth of
    its measured length, at most 10 s (caches fill and rates ramp up in the first
    seconds of a step)."""
    return round(min(10.0, seconds / 5), 3)


@dataclass(frozen=True)
class InsertSizes:
    clients: int = 1
    load_rows: int = 1_000_000  # l.i0 rows per client
    write_rows: int = 250_000  # l.i1 rows per client; l.i2 inserts a quarter of it
    query_seconds: float = 60.0  # per q-step
    cleanup_wait_s: float | None = None  # None: 5 s + 1 s per million rows
    steps: tuple[str, ...] = INSERT_STEPS
    warmup_s: float | None = None  # before each q-step's measured seconds; see warmup()

    def warmup(self) -> float:
        return default_warmup(self.query_seconds) if self.warmup_s is None else self.warmup_s

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
    """db_bench-style steps on an embedded key-value engine (docs/lab-file.md, The kv benchmark)."""

    keys: int = 1_000_000
    key_size: int = spec_schema.default(_KV, "key_size")
    value_size: int = spec_schema.default(_KV, "value_size")
    threads: int = 1  # readers in the read steps; fillseq always uses 1
    seconds: float = 60.0  # per timed step
    short_seconds: float = 10.0  # revrange, which lets compaction debt drain
    # the *whilewriting steps' background writer
    writer_mb_per_s: float = spec_schema.default(_KV, "writer_mb_per_s")
    overwrite_fraction: float = spec_schema.default(_KV, "overwrite_fraction")  # overwritesome
    range_len: int = spec_schema.default(_KV, "range_len")
    steps: tuple[str, ...] = KV_STEPS
    warmup_s: float | None = None  # before each timed step's measured seconds; see warmup()

    def warmup(self) -> float:
        return default_warmup(self.seconds) if self.warmup_s is None else self.warmup_s

    @property
    def data_mb(self) -> int:
        return max(1, self.keys * (self.key_size + self.value_size) // 2**20)


@dataclass(frozen=True)
class MicroSizes:
    """sysbench-style microbenchmarks on a SQL engine (docs/lab-file.md, The micro benchmark)."""

    tables: int = 8
    rows: int = 1_000_000  # per table
    clients: int = 1
    seconds: float = 60.0  # per microbenchmark
    reads_before_writes: bool = True  # the published order runs the reads on both sides
    cleanup_wait_s: float | None = None  # after the writes; None: 5 s + 1 s per million rows
    only: tuple[str, ...] = ()  # a subset of microbenchmarks; () = all
    warmup_s: float | None = None  # before each microbenchmark's measured seconds

    def warmup(self) -> float:
        return default_warmup(self.seconds) if self.warmup_s is None else self.warmup_s

    @property
    def total_rows(self) -> int:
        return self.tables * self.rows

    def cleanup_wait(self) -> float:
        if self.cleanup_wait_s is not None:
            return self.cleanup_wait_s
        return 5.0 + self.total_rows / 1_000_000


def _seconds(r: TableReader, key: str) -> float | None:
    """An optional duration (warmup_s, cleanup_wait_s): 0 or more seconds, None if absent."""
    value: float | None = r.number(key, None, low=0, high=MAX_SECONDS)
    return value


def read_micro(r: TableReader) -> MicroSizes:
    from dbregress.lab.micro_names import GROUPS

    d = MicroSizes()
    known = [n for names in GROUPS.values() for n in names]
    only = r.get("only", list, [])
    for name in only:
        if name not in known:
            raise r.fail("only", f"unknown microbenchmark {short(name)}; known: {', '.join(known)}")
    wait = _seconds(r, "cleanup_wait_s")
    sizes = MicroSizes(
        tables=r.positive("tables", d.tables),
        rows=r.positive("rows", d.rows),
        clients=r.positive("clients", d.clients),
        seconds=r.positive("seconds", d.seconds, integer=False),
        reads_before_writes=r.get("reads_before_writes", bool, d.reads_before_writes),
        cleanup_wait_s=wait,
        only=tuple(only),
        warmup_s=_seconds(r, "warmup_s"),
    )
    r.reject_unknown()
    return sizes


def _steps(r: TableReader, known: tuple[str, ...], why_first: str) -> list[str]:
    """A subset of a benchmark's steps, in its order, starting with its first step."""
    steps: list[str] = r.get("steps", list, list(known))
    seen: set[str] = set()
    for step in steps:
        if step not in known:
            raise r.fail("steps", f"unknown step {short(step)}; steps are {', '.join(known)}")
        if step in seen:
            raise r.fail("steps", f"step {step!r} is listed twice; list each step once")
        seen.add(step)
    order = sorted(steps, key=known.index)
    if order != steps:
        raise r.fail("steps", f"steps must keep the benchmark's order: {', '.join(order)}")
    if not steps or steps[0] != known[0]:
        raise r.fail("steps", f"the step list must start with {known[0]}, {why_first}")
    return steps


def read_kv(r: TableReader) -> KvSizes:
    d = KvSizes()
    steps = _steps(r, KV_STEPS, "which creates the database")
    fraction = r.number("overwrite_fraction", d.overwrite_fraction, low=0, low_open=True, high=1)
    writer = r.number("writer_mb_per_s", d.writer_mb_per_s, low=0, high=1e6)
    sizes = KvSizes(
        keys=r.positive("keys", d.keys),
        key_size=r.positive("key_size", d.key_size),
        value_size=r.positive("value_size", d.value_size),
        threads=r.positive("threads", d.threads),
        seconds=r.positive("seconds", d.seconds, integer=False),
        short_seconds=r.positive("short_seconds", d.short_seconds, integer=False),
        writer_mb_per_s=writer,
        overwrite_fraction=fraction,
        range_len=r.positive("range_len", d.range_len),
        steps=tuple(steps),
        warmup_s=_seconds(r, "warmup_s"),
    )
    least = _KV["key_size"]["minimum"]
    if sizes.key_size < least:
        raise r.fail("key_size", f"must be at least {least} (keys hold an 8-byte number)")
    r.reject_unknown()
    return sizes


def read_insert(r: TableReader) -> InsertSizes:
    d = InsertSizes()
    steps = _steps(r, INSERT_STEPS, "which creates the tables")
    wait = _seconds(r, "cleanup_wait_s")
    sizes = InsertSizes(
        clients=r.positive("clients", d.clients),
        load_rows=r.positive("load_rows", d.load_rows),
        write_rows=r.positive("write_rows", d.write_rows),
        query_seconds=r.positive("query_seconds", d.query_seconds, integer=False),
        cleanup_wait_s=wait,
        steps=tuple(steps),
        warmup_s=_seconds(r, "warmup_s"),
    )
    if sizes.write_rows < 4:
        raise r.fail("write_rows", "must be at least 4 (l.i2 inserts a quarter of it)")
    r.reject_unknown()
    return sizes
