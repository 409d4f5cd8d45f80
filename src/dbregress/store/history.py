"""The run history: every run folder under a results root (native or imported), indexed
in one SQLite file, <results>/history.sqlite, so that a lab run again and again (a
nightly job) can be set against its earlier runs (docs/history.md).

The run folders stay the record; the history is an index of them that can always be
rebuilt from them (`reindex`). What it holds (store/history_db.py has the tables):

- runs: one row per run: lab, start and end (UTC), status, native or imported, the
  host's fingerprint (`host_fingerprint`) and name, the folder, and its method identity
  (`method`, JSON, and its key `method_key`: dbregress/method/identity.py);
- run_columns: the run's columns: comparison, build, config, position;
- time_samples: one row per measured step result (not the warm-up job, finished ok,
  reported): the step's QPS and its per-operation costs, and why the host disturbed it
  (NULL when it did not), as `analysis.compare.disturbance` tells, with the host and the
  method that measured it (on a fleet, the worker's: store/history_rows.py);
- cost_samples: one row per step of an ok counting replay: estimated cycles and the
  other counts per operation (analysis.cost.COST_METRICS), the method that counted it
  (the replay's own: on a fleet, the worker's) and what the count depends on (its
  counting method, scope, build and step as counted: the history floor's key,
  store/history_floor.py).

A series never sets samples of two methods against each other: `SeriesPoint.method` carries
the key (in the cost lane, the count key and the count's scope), and readers cut a series
where it changes (`method_segments`). Every read turns an SQLite error into a StoreError
that names the file.

Writing is store/history_index.py's (idempotent: a run indexed again, step by step or
whole, gives the same rows); the floor of the cost verdicts, store/history_floor.py's.
"""

from __future__ import annotations

import json
import os
import statistics
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, cast

from dbregress.analysis.cost_floors import Floors
from dbregress.model.errors import StoreError
from dbregress.shapes.method import MethodIdentity
from dbregress.store.history_db import (
    _SCHEMA,
    COST_COLUMNS,
    FILENAME,
    MIGRATIONS,
    SCHEMA_VERSION,
    TIME_METRICS,
    history_path,
)
from dbregress.store.history_floor import LAST_RUNS, Counted, FloorCell, cost_floors
from dbregress.store.history_index import Index, Indexed
from dbregress.store.history_rows import (
    FINGERPRINT_FACTS,
    host_fingerprint,
)

__all__ = [
    "COST_COLUMNS",
    "FILENAME",
    "FINGERPRINT_FACTS",
    "MIGRATIONS",
    "SCHEMA_VERSION",
    "TIME_METRICS",
    "_SCHEMA",
    "FloorCell",
    "History",
    "Indexed",
    "RunInfo",
    "SeriesPoint",
    "StepSeries",
    "history_path",
    "host_fingerprint",
    "index_into",
    "level",
    "method_segments",
    "reindex",
    "run_folders",
]

Lane = Literal["time", "cost"]


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
    method: MethodIdentity | None = None  # how it was measured (dbregress/method/identity.py)


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
    # The method that measured them (None: not recorded): time, its key (method.key);
    # cost, what the counts depend on (method.count_key) and their scope (COST_METHOD)
    method: str | None = None


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


@dataclass
class _Acc:
    """A SeriesPoint being gathered from rows."""

    run_id: str
    started: str | None
    host: str | None
    hostname: str | None
    build: str
    config: str
    methods: set[str | None] = field(default_factory=set)
    samples: list[float] = field(default_factory=list)
    left_out: int = 0

    @property
    def method(self) -> str | None:
        """The method of every sample of the point; where they differ (a fleet's replays
        of two identities, a run indexed from two attempts), a key of the mix, which no
        other point shares: a point of its own, never set against the runs around it."""
        if len(self.methods) == 1:
            return next(iter(self.methods))
        return "mixed:" + "+".join(sorted(str(m) for m in self.methods))

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


class History(Index):
    """The history file of a results root, opened (and created when missing). Use as a
    context manager, or close() it. One History per thread: a connection is not shared."""

    # Every read runs in `_reading` (store/history_db.py): an SQLite error is a
    # StoreError naming the file, never a traceback.

    def sample_digest(self, lab: str) -> str:
        """What the lab's samples are, in short (their count and sums per lane): a
        reader that keeps pages of the history (the site) rebuilds them when a run was
        indexed again with other samples."""
        sql = (
            "SELECT COUNT(*), TOTAL(t.{v}), TOTAL(t.{v} * t.{n}), "
            "SUM(t.{d} IS NOT NULL) FROM {table} t JOIN runs r ON r.run_id = t.run_id "
            "WHERE r.lab = ?"
        )
        out = []
        with self._reading():
            for v, n, d, table in (
                ("qps", "repeat", "disturbed", "time_samples"),
                ("est_cycles_per_op", "replay", "replay", "cost_samples"),
            ):
                q = sql.format(v=v, n=n, d=d, table=table)
                out.append(repr(self._db.execute(q, (lab,)).fetchone()))
        return " ".join(out)

    def run_ids(self) -> set[str]:
        with self._reading():
            return {r[0] for r in self._db.execute("SELECT run_id FROM runs")}

    def labs(self) -> list[str]:
        with self._reading():
            rows = self._db.execute("SELECT DISTINCT lab FROM runs ORDER BY lab").fetchall()
        return [r[0] for r in rows]

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
        with self._reading():
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

    def cost_floors(
        self,
        cells: Iterable[FloorCell],
        but: str,
        last: int = LAST_RUNS,
        taken: Iterable[Counted] = (),
    ) -> Floors:
        """The cost verdict's history floor of a run's steps (store/history_floor.py):
        each cell's spread over the latest `last` runs but `but` that counted its build
        and step by its counting method and scope, whatever their lab, without the
        replays `but` took from the count store (`taken`: its verdicts pool them)."""
        with self._reading():
            return cost_floors(self._db, cells, but, last, frozenset(taken))

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
        for row in self._select(sql, args):
            run_id, started, fp, hostname, comp, name, no, col, build, config = row[:10]
            v, why, position, how = row[10], row[11], row[12], row[13]
            place = no if no is not None else last
            step_order[(comp, name)] = min(step_order.get((comp, name), last), place)
            column_order[col] = min(column_order.get(col, last), position)
            group = fp if lane == "time" or host is not None else None
            runs = cells.setdefault((comp, name, col, group), {})
            acc = runs.get(run_id)
            if acc is None:
                acc = runs[run_id] = _Acc(run_id, started, fp, hostname, build, config)
            acc.methods.add(how)
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


# The cost lane's method of a sample: its count key and scope ("<count key> scope
# <scope>", a side not recorded "?"); NULL where neither was recorded.
COST_METHOD = (
    "CASE WHEN t.count_key IS NULL AND t.scope IS NULL THEN NULL "
    "ELSE COALESCE(t.count_key, '?') || ' scope ' || COALESCE(t.scope, '?') END"
)


def _series_query(
    lab: str, step: str | None, lane: Lane, host: str | None
) -> tuple[str, list[Any]]:
    """History.series's query: one row per sample of the lane, oldest run first."""
    # time: the host and method that measured each sample (a fleet's worker); cost: the
    # run's host, and what the count depends on (method.count_key, not dbregress's
    # version) with the count's scope: a count that fell back to another scope (the whole
    # engine for its calls only) counts other code, a method boundary as a new count key
    if lane == "time":
        value, number, extra = "t.qps", "t.repeat", "t.disturbed"
        table, where, how = "time_samples", "t", "t.method_key"
    elif lane == "cost":
        value, number, extra = "t.est_cycles_per_op", "t.replay", "NULL"
        table, where, how = "cost_samples", "r", COST_METHOD
    else:
        raise ValueError(f"unknown lane {lane!r}")
    sql = (
        f"SELECT r.run_id, r.started, {where}.host_fingerprint, {where}.hostname, "
        f"t.comparison, t.step, t.step_no, t.column, t.build, t.config, {value}, {extra}, "
        f"COALESCE(c.position, 0), {how} FROM {table} t "
        "JOIN runs r ON r.run_id = t.run_id "
        "LEFT JOIN run_columns c ON c.run_id = t.run_id AND c.column = t.column "
        f"WHERE r.lab = ? AND {value} IS NOT NULL"
    )
    args: list[Any] = [lab]
    if step is not None:
        sql += " AND t.step = ?"
        args.append(step)
    if host is not None:
        sql += f" AND ({where}.host_fingerprint = ? OR {where}.hostname = ?)"
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
