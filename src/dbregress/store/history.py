"""The run history: every run folder under a results root (native or imported), indexed
in one SQLite file, <results>/history.sqlite, so that a lab run again and again (a
nightly job) can be set against its earlier runs (docs/history.md).

The run folders stay the record; the history is an index of them that can always be
rebuilt from them (`reindex`). What it holds:

- runs: one row per run: lab, start and end (UTC), status, native or imported, the
  host's fingerprint (`host_fingerprint`) and name, the folder, and its method identity
  (`method`, JSON, and its key `method_key`: dbregress/method.py);
- run_columns: the run's columns: comparison, build, config, position;
- time_samples: one row per measured step result (not the warm-up job, finished ok,
  reported): the step's QPS and its per-operation costs, and why the host disturbed it
  (NULL when it did not), as `analysis.compare.disturbance` tells, and the key of the
  method that measured it;
- cost_samples: one row per step of an ok counting replay: estimated cycles and the
  other counts per operation (analysis.cost.COST_METRICS), and the key of the method
  that counted it (the replay's own: on a fleet, the host's).

A series never sets samples of two methods against each other: `SeriesPoint.method` carries
the key, and readers cut a series where it changes (`method_segments`).

Every write is one transaction (BEGIN IMMEDIATE ... COMMIT) in write-ahead-log mode: a
process killed at any point leaves the file readable, holding every transaction that
committed and nothing of the one that did not. Indexing is idempotent: a run indexed
again, step by step or whole, gives the same rows.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import sqlite3
import statistics
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import Any, Literal, Protocol, Self, cast

from dbregress import method
from dbregress.analysis.compare import disturbance, measured
from dbregress.analysis.cost import COST_METRICS, pooled_log_sd, value_of
from dbregress.errors import StoreError
from dbregress.shapes.method import MethodIdentity
from dbregress.shapes.run import HostFacts
from dbregress.shapes.step_result import StepResultJson
from dbregress.store.replays import load_replays
from dbregress.store.run import read_record, read_run
from dbregress.store.series import step_index

FILENAME = "history.sqlite"
# The version of the tables below. It changes whenever a table or the meaning of a
# column changes; a dbregress opens only the version it was written for (the history is
# rebuilt from the run folders, never migrated: `dbregress history LAB --reindex`).
SCHEMA_VERSION = 2
# Version 2 added the method identity (runs.method, runs.method_key, the samples'
# method_key); a version 1 file gains those columns, NULL (not recorded) in its rows.
MIGRATIONS = {
    "1": (
        "ALTER TABLE runs ADD COLUMN method TEXT",
        "ALTER TABLE runs ADD COLUMN method_key TEXT",
        "ALTER TABLE time_samples ADD COLUMN method_key TEXT",
        "ALTER TABLE cost_samples ADD COLUMN method_key TEXT",
    )
}
# How long a writer waits for another process's transaction before giving up.
BUSY_TIMEOUT_S = 30.0

Lane = Literal["time", "cost"]


class Stored(Protocol):
    """A step result object that gives its stored form (records.StepResult)."""

    def to_json(self) -> StepResultJson: ...


# The host facts that name a class of machine: the same processor model, core count,
# memory and architecture make the time lane's figures comparable. Left out: the host's
# name (two identical machines share a class), the kernel, governor, Python and ASLR (a
# change of those is a change the history should show, not a new machine) and anything
# that differs from run to run (the CPUs a run was pinned to).
FINGERPRINT_FACTS = ("machine", "cpu_model", "cpu_count", "mem_gib")

# time_samples column -> key of a step result's per_op
TIME_METRICS: tuple[tuple[str, str], ...] = (
    ("cpu_us_per_op", "server_cpu_us"),
    ("client_cpu_us_per_op", "client_cpu_us"),
    ("cs_per_op", "cs"),
    ("read_kb_per_op", "rkb"),
    ("write_kb_per_op", "wkb"),
    ("instructions_per_op", "server_instructions"),
    ("cycles_per_op", "server_cycles"),
)
# cost_samples column -> the cost lane's metric key
COST_COLUMNS: tuple[tuple[str, str], ...] = (
    ("est_cycles_per_op", "estimated_cycles"),
    ("instructions_per_op", "instructions"),
    ("l1_misses_per_op", "l1_misses"),
    ("ll_misses_per_op", "ll_misses"),
    ("mispredictions_per_op", "branch_mispredictions"),
    ("syscalls_per_op", "system_calls"),
)
_COST_METRIC = {m.key: m for m in COST_METRICS}

_SCHEMA = f"""
CREATE TABLE IF NOT EXISTS meta(
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS runs(
    run_id TEXT PRIMARY KEY,
    lab TEXT NOT NULL,
    started TEXT,            -- UTC, YYYY-MM-DDTHH:MM:SSZ (an import's: when it was imported)
    ended TEXT,
    status TEXT NOT NULL,    -- running | ok | failed | interrupted
    kind TEXT NOT NULL CHECK (kind IN ('native', 'imported')),
    host_fingerprint TEXT,   -- NULL when the run does not say (imports)
    hostname TEXT,
    kernel TEXT,
    policy TEXT NOT NULL,    -- the run's verdict policy, JSON
    path TEXT NOT NULL,      -- the run folder, relative to the results root when inside it
    method TEXT,             -- how it was measured, JSON (NULL: not recorded)
    method_key TEXT          -- dbregress.method.key of it
);
CREATE INDEX IF NOT EXISTS runs_by_lab ON runs(lab, started);
CREATE TABLE IF NOT EXISTS run_columns(
    run_id TEXT NOT NULL REFERENCES runs(run_id) ON DELETE CASCADE,
    column TEXT NOT NULL,
    position INTEGER NOT NULL,
    comparison TEXT NOT NULL,
    build TEXT NOT NULL,
    config TEXT NOT NULL,
    base INTEGER NOT NULL,
    PRIMARY KEY (run_id, column)
);
CREATE TABLE IF NOT EXISTS time_samples(
    run_id TEXT NOT NULL REFERENCES runs(run_id) ON DELETE CASCADE,
    comparison TEXT NOT NULL,
    column TEXT NOT NULL,
    build TEXT NOT NULL,
    config TEXT NOT NULL,
    step TEXT NOT NULL,
    step_no INTEGER,
    repeat INTEGER NOT NULL,
    qps REAL NOT NULL,
    q_unit TEXT,
    {", ".join(f"{c} REAL" for c, _ in TIME_METRICS)},
    disturbed TEXT,
    method_key TEXT,
    PRIMARY KEY (run_id, column, step, repeat)
);
CREATE TABLE IF NOT EXISTS cost_samples(
    run_id TEXT NOT NULL REFERENCES runs(run_id) ON DELETE CASCADE,
    comparison TEXT NOT NULL,
    column TEXT NOT NULL,
    build TEXT NOT NULL,
    config TEXT NOT NULL,
    step TEXT NOT NULL,
    step_no INTEGER,
    replay INTEGER NOT NULL,
    {", ".join(f"{c} REAL" for c, _ in COST_COLUMNS)},
    method_key TEXT,
    PRIMARY KEY (run_id, column, step, replay)
);
"""


def history_path(results_root: Path) -> Path:
    return results_root / FILENAME


def host_fingerprint(host: HostFacts | None) -> str | None:
    """A short hash of the host facts that name the machine's class (FINGERPRINT_FACTS);
    None when the run records none of them (an import). Memory is rounded to GiB: the
    kernel's reserve moves MemTotal by a few MiB between boots and kernels."""
    host = host or {}
    mem = host.get("mem_total_bytes")
    facts = {
        "machine": host.get("machine"),
        "cpu_model": host.get("cpu_model"),
        "cpu_count": host.get("cpu_count", host.get("cores")),
        "mem_gib": round(mem / 2**30) if isinstance(mem, int | float) else None,
    }
    if all(v is None for v in facts.values()):
        return None
    text = json.dumps(facts, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:10]


# -- what the queries give ------------------------------------------------------------


@dataclass(frozen=True)
class RunInfo:
    run_id: str
    lab: str
    started: str | None  # UTC, ISO 8601
    ended: str | None
    status: str
    kind: str  # native | imported
    host: str | None  # the host fingerprint
    hostname: str | None
    path: str
    policy: Mapping[str, Any]
    method: MethodIdentity | None = None  # how it was measured (dbregress/method.py)


@dataclass(frozen=True)
class SeriesPoint:
    """One run's samples of one (step, column): a point of a series."""

    run_id: str
    started: str | None
    host: str | None  # fingerprint
    hostname: str | None
    build: str
    config: str
    samples: tuple[float, ...]  # QPS per repeat (time) or est. cycles/op per replay (cost)
    left_out: int = 0  # measured samples the host disturbed, left out
    method: str | None = None  # key of the method that measured them (None: not recorded)


@dataclass(frozen=True)
class StepSeries:
    """One (step, column) of a lab over its runs, oldest first. The time lane's series
    stay on one host class (`host`); the cost lane's cross hosts (`host` is None unless
    the query asked for one)."""

    lane: str
    comparison: str
    step: str
    column: str
    host: str | None
    points: tuple[SeriesPoint, ...]

    @property
    def key(self) -> tuple[str, str, str, str | None]:
        return (self.comparison, self.step, self.column, self.host)

    def samples(self) -> list[list[float]]:
        return [list(p.samples) for p in self.points]


@dataclass(frozen=True)
class Indexed:
    """What index_run stored, and what it left out with why."""

    run_id: str
    time_samples: int
    cost_samples: int
    warnings: tuple[str, ...] = ()


# -- helpers --------------------------------------------------------------------------


def _utc(stamp: Any) -> str | None:
    """A run.json time (local with offset, as the writer stamps it) in UTC, so that
    runs from hosts in other time zones sort right."""
    if not isinstance(stamp, str) or not stamp:
        return None
    for fmt in ("%Y-%m-%dT%H:%M:%S%z", "%Y-%m-%dT%H:%M:%SZ"):
        try:
            moment = datetime.strptime(stamp, fmt)
        except ValueError:
            continue
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=UTC)
        return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return stamp


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def _positive(value: Any) -> float | None:
    v = _number(value)
    return v if v is not None and v > 0 else None


def _run_id(run_dir: Path, record: Mapping[str, Any]) -> str:
    return str(record.get("run_id") or run_dir.name)


def _step_numbers(run_dir: Path, column: str, repeat: int) -> dict[str, int]:
    """step -> its number (the NN of steps/NN-<step>.json) in one job's folder."""
    out = {}
    for step, files in step_index(run_dir / column / f"r{repeat}").items():
        head = files.json.name.partition("-")[0]
        if head.isdigit():
            out[step] = int(head)
    return out


@dataclass(frozen=True)
class _Column:
    comparison: str
    build: str
    config: str


def _columns(record: Mapping[str, Any]) -> dict[str, _Column]:
    return {
        c["label"]: _Column(
            str(c.get("comparison", "")), str(c.get("build", "unknown")), str(c.get("config", ""))
        )
        for c in record.get("columns", [])
    }


def _column_of(record: Mapping[str, Any], label: str) -> _Column:
    found = _columns(record).get(label)
    if found is not None:
        return found
    for comp in record.get("comparisons", []):  # a column missing from `columns`
        if label in comp.get("labels", []):
            return _Column(str(comp["name"]), "unknown", "")
    return _Column("", "unknown", "")


def _time_row(
    run_id: str, record: Mapping[str, Any], result: Mapping[str, Any], step_no: int | None
) -> tuple[Any, ...] | None:
    """The time_samples row of a step result; None when it measured nothing (the
    warm-up job, a failed or unreported step, no QPS)."""
    stored = cast(StepResultJson, result)  # a stored step result, whoever hands it over
    if not measured(stored):
        return None
    qps = _positive((result.get("q") or {}).get("value"))
    if qps is None:
        return None
    label = str(result["column"])
    col = _column_of(record, label)
    per_op = result.get("per_op") or {}
    return (
        run_id,
        col.comparison,
        label,
        col.build,
        col.config,
        str(result["step"]),
        step_no,
        int(result["repeat"]),
        qps,
        (result.get("q") or {}).get("unit"),
        *(_number(per_op.get(key)) for _, key in TIME_METRICS),
        disturbance(stored),
        method.key(record.get("method_identity")),
    )


def _cost_rows(
    run_id: str, record: Mapping[str, Any], replay: Mapping[str, Any]
) -> list[tuple[Any, ...]]:
    """The cost_samples rows of a counting replay: one per step; none for a failed one."""
    if replay.get("status") != "ok":
        return []
    label = str(replay["column"])
    col = _column_of(record, label)
    how = method.key(replay.get("method_identity") or record.get("method_identity"))
    rows = []
    for step, figures in (replay.get("steps") or {}).items():
        per_op = figures.get("per_op") or {}
        values = []
        for _, key in COST_COLUMNS:
            v = value_of(per_op, _COST_METRIC[key])
            values.append(v if v is not None and math.isfinite(v) else None)
        if all(v is None for v in values):
            continue
        index = figures.get("index")
        rows.append(
            (
                run_id,
                str(replay.get("comparison") or col.comparison),
                label,
                col.build,
                col.config,
                str(step),
                index if isinstance(index, int) else None,
                int(replay["replay"]),
                *values,
                how,
            )
        )
    return rows


_TIME_INSERT = (
    "INSERT OR REPLACE INTO time_samples(run_id, comparison, column, build, config, step, "
    f"step_no, repeat, qps, q_unit, {', '.join(c for c, _ in TIME_METRICS)}, disturbed, "
    f"method_key) VALUES ({', '.join('?' * (12 + len(TIME_METRICS)))})"
)
_COST_INSERT = (
    "INSERT OR REPLACE INTO cost_samples(run_id, comparison, column, build, config, step, "
    f"step_no, replay, {', '.join(c for c, _ in COST_COLUMNS)}, method_key) "
    f"VALUES ({', '.join('?' * (9 + len(COST_COLUMNS)))})"
)


@dataclass
class _Acc:
    """A SeriesPoint being gathered from rows."""

    run_id: str
    started: str | None
    host: str | None
    hostname: str | None
    build: str
    config: str
    method: str | None = None
    samples: list[float] = field(default_factory=list)
    left_out: int = 0

    def point(self) -> SeriesPoint:
        return SeriesPoint(
            self.run_id,
            self.started,
            self.host,
            self.hostname,
            self.build,
            self.config,
            tuple(self.samples),
            self.left_out,
            self.method,
        )


# -- the database ---------------------------------------------------------------------


class _Database:
    """The history file opened (created when missing, a version 1 file migrated) and
    its write transactions; _Index writes the runs into it, History reads them."""

    def __init__(self, results_root: Path) -> None:
        self.root = results_root
        self.path = history_path(results_root)
        try:
            results_root.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise StoreError(f"cannot create {results_root}: {e.strerror or e}") from e
        try:
            self._db = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_S, isolation_level=None)
        except sqlite3.Error as e:
            raise StoreError(f"cannot open the run history {self.path}: {e}") from e
        try:
            self._setup()
        except BaseException:
            self._db.close()
            raise

    def _setup(self) -> None:
        try:
            # WAL: readers never block the writer and a killed writer's uncommitted
            # pages never reach the database file. NORMAL: a commit is durable once the
            # log is written, a power cut may lose the last commits but never corrupts.
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.execute("PRAGMA foreign_keys=ON")
            tables = {
                row[0]
                for row in self._db.execute("SELECT name FROM sqlite_master WHERE type='table'")
            }
            if "meta" not in tables:
                if tables:
                    raise StoreError(
                        f"{self.path} is an SQLite file but not a dbregress run history; "
                        "move it away, then rebuild the history: dbregress history LAB --reindex"
                    )
                with self._transaction():
                    self._create()
            version = self._version()
            if version in MIGRATIONS:
                with self._transaction():
                    for statement in MIGRATIONS[version]:
                        self._db.execute(statement)
                    self._db.execute(
                        "UPDATE meta SET value = ? WHERE key = 'schema_version'",
                        (str(SCHEMA_VERSION),),
                    )
                version = self._version()
        except sqlite3.OperationalError as e:  # locked, read-only, out of space
            raise StoreError(f"cannot open the run history {self.path}: {e}") from e
        except sqlite3.DatabaseError as e:  # not an SQLite file, or a damaged one
            raise StoreError(
                f"{self.path} is not a readable run history ({e}); move it away, then "
                "rebuild it from the run folders: dbregress history LAB --reindex"
            ) from e
        if version != str(SCHEMA_VERSION):
            raise StoreError(
                f"{self.path} is a run history of schema version {version}; this dbregress "
                f"reads version {SCHEMA_VERSION}. Use the dbregress release that wrote it, "
                "or move the file away and rebuild the history from the run folders: "
                "dbregress history LAB --reindex"
            )

    def _create(self) -> None:
        # One statement at a time: executescript would commit the transaction first.
        for statement in _SCHEMA.split(";\n"):
            if statement.strip():
                self._db.execute(statement)
        self._db.execute(
            "INSERT OR IGNORE INTO meta(key, value) VALUES ('schema_version', ?)",
            (str(SCHEMA_VERSION),),
        )

    def _version(self) -> str | None:
        row = self._db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        return None if row is None else str(row[0])

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.close()

    @contextmanager
    def _transaction(self) -> Iterator[None]:
        """One write transaction: all of it reaches the file, or none of it. IMMEDIATE
        takes the write lock at the start, so two writers queue instead of failing."""
        try:
            self._db.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as e:
            raise StoreError(f"cannot write the run history {self.path}: {e}") from e
        try:
            yield
        except sqlite3.Error as e:
            if self._db.in_transaction:
                self._db.execute("ROLLBACK")
            raise StoreError(f"cannot write the run history {self.path}: {e}") from e
        except BaseException:
            if self._db.in_transaction:
                self._db.execute("ROLLBACK")
            raise
        try:
            self._db.execute("COMMIT")
        except sqlite3.Error as e:
            if self._db.in_transaction:
                self._db.execute("ROLLBACK")
            raise StoreError(f"cannot write the run history {self.path}: {e}") from e


class _Index(_Database):
    """The history's writing: a run, a step result or a counting replay indexed."""

    def _run_path(self, run_dir: Path) -> str:
        try:
            return run_dir.resolve().relative_to(self.root.resolve()).as_posix()
        except ValueError:
            return str(run_dir.resolve())

    def _put_run(self, run_dir: Path, record: Mapping[str, Any]) -> str:
        """Upsert the run's row and its columns; returns its id."""
        run_id = _run_id(run_dir, record)
        imported = record.get("imported")
        started = _utc(record.get("started_at"))
        if started is None and isinstance(imported, dict):
            started = _utc(imported.get("imported_at"))
        host: HostFacts = record.get("host") or HostFacts()
        policy = record.get("verdict_policy") or {}
        how = record.get("method_identity")
        self._db.execute(
            "INSERT INTO runs(run_id, lab, started, ended, status, kind, host_fingerprint, "
            "hostname, kernel, policy, path, method, method_key) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
            "ON CONFLICT(run_id) DO UPDATE SET lab = excluded.lab, started = excluded.started, "
            "ended = excluded.ended, status = excluded.status, kind = excluded.kind, "
            "host_fingerprint = excluded.host_fingerprint, hostname = excluded.hostname, "
            "kernel = excluded.kernel, policy = excluded.policy, path = excluded.path, "
            "method = excluded.method, method_key = excluded.method_key",
            (
                run_id,
                str(record.get("lab") or run_id),
                started,
                _utc(record.get("finished_at")),
                str(record.get("status") or "unknown"),
                "imported" if imported else "native",
                host_fingerprint(host),
                host.get("hostname"),
                host.get("kernel"),
                json.dumps(policy, sort_keys=True),
                self._run_path(run_dir),
                json.dumps(how, sort_keys=True) if how else None,
                method.key(how),
            ),
        )
        self._db.execute("DELETE FROM run_columns WHERE run_id = ?", (run_id,))
        self._db.executemany(
            "INSERT INTO run_columns(run_id, column, position, comparison, build, config, base) "
            "VALUES (?, ?, ?, ?, ?, ?, ?)",
            [
                (
                    run_id,
                    c["label"],
                    i,
                    str(c.get("comparison", "")),
                    str(c.get("build", "unknown")),
                    str(c.get("config", "")),
                    int(bool(c.get("base"))),
                )
                for i, c in enumerate(record.get("columns", []))
            ],
        )
        return run_id

    def index_step(
        self,
        run_dir: Path,
        result: Mapping[str, Any] | Stored,
        *,
        record: Mapping[str, Any] | None = None,
        step_no: int | None = None,
    ) -> bool:
        """Upsert one step result of the run in `run_dir` (one transaction), with the
        run's row as run.json (or `record`, the writer's copy) says now. A result that
        measured nothing removes that step's sample, if an earlier attempt left one.
        `step_no`: the NN of its file; found from the job's folder when not given.
        Returns whether a sample was stored. `result`: the stored form (a dict, as
        read_run gives it) or a step result object that gives it (to_json)."""
        if not isinstance(result, Mapping):
            result = result.to_json()
        if record is None:
            record = read_record(run_dir)
        run_id = _run_id(run_dir, record)
        try:
            column, repeat, name = str(result["column"]), int(result["repeat"]), str(result["step"])
            if step_no is None:
                step_no = _step_numbers(run_dir, column, repeat).get(name)
            row = _time_row(run_id, record, result, step_no)
        except (KeyError, TypeError, ValueError) as e:
            raise StoreError(
                f"a step result of {run_dir} cannot be indexed ({type(e).__name__}: {e})"
            ) from e
        with self._transaction():
            self._put_run(run_dir, record)
            if row is None:
                self._db.execute(
                    "DELETE FROM time_samples WHERE run_id = ? AND column = ? AND step = ? "
                    "AND repeat = ?",
                    (run_id, column, name, repeat),
                )
            else:
                self._db.execute(_TIME_INSERT, row)
        return row is not None

    def index_replay(
        self,
        run_dir: Path,
        replay: Mapping[str, Any],
        *,
        record: Mapping[str, Any] | None = None,
    ) -> int:
        """Upsert one counting replay (a cost/<column>/rN.json record) of the run; a
        failed replay removes what an earlier attempt of that number stored. Returns the
        rows stored."""
        if record is None:
            record = read_record(run_dir)
        run_id = _run_id(run_dir, record)
        try:
            rows = _cost_rows(run_id, record, replay)
            column, number = str(replay["column"]), int(replay["replay"])
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            raise StoreError(
                f"a cost replay of {run_dir} cannot be indexed ({type(e).__name__}: {e})"
            ) from e
        with self._transaction():
            self._put_run(run_dir, record)
            self._db.execute(
                "DELETE FROM cost_samples WHERE run_id = ? AND column = ? AND replay = ?",
                (run_id, column, number),
            )
            self._db.executemany(_COST_INSERT, rows)
        return len(rows)

    def index_run(self, run_dir: Path) -> Indexed:
        """Index everything in a run folder, replacing what the history held of the run
        (one transaction): the same folder always gives the same rows. A damaged step
        file or unreadable cost record is left out and named in `warnings`; an
        unreadable run.json raises StoreError."""
        data = read_run(run_dir)
        warnings = list(data.damaged)
        try:
            replays = load_replays(run_dir)
        except StoreError as e:
            replays = []
            warnings.append(f"cost lane left out: {e}")
        record = data.record
        run_id = _run_id(run_dir, record)
        time_rows = []
        numbers: dict[tuple[str, int], dict[str, int]] = {}
        try:
            for results in data.steps.values():
                for r in results:
                    job = (str(r["column"]), int(r["repeat"]))
                    if job not in numbers:
                        numbers[job] = _step_numbers(run_dir, *job)
                    row = _time_row(run_id, record, r, numbers[job].get(str(r["step"])))
                    if row is not None:
                        time_rows.append(row)
            cost_rows = [row for rep in replays for row in _cost_rows(run_id, record, rep)]
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            raise StoreError(
                f"{run_dir} holds a result dbregress cannot index ({type(e).__name__}: {e})"
            ) from e
        with self._transaction():
            for table in ("time_samples", "cost_samples", "run_columns", "runs"):
                self._db.execute(f"DELETE FROM {table} WHERE run_id = ?", (run_id,))
            self._put_run(run_dir, record)
            self._db.executemany(_TIME_INSERT, time_rows)
            self._db.executemany(_COST_INSERT, cost_rows)
        return Indexed(run_id, len(time_rows), len(cost_rows), tuple(warnings))

    def forget(self, run_id: str) -> None:
        """Remove a run from the history (its folder is not touched)."""
        with self._transaction():
            for table in ("time_samples", "cost_samples", "run_columns", "runs"):
                self._db.execute(f"DELETE FROM {table} WHERE run_id = ?", (run_id,))


class History(_Index):
    """The history file of a results root, opened (and created when missing). Use as a
    context manager, or close() it. One History per thread: a connection is not shared."""

    def run_ids(self) -> set[str]:
        return {r[0] for r in self._db.execute("SELECT run_id FROM runs")}

    def labs(self) -> list[str]:
        return [r[0] for r in self._db.execute("SELECT DISTINCT lab FROM runs ORDER BY lab")]

    def runs(self, lab: str, host: str | None = None) -> list[RunInfo]:
        """The lab's runs, oldest first; `host`: a fingerprint or a host name."""
        sql = (
            "SELECT run_id, lab, started, ended, status, kind, host_fingerprint, hostname, "
            "path, policy, method FROM runs WHERE lab = ?"
        )
        args: list[Any] = [lab]
        if host is not None:
            sql += " AND (host_fingerprint = ? OR hostname = ?)"
            args += [host, host]
        sql += " ORDER BY started IS NULL, started, run_id"
        out = []
        for row in self._db.execute(sql, args).fetchall():
            run_id, lab_, started, ended, status, kind, fp, hostname, path, policy, how = row
            out.append(
                RunInfo(
                    run_id,
                    lab_,
                    started,
                    ended,
                    status,
                    kind,
                    fp,
                    hostname,
                    path,
                    json.loads(policy),
                    cast(MethodIdentity, json.loads(how)) if how else None,
                )
            )
        return out

    def cost_noise(
        self, lab: str, method_key: str | None, but: str, last: int = 10
    ) -> dict[str, dict[str, float]]:
        """The measured spread of each counted step in the lab's earlier runs of one
        method identity (the cost verdict's history floor): per metric and
        "comparison/step", the pooled within-build standard deviation of log counts,
        each (run, column) one group; from the `last` runs before `but` of that method.
        Empty without a method key (a run that recorded none is not comparable)."""
        if method_key is None:
            return {}
        runs = [
            r[0]
            for r in self._db.execute(
                "SELECT r.run_id FROM runs r WHERE r.lab = ? AND r.run_id != ? AND "
                "r.run_id IN (SELECT run_id FROM cost_samples WHERE method_key = ?) "
                "ORDER BY r.started IS NULL, r.started DESC, r.run_id DESC LIMIT ?",
                (lab, but, method_key, last),
            )
        ]
        if not runs:
            return {}
        names = ", ".join(c for c, _ in COST_COLUMNS)
        groups: dict[str, dict[str, dict[tuple[str, str], list[float]]]] = {}
        rows = self._db.execute(
            f"SELECT run_id, column, comparison, step, {names} FROM cost_samples "
            f"WHERE method_key = ? AND run_id IN ({', '.join('?' * len(runs))})",
            (method_key, *runs),
        )
        for run_id, column, comparison, step, *values in rows:
            for (_, key), v in zip(COST_COLUMNS, values, strict=True):
                if v is not None and v > 0:
                    cell = groups.setdefault(key, {}).setdefault(f"{comparison}/{step}", {})
                    cell.setdefault((run_id, column), []).append(float(v))
        out: dict[str, dict[str, float]] = {}
        for key, steps in groups.items():
            found = {s: sd for s, cells in steps.items() if (sd := pooled_log_sd(cells.values()))}
            if found:
                out[key] = found
        return out

    def series(
        self,
        lab: str,
        step: str | None = None,
        lane: Lane = "time",
        host: str | None = None,
        disturbed: bool = False,
    ) -> list[StepSeries]:
        """Per (comparison, step, column), and per host class in the time lane: the
        runs' samples, oldest run first. Time: QPS per repeat, samples the host disturbed
        left out (counted in `left_out`) unless `disturbed`; cost: est. cycles/op per ok
        replay. Steps in the order they ran, columns in the lab's order."""
        sql, args = _series_query(lab, step, lane, host)
        step_order: dict[tuple[str, str], int] = {}
        column_order: dict[str, int] = {}
        cells: dict[tuple[str, str, str, str | None], dict[str, _Acc]] = {}
        last = 1 << 30  # the place of a step with no number, a column with no position
        for row in self._db.execute(sql, args):
            run_id, started, fp, hostname, comp, name, no, col, build, config = row[:10]
            v, why, position, how = row[10], row[11], row[12], row[13]
            place = no if no is not None else last
            step_order[(comp, name)] = min(step_order.get((comp, name), last), place)
            column_order[col] = min(column_order.get(col, last), position)
            group = fp if lane == "time" or host is not None else None
            runs = cells.setdefault((comp, name, col, group), {})
            acc = runs.get(run_id)
            if acc is None:
                acc = runs[run_id] = _Acc(run_id, started, fp, hostname, build, config, how)
            if why is not None and not disturbed:
                acc.left_out += 1
            else:
                acc.samples.append(float(v))
        out = [
            StepSeries(lane, comp, name, col, group, tuple(a.point() for a in runs.values()))
            for (comp, name, col, group), runs in cells.items()
        ]
        out.sort(
            key=lambda s: (
                step_order[(s.comparison, s.step)],
                s.comparison,
                s.step,
                s.host or "",
                column_order[s.column],
                s.column,
            )
        )
        return out


def _series_query(
    lab: str, step: str | None, lane: Lane, host: str | None
) -> tuple[str, list[Any]]:
    """History.series's query: one row per sample of the lane, oldest run first."""
    if lane == "time":
        value, number, extra = "t.qps", "t.repeat", "t.disturbed"
        table = "time_samples"
    elif lane == "cost":
        value, number, extra = "t.est_cycles_per_op", "t.replay", "NULL"
        table = "cost_samples"
    else:
        raise ValueError(f"unknown lane {lane!r}")
    sql = (
        f"SELECT r.run_id, r.started, r.host_fingerprint, r.hostname, t.comparison, "
        f"t.step, t.step_no, t.column, t.build, t.config, {value}, {extra}, "
        f"COALESCE(c.position, 0), t.method_key FROM {table} t "
        "JOIN runs r ON r.run_id = t.run_id "
        "LEFT JOIN run_columns c ON c.run_id = t.run_id AND c.column = t.column "
        f"WHERE r.lab = ? AND {value} IS NOT NULL"
    )
    args: list[Any] = [lab]
    if step is not None:
        sql += " AND t.step = ?"
        args.append(step)
    if host is not None:
        sql += " AND (r.host_fingerprint = ? OR r.hostname = ?)"
        args += [host, host]
    sql += f" ORDER BY r.started IS NULL, r.started, r.run_id, {number}"
    return sql, args


def method_segments(s: StepSeries) -> list[StepSeries]:
    """The series cut where the method that measured it changes: each piece holds
    consecutive runs of one method identity, oldest first. Runs that recorded none (made
    before identities were stored) form pieces of their own."""
    pieces: list[list[SeriesPoint]] = []
    for p in s.points:
        if pieces and pieces[-1][-1].method == p.method:
            pieces[-1].append(p)
        else:
            pieces.append([p])
    return [StepSeries(s.lane, s.comparison, s.step, s.column, s.host, tuple(ps)) for ps in pieces]


def level(samples: tuple[float, ...] | list[float], lane: str) -> float | None:
    """A run's figure for a table cell: the median QPS of its repeats (time), the mean
    estimated cycles per operation of its replays (cost)."""
    if not samples:
        return None
    return statistics.median(samples) if lane == "time" else statistics.fmean(samples)


def run_folders(results_root: Path) -> Iterator[Path]:
    """Every run folder (a folder holding run.json) under the root, at any depth (a
    bisection keeps its runs deeper), in path order. Hidden folders (an import being
    written) and the inside of a run folder are not searched."""
    for top, dirs, files in os.walk(results_root):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        if "run.json" in files:
            dirs[:] = []
            yield Path(top)


def reindex(results_root: Path, prune: bool = False) -> list[str]:
    """Index every run folder under the root; returns a warning per run folder that
    does not read (left out) and per damaged file left out. With `prune`, the runs whose
    folders are gone leave the history too; by default they stay (the history outlives
    the folders a user deletes to save space)."""
    if not results_root.is_dir():
        raise StoreError(f"{results_root} is not a folder; run a lab first: dbregress run LAB")
    warnings: list[str] = []
    found: set[str] = set()
    with History(results_root) as history:
        for folder in run_folders(results_root):
            try:
                done = history.index_run(folder)
            except StoreError as e:
                warnings.append(f"left out {folder}: {e}")
                continue
            found.add(done.run_id)
            warnings += [f"{folder}: {w}" for w in done.warnings]
        if prune:
            for run_id in history.run_ids() - found:
                history.forget(run_id)
    return warnings


def index_into(
    results_root: Path,
    write: Callable[[History], object],
    notify: Callable[[str], None],
    *,
    existing_only: bool = False,
) -> None:
    """Update the run history of `results_root` with `write`. The history is an index of
    the run folders (`dbregress history LAB --reindex` rebuilds it), so a failure is told
    through `notify`, never raised over the run that was being recorded. existing_only:
    only where the history file exists already (a run folder whose runner kept no
    history, as a bisection's runs, gets none)."""
    if existing_only and not history_path(results_root).is_file():
        return
    try:
        with History(results_root) as history:
            write(history)
    except StoreError as e:
        notify(f"run history not updated: {e}")
