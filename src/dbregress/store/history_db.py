"""The run history's file: <results>/history.sqlite, its tables, its versions and its
write transactions (store/history.py indexes runs into it and reads them back).

Every write is one transaction (BEGIN IMMEDIATE ... COMMIT) in write-ahead-log mode: a
process killed at any point leaves the file readable, holding every transaction that
committed and nothing of the one that did not.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import TracebackType
from typing import Any, Self

from dbregress.method import identity as method
from dbregress.model.errors import StoreError

FILENAME = "history.sqlite"
# The version of the tables below. It changes whenever a table or the meaning of a
# column changes; a dbregress opens only the version it was written for, after the
# migrations below (the history can always be rebuilt from the run folders:
# `dbregress history LAB --reindex`).
SCHEMA_VERSION = 4
# How long a writer waits for another process's transaction before giving up.
BUSY_TIMEOUT_S = 30.0

# One row per measured step result: the metrics of its per_op, stored by these names.
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
    method_key TEXT          -- dbregress.method.identity.key of it
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
    method_key TEXT,         -- of the method of the host that measured it
    host_fingerprint TEXT,   -- v3: the host that measured it (a fleet's worker, else the run's)
    hostname TEXT,           -- v3: its name
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
    method_key TEXT,         -- of the replay's own method (on a fleet, its worker's)
    count_key TEXT,          -- v3: method.count_key of it: what the count depends on
    scope TEXT,              -- v3: engine-calls | sessions | engine (explain/jobs.py)
    build_key TEXT,          -- v3: method.build_key of the column's build identity
    spec_key TEXT,           -- v3: method.step_key of the step as counted (NULL: not recorded)
    counted_in TEXT,         -- v4: the run that counted it, when taken from the count store
    PRIMARY KEY (run_id, column, step, replay)
);
CREATE INDEX IF NOT EXISTS cost_by_spec ON cost_samples(spec_key, build_key, count_key);
"""


def _rekey(db: sqlite3.Connection) -> None:
    """The runs' and samples' method keys as method.key computes them now (a version 2
    file's were computed without cpu_features)."""
    rows = db.execute("SELECT run_id, method, method_key FROM runs WHERE method IS NOT NULL")
    for run_id, how, old in rows.fetchall():
        new = method.key(json.loads(how))
        if new == old:
            continue
        db.execute("UPDATE runs SET method_key = ? WHERE run_id = ?", (new, run_id))
        for table in ("time_samples", "cost_samples"):
            db.execute(
                f"UPDATE {table} SET method_key = ? WHERE run_id = ? AND method_key = ?",
                (new, run_id, old),
            )


Step = str | Callable[[sqlite3.Connection], None]
# version -> (the version it becomes, its statements). Version 2 added the method
# identity (runs.method, runs.method_key, the samples' method_key; NULL, not recorded,
# in a version 1 file's rows). Version 3 added the host of each time sample (filled in
# from its run's: a fleet's rows get their workers' at `--reindex`) and what each cost
# sample was counted by and of (count_key, scope, build_key, spec_key: NULL until
# `--reindex`, and NULL then for replays that did not record them). Version 4 added
# counted_in: the run a replay taken from the count store was counted in (NULL: the
# row's own run counted it), so the history floor pools each count once.
MIGRATIONS: dict[str, tuple[str, tuple[Step, ...]]] = {
    "1": (
        "2",
        (
            "ALTER TABLE runs ADD COLUMN method TEXT",
            "ALTER TABLE runs ADD COLUMN method_key TEXT",
            "ALTER TABLE time_samples ADD COLUMN method_key TEXT",
            "ALTER TABLE cost_samples ADD COLUMN method_key TEXT",
        ),
    ),
    "2": (
        "3",
        (
            "ALTER TABLE time_samples ADD COLUMN host_fingerprint TEXT",
            "ALTER TABLE time_samples ADD COLUMN hostname TEXT",
            "UPDATE time_samples SET (host_fingerprint, hostname) = (SELECT "
            "r.host_fingerprint, r.hostname FROM runs r WHERE r.run_id = time_samples.run_id)",
            "ALTER TABLE cost_samples ADD COLUMN count_key TEXT",
            "ALTER TABLE cost_samples ADD COLUMN scope TEXT",
            "ALTER TABLE cost_samples ADD COLUMN build_key TEXT",
            "ALTER TABLE cost_samples ADD COLUMN spec_key TEXT",
            "CREATE INDEX IF NOT EXISTS cost_by_spec ON cost_samples(spec_key, build_key, "
            "count_key)",
            _rekey,
        ),
    ),
    "3": ("4", ("ALTER TABLE cost_samples ADD COLUMN counted_in TEXT",)),
}


def history_path(results_root: Path) -> Path:
    return results_root / FILENAME


class Database:
    """The history file opened (created when missing, an older version migrated) and
    its write transactions; store/history.py writes the runs into it and reads them."""

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
            while version in MIGRATIONS:
                after, steps = MIGRATIONS[version]
                with self._transaction():
                    for statement in steps:
                        if callable(statement):
                            statement(self._db)
                        else:
                            self._db.execute(statement)
                    self._db.execute(
                        "UPDATE meta SET value = ? WHERE key = 'schema_version'", (after,)
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
    def _reading(self) -> Iterator[None]:
        """A read of the history: an SQLite error (the file locked past the busy
        timeout, a damaged page, a table missing) becomes a StoreError naming the file,
        which readers report in a line, as any other store error."""
        try:
            yield
        except sqlite3.Error as e:
            raise StoreError(
                f"cannot read the run history {self.path}: {e}; if it is damaged, move it "
                "away and rebuild it from the run folders: dbregress history LAB --reindex"
            ) from e
        except json.JSONDecodeError as e:  # a stored JSON column that does not parse
            raise StoreError(
                f"the run history {self.path} holds a damaged row ({e}); rebuild it from "
                "the run folders: dbregress history LAB --reindex"
            ) from e

    def _select(self, sql: str, args: Sequence[Any] = ()) -> Iterator[tuple[Any, ...]]:
        """The rows of a query, read as they are used (`_reading`'s errors)."""
        with self._reading():
            yield from self._db.execute(sql, args)

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
