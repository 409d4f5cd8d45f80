"""The run history's writing: a run, a step result or a counting replay indexed into
<results>/history.sqlite (store/history_rows.py makes the rows, store/history_db.py
holds the tables). Indexing is idempotent: a run indexed again, step by step or whole,
gives the same rows.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from dbregress.method import identity as method
from dbregress.model.errors import StoreError
from dbregress.shapes.run import HostFacts
from dbregress.shapes.step_result import StepResultJson
from dbregress.store.history_db import Database
from dbregress.store.history_rows import (
    COST_INSERT,
    TIME_INSERT,
    cost_rows,
    host_fingerprint,
    run_id_of,
    step_numbers,
    time_row,
    utc,
)
from dbregress.store.replays import load_replays
from dbregress.store.run import read_record, read_run


class Stored(Protocol):
    """A step result object that gives its stored form (records.StepResult)."""

    def to_json(self) -> StepResultJson: ...


@dataclass(frozen=True)
class Indexed:
    """What index_run stored, and what it left out with why."""

    run_id: str
    time_samples: int
    cost_samples: int
    warnings: tuple[str, ...] = ()


class Index(Database):
    """The history's writing: a run, a step result or a counting replay indexed."""

    def _run_path(self, run_dir: Path) -> str:
        try:
            return run_dir.resolve().relative_to(self.root.resolve()).as_posix()
        except ValueError:
            return str(run_dir.resolve())

    def _put_run(self, run_dir: Path, record: Mapping[str, Any]) -> str:
        """Upsert the run's row and its columns; returns its id."""
        run_id = run_id_of(run_dir, record)
        imported = record.get("imported")
        started = utc(record.get("started_at"))
        if started is None and isinstance(imported, dict):
            started = utc(imported.get("imported_at"))
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
                utc(record.get("finished_at")),
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
        run_id = run_id_of(run_dir, record)
        try:
            column, repeat, name = str(result["column"]), int(result["repeat"]), str(result["step"])
            if step_no is None:
                step_no = step_numbers(run_dir, column, repeat).get(name)
            row = time_row(run_id, record, result, step_no)
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
                self._db.execute(TIME_INSERT, row)
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
        run_id = run_id_of(run_dir, record)
        try:
            rows = cost_rows(run_id, record, replay)
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
            self._db.executemany(COST_INSERT, rows)
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
        run_id = run_id_of(run_dir, record)
        time_rows = []
        numbers: dict[tuple[str, int], dict[str, int]] = {}
        try:
            for results in data.steps.values():
                for r in results:
                    job = (str(r["column"]), int(r["repeat"]))
                    if job not in numbers:
                        numbers[job] = step_numbers(run_dir, *job)
                    row = time_row(run_id, record, r, numbers[job].get(str(r["step"])))
                    if row is not None:
                        time_rows.append(row)
            counted = [row for rep in replays for row in cost_rows(run_id, record, rep)]
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            raise StoreError(
                f"{run_dir} holds a result dbregress cannot index ({type(e).__name__}: {e})"
            ) from e
        with self._transaction():
            for table in ("time_samples", "cost_samples", "run_columns", "runs"):
                self._db.execute(f"DELETE FROM {table} WHERE run_id = ?", (run_id,))
            self._put_run(run_dir, record)
            self._db.executemany(TIME_INSERT, time_rows)
            self._db.executemany(COST_INSERT, counted)
        return Indexed(run_id, len(time_rows), len(counted), tuple(warnings))

    def forget(self, run_id: str) -> None:
        """Remove a run from the history (its folder is not touched)."""
        with self._transaction():
            for table in ("time_samples", "cost_samples", "run_columns", "runs"):
                self._db.execute(f"DELETE FROM {table} WHERE run_id = ?", (run_id,))
