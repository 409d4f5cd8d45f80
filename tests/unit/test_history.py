"""The run history (store/history.py) and `dbregress history` (cli/history.py): run
folders written the way the runner and the cost lane write them (no engines), indexed,
queried, re-indexed, and a writer killed mid-transaction."""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import math
import os
import random
import re
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from dbregress.cli import history as cli
from dbregress.imports.common import Measured, Repeat, write_run
from dbregress.lab.file import load_lab
from dbregress.model.errors import DbregressError, StoreError
from dbregress.store import history as history_module
from dbregress.store.files import write_json
from dbregress.store.history import (
    FILENAME,
    History,
    history_path,
    host_fingerprint,
    reindex,
    run_folders,
)
from dbregress.store.replays import save_replay
from dbregress.store.run import RunWriter, read_run

LAB = """\
name = "nightly"
repeats = 3
order = "fixed"
placement = { server = "0", client = "0" }
[[column]]
label = "base"
build = "postgres@12.20.0"
[[column]]
label = "head"
build = "postgres@17.2.0"
[insert]
load_rows = 1000
write_rows = 100
query_seconds = 1
"""
HOST = {
    "hostname": "box1",
    "kernel": "Linux 6.1.0 #1 SMP",
    "machine": "x86_64",
    "cpu_model": "Test CPU",
    "cpu_count": 2,
    "cpu_affinity": [0, 1],
    "mem_total_bytes": 16 * 2**30 + 12345,
}
OTHER_HOST = {**HOST, "hostname": "box2", "cpu_model": "Other CPU", "cpu_count": 8}
STEPS = (("l.i0", "rows"), ("qp100", "ops"))
SCHEMA = json.loads((Path(__file__).parents[2] / "schema" / "step-result.schema.json").read_text())
QUIET_HOST = {
    "window_s": 10.0,
    "cpus": 2,
    "steal_s": 0.0,
    "busy_s": 1.0,
    "other_cpu_s": 0.0,
    "steal_frac": 0.0,
    "other_cpu_frac": 0.0,
    "cpu_mhz": [],
    "governor": None,
}


def result(label: str, name: str, q: float, repeat: int, unit: str = "rows") -> dict[str, Any]:
    """A stored step result as the runner writes it (schema/step-result.schema.json), on
    a quiet host."""
    op = "insert" if unit == "rows" else "point_query"
    return {
        "schema_version": 1,
        "kind": "step",
        "column": label,
        "repeat": repeat,
        "step": name,
        "status": "ok",
        "reported": True,
        "elapsed_s": 10.0,
        "q": {"op": op, "unit": unit, "count": int(q * 10), "value": q},
        "ops": {
            op: {
                "ops": int(q * 10),
                "rows": int(q * 10),
                "errors": 0,
                "target_rows_per_s": None,
                "latency_us": {"p50": 100, "p99": 900, "p999": 1500, "max": 4000, "mean": 120.5},
                "rows_per_s": q,
                "ops_per_s": q,
            }
        },
        "server": {
            "user_s": 1.0,
            "system_s": 0.2,
            "ctx_switches": 10,
            "read_bytes": 0,
            "write_bytes": 4096,
        },
        "client": None,
        "per_op": {
            "server_cpu_us": 5.0,
            "client_cpu_us": 2.5,
            "cs": 0.01,
            "rkb": 0.0,
            "wkb": 1.5,
            "ops_per_s": q,
        },
        "sla": None,
        "checks": {},
        "db_size_bytes": 0,
        "placement": {"mode": "separate", "server_cpus": [0], "client_cpus": [1]},
        "phases": {
            p: {"wall_s": 0.0, "server_cpu_s": None, "client_cpu_s": 0.0}
            for p in ("setup", "warmup", "checks")
        },
        "window": {"warmup_s": 0.0, "measured_s": 10.0},
        "host": dict(QUIET_HOST),
        "inject_slowdown": 0.0,
    }


def failed(label: str, name: str, repeat: int) -> dict[str, Any]:
    return {
        "schema_version": 1,
        "kind": "step",
        "column": label,
        "repeat": repeat,
        "step": name,
        "status": "failed",
        "error": {"type": "EngineCrashed", "message": "gone", "server_log_tail": ""},
    }


def make_run(
    root: Path,
    tmp: Path,
    run_id: str,
    started: str,
    qps: dict[str, float],
    host: dict[str, Any] | None = None,
    seed: int = 1,
    extra: dict[tuple[str, int, str], dict[str, Any]] | None = None,
    fail: tuple[str, int, str] | None = None,
) -> Path:
    """One run of the lab, laid out as RunWriter lays it out: every job (the warm-up
    too), both steps, QPS = qps[label] with 2% noise per repeat; `extra` merges into
    chosen step results, `fail` is a (label, repeat, step) whose step failed."""
    lab_path = tmp / "lab.toml"
    lab_path.write_text(LAB)
    lab = load_lab(lab_path)
    writer = RunWriter(root, lab, host or HOST)
    writer.record.update(run_id=run_id, started_at=started)
    rng = random.Random(seed)
    for job in lab.jobs():
        writer.set_job(job, {"status": "ok"})
        label = job.column.label
        for index, (name, unit) in enumerate(STEPS, start=1):
            key = (label, job.repeat, name)
            value = qps[label] * math.exp(rng.gauss(0, 0.02))
            r = result(label, name, value, job.repeat, unit)
            if key == fail:
                r = failed(label, name, job.repeat)
            r.update((extra or {}).get(key, {}))
            write_json(writer.job_dir(job) / "steps" / f"{index:02d}-{name}.json", r)
    writer.finish("ok")
    return writer.path


# The counted window met the timed one's state (analysis/state.py): a PostgreSQL replay
# whose state was not measured gets no cost verdict.
_WINDOW = {"kind": "postgres", "hits": None, "misses": 0.0, "ops": 1000}
MET = {
    "engine_state": {"counted": _WINDOW, "timed": _WINDOW, "tolerance_misses_per_op": None},
    "state_mismatch": None,
}


def replay(
    column: str, number: int, cycles: dict[str, float], status: str = "ok"
) -> dict[str, Any]:
    steps = {
        name: {
            "index": i,
            "per_op": {
                "instructions": c / 2,
                "estimated_cycles": c,
                "i1_misses": 1.0,
                "d1_read_misses": 2.0,
                "d1_write_misses": 3.0,
                "ll_read_misses": 0.5,
                "ll_write_misses": 0.25,
                "branch_mispredictions": 7.0,
                "system_calls": 0.1,
            },
            **MET,
        }
        for i, (name, c) in enumerate(cycles.items(), start=1)
    }
    return {
        "comparison": "insert",
        "column": column,
        "replay": number,
        "build": "x",
        "status": status,
        "steps": steps if status == "ok" else {},
    }


def dump(root: Path) -> dict[str, list[tuple[Any, ...]]]:
    with sqlite3.connect(history_path(root)) as db:
        return {
            t: sorted(db.execute(f"SELECT * FROM {t}").fetchall(), key=repr)
            for t in ("runs", "run_columns", "time_samples", "cost_samples")
        }


def test_the_fixtures_are_stored_step_results() -> None:
    for r in (result("base", "l.i0", 10.0, 1), result("head", "qp100", 5.0, 2, "ops")):
        jsonschema.validate(r, SCHEMA)
    jsonschema.validate(failed("base", "l.i0", 1), SCHEMA)


def test_a_run_is_indexed_with_its_measured_samples_only(tmp_path: Path) -> None:
    root = tmp_path / "results"
    disturbed = {"host": {**QUIET_HOST, "other_cpu_frac": 0.5, "other_cpu_s": 10.0}}
    run = make_run(
        root,
        tmp_path,
        "r1",
        "2026-01-01T03:00:00+0100",
        {"base": 1000.0, "head": 900.0},
        extra={("head", 2, "qp100"): disturbed},
        fail=("base", 3, "l.i0"),
    )
    with History(root) as h:
        done = h.index_run(run)
        assert done.time_samples == 2 * 3 * 2 - 1  # 2 columns x 3 repeats x 2 steps - failed
        assert h.labs() == ["nightly"]
        (info,) = h.runs("nightly")
        assert info.run_id == "r1" and info.kind == "native" and info.status == "ok"
        assert info.started == "2026-01-01T02:00:00Z"  # stored in UTC
        assert info.host == host_fingerprint(HOST) and info.hostname == "box1"
        assert info.path == run.name
    db = sqlite3.connect(history_path(root))
    rows = db.execute(
        "SELECT column, build, config, step, step_no, repeat, qps, cpu_us_per_op, "
        "write_kb_per_op, disturbed FROM time_samples ORDER BY column, step, repeat"
    ).fetchall()
    db.close()
    assert {r[5] for r in rows} == {1, 2, 3}  # the warm-up job (repeat 0) is left out
    assert ("base", 3, "l.i0") not in {(r[0], r[5], r[3]) for r in rows}  # failed: left out
    first = rows[0]
    assert first[:6] == ("base", "postgres@12.20.0", "default", "l.i0", 1, 1)
    assert 900 < first[6] < 1100 and first[7] == 5.0 and first[8] == 1.5
    assert [r[9] is not None for r in rows].count(True) == 1  # the disturbed step, marked
    with History(root) as h:
        (qp_head,) = [s for s in h.series("nightly", step="qp100") if s.column == "head"]
        (point,) = qp_head.points
        assert len(point.samples) == 2 and point.left_out == 1
        (kept,) = [s for s in h.series("nightly", "qp100", disturbed=True) if s.column == "head"]
        assert len(kept.points[0].samples) == 3


def test_indexing_again_gives_the_same_rows(tmp_path: Path) -> None:
    root = tmp_path / "results"
    run = make_run(root, tmp_path, "r1", "2026-01-01T03:00:00+0000", {"base": 10.0, "head": 9.0})
    save_replay(run, "base", 1, replay("base", 1, {"l.i0": 1000.0, "qp100": 500.0}))
    save_replay(run, "base", 2, replay("base", 2, {}, status="failed"))
    with History(root) as h:
        h.index_run(run)
    once = dump(root)
    assert len(once["cost_samples"]) == 2  # the failed replay is left out
    with History(root) as h:
        h.index_run(run)
    assert dump(root) == once
    # Step by step, as the runner indexes while it runs, then the lane's replays: the
    # same rows as the whole folder at once.
    history_path(root).unlink()
    data = read_run(run)
    with History(root) as h:
        for results in data.steps.values():
            for r in results:
                h.index_step(run, r)
        h.index_replay(run, replay("base", 1, {"l.i0": 1000.0, "qp100": 500.0}))
    assert dump(root) == once
    assert reindex(root) == []
    assert dump(root) == once


def test_series_over_runs_mark_the_change_point(tmp_path: Path) -> None:
    root = tmp_path / "results"
    for i in range(6):
        head = 1000.0 if i < 3 else 800.0  # head's QPS drops 20% from the fourth run
        make_run(
            root,
            tmp_path,
            f"run-{i}",
            f"2026-01-0{i + 1}T03:00:00+0000",
            {"base": 1000.0, "head": head},
            seed=i,
        )
    assert reindex(root) == []
    with History(root) as h:
        found = h.series("nightly", step="l.i0")
        assert [s.column for s in found] == ["base", "head"]
        assert [p.run_id for p in found[1].points] == [f"run-{i}" for i in range(6)]
        assert all(len(p.samples) == 3 for p in found[1].points)
        assert [len(s.points) for s in h.series("nightly")] == [6, 6, 6, 6]
    out = history_cli(["nightly", "--results", str(root), "--step", "l.i0"])
    rows = [line for line in out.splitlines() if line.startswith("| 2026")]
    assert len(rows) == 6
    marked = [r for r in rows if "▼" in r]
    assert len(marked) == 1 and "| run-3 |" in marked[0] and "slower" in marked[0]
    ratio = float(marked[0].split("▼")[1].split()[0])
    assert 0.75 < ratio < 0.85
    assert "(1.00)" in rows[0] and "▲" not in "".join(rows)
    assert "".join(rows).count("▼") == 1  # base stays flat: no mark


def test_the_time_lane_stays_on_a_host_class_and_the_cost_lane_crosses(tmp_path: Path) -> None:
    root = tmp_path / "results"
    runs = [
        make_run(root, tmp_path, "a", "2026-01-01T03:00:00+0000", {"base": 10.0, "head": 9.0}),
        make_run(
            root,
            tmp_path,
            "b",
            "2026-01-02T03:00:00+0000",
            {"base": 30.0, "head": 27.0},
            host=OTHER_HOST,
        ),
    ]
    for n, run in enumerate(runs):
        for r in (1, 2):
            save_replay(run, "base", r, replay("base", r, {"l.i0": 1000.0 + n + r}))
    reindex(root)
    with History(root) as h:
        time_lane = [s for s in h.series("nightly", "l.i0") if s.column == "base"]
        assert sorted(s.host or "" for s in time_lane) == sorted(
            [host_fingerprint(HOST) or "", host_fingerprint(OTHER_HOST) or ""]
        )
        assert all(len(s.points) == 1 for s in time_lane)
        (cost,) = h.series("nightly", "l.i0", lane="cost")
        assert cost.host is None and [p.run_id for p in cost.points] == ["a", "b"]
        assert cost.points[0].samples == (1001.0, 1002.0)
        assert [r.run_id for r in h.runs("nightly", host="box2")] == ["b"]
    out = history_cli(["nightly", "--results", str(root), "--lane", "cost"])
    assert "## insert / l.i0" in out and "1,002 (1.00)" in out and "host class" not in out


def test_host_fingerprint_names_the_machine_class() -> None:
    fp = host_fingerprint(HOST)
    assert fp is not None and len(fp) == 10
    # Another machine of the class, a new kernel, another pinning, MemTotal moved a little.
    same = {
        **HOST,
        "hostname": "box9",
        "kernel": "Linux 6.9",
        "cpu_affinity": [1],
        "mem_total_bytes": 16 * 2**30 - 50 * 2**20,
        "python": "3.12.1",
    }
    assert host_fingerprint(same) == fp
    assert host_fingerprint({**HOST, "cpu_model": "Other"}) != fp
    assert host_fingerprint({**HOST, "cpu_count": 4}) != fp
    assert host_fingerprint({}) is None and host_fingerprint(None) is None


def test_an_imported_run_is_indexed(tmp_path: Path) -> None:
    root = tmp_path / "results"
    reps = [
        Repeat("v1", (Measured("fillseq", 1000.0, "insert"),), "a.log"),
        Repeat("v2", (Measured("fillseq", 900.0, "insert"),), "b.log"),
    ]
    write_run(root, "imp", "db_bench", "kv", ["a.log", "b.log"], reps)
    assert reindex(root) == []
    with History(root) as h:
        (info,) = h.runs("imp")
        assert info.kind == "imported" and info.host is None and info.started is not None
        found = h.series("imp")
        assert [(s.column, s.points[0].samples) for s in found] == [
            ("v1", (1000.0,)),
            ("v2", (900.0,)),
        ]


def test_reindex_finds_runs_at_any_depth_and_names_what_it_skipped(tmp_path: Path) -> None:
    root = tmp_path / "results"
    make_run(root / "bisect" / "b1" / "runs", tmp_path, "deep", "2026-01-01T03:00:00+0000",
             {"base": 1.0, "head": 1.0})  # fmt: skip
    broken = root / "broken"
    broken.mkdir(parents=True)
    (broken / "run.json").write_text("{ truncated")
    hidden = root / ".x.importing"
    hidden.mkdir()
    (hidden / "run.json").write_text("{}")
    assert [p.name for p in run_folders(root)][1] == "broken"  # bisect/... sorts first
    warnings = reindex(root)
    assert len(warnings) == 1 and "broken" in warnings[0] and "not valid JSON" in warnings[0]
    with History(root) as h:
        assert h.labs() == ["nightly"]
        assert h.runs("nightly")[0].path.startswith("bisect/b1/runs/")


KILLED_LOOP = """
import json, sys
from pathlib import Path
from dbregress.store.history import History
from tests.unit.test_history import result
root, run = Path(sys.argv[1]), Path(sys.argv[2])
record = json.loads((run / "run.json").read_text())
with History(root) as h:
    i = 0
    while True:
        i += 1
        h.index_step(run, result("head", "l.i0", 100.0 + i, 1000 + i),
                     record=record, step_no=1)
        print(i, flush=True)
"""

KILLED_IN_TRANSACTION = """
import os, sqlite3, sys
db = sqlite3.connect(sys.argv[1], isolation_level=None)
db.execute("BEGIN IMMEDIATE")
db.execute("DELETE FROM time_samples")
db.execute("UPDATE runs SET status = 'ghost'")
db.execute("INSERT INTO runs(run_id, lab, status, kind, policy, path) "
           "VALUES ('ghost', 'ghost', 'ok', 'native', '{}', 'x')")
os._exit(9)
"""


def _python(code: str, *args: str, **kw: Any) -> subprocess.Popen[str]:
    paths = [str(Path(__file__).parents[2]), os.environ.get("PYTHONPATH", "")]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in paths if p)}
    return subprocess.Popen(
        [sys.executable, "-c", code, *args], env=env, text=True, cwd=Path(__file__).parents[2], **kw
    )


def test_a_writer_killed_in_a_transaction_leaves_every_committed_step(tmp_path: Path) -> None:
    root = tmp_path / "results"
    run = make_run(root, tmp_path, "r1", "2026-01-01T03:00:00+0000", {"base": 10.0, "head": 9.0})
    with History(root) as h:
        h.index_run(run)
    before = dump(root)
    proc = _python(KILLED_IN_TRANSACTION, str(history_path(root)))
    assert proc.wait(timeout=60) == 9
    assert dump(root) == before  # nothing of the transaction that did not commit
    # kill -9 a writer in the middle of its loop of index_step
    proc = _python(KILLED_LOOP, str(root), str(run), stdout=subprocess.PIPE)
    assert proc.stdout is not None
    committed = 0
    deadline = time.monotonic() + 300  # a busy host: fsync per commit
    while committed < 200 and time.monotonic() < deadline:
        committed = int(proc.stdout.readline())
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=60)
    # every line it printed was committed first: it may have run ahead of our reading
    for line in proc.stdout:
        committed = int(line)
    proc.stdout.close()
    assert committed >= 200
    db = sqlite3.connect(history_path(root))
    assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    repeats = [
        r[0] for r in db.execute("SELECT repeat FROM time_samples WHERE repeat > 1000 ORDER BY 1")
    ]
    db.close()
    # every step it said it committed, each whole; at most the one after it as well
    assert repeats[:committed] == list(range(1001, 1001 + committed))
    assert len(repeats) in (committed, committed + 1)
    with History(root) as h:  # and it opens, and writes, as before
        h.index_run(run)
    assert dump(root) == before


def test_a_history_of_another_schema_version_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "results"
    History(root).close()
    with sqlite3.connect(history_path(root)) as db:
        db.execute("UPDATE meta SET value = '99' WHERE key = 'schema_version'")
    db.close()
    with pytest.raises(StoreError) as e:
        History(root)
    text = str(e.value)
    assert str(history_path(root)) in text and "version 99" in text and "--reindex" in text
    history_path(root).write_bytes(b"not a database at all " * 100)
    with pytest.raises(StoreError, match="not a readable run history"):
        History(root)


def test_a_version_1_history_gains_the_method_columns_and_keeps_its_rows(tmp_path: Path) -> None:
    root = tmp_path / "results"
    root.mkdir()
    lines = history_module._SCHEMA.splitlines()
    v1 = [
        line for line in lines if "method" not in line and "v3:" not in line and "v4:" not in line
    ]
    v1 = [line for line in v1 if "cost_by_spec" not in line]  # what version 1 created
    v1 = [re.sub(r"^(\s+path TEXT NOT NULL),", r"\1", line) for line in v1]
    with sqlite3.connect(history_path(root)) as db:
        for statement in "\n".join(v1).split(";\n"):
            if statement.strip():
                db.execute(statement)
        db.execute("INSERT INTO meta(key, value) VALUES ('schema_version', '1')")
        db.execute(
            "INSERT INTO runs(run_id, lab, status, kind, policy, path) "
            "VALUES ('old', 'l', 'ok', 'native', '{}', 'old')"
        )
    db.close()
    with History(root) as h:
        (info,) = h.runs("l")
        assert info.run_id == "old" and info.method is None
    with sqlite3.connect(history_path(root)) as db:
        version = db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        assert version == ("4",)
        assert "method_key" in {r[1] for r in db.execute("PRAGMA table_info(time_samples)")}
    db.close()


def test_a_new_history_has_wal_and_its_version(tmp_path: Path) -> None:
    root = tmp_path / "results"
    with History(root):
        pass
    assert history_path(root).name == FILENAME
    db = sqlite3.connect(history_path(root))
    assert db.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    assert db.execute("SELECT value FROM meta").fetchall() == [("4",)]
    db.close()


def history_cli(argv: list[str]) -> str:
    p = argparse.ArgumentParser(prog="dbregress")
    sub = p.add_subparsers(dest="verb", required=True)
    cli.add_parser(sub)
    args = p.parse_args(["history", *argv])
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert args.func(args) == 0
    return out.getvalue()


def test_the_command_names_the_labs_it_knows(tmp_path: Path) -> None:
    root = tmp_path / "results"
    make_run(root, tmp_path, "r1", "2026-01-01T03:00:00+0000", {"base": 10.0, "head": 9.0})
    with pytest.raises(DbregressError) as e:
        history_cli(["nosuchlab", "--results", str(root), "--reindex"])
    assert "'nosuchlab'" in str(e.value) and "labs there: nightly" in str(e.value)
    with pytest.raises(DbregressError, match=r"its steps: l\.i0, qp100"):
        history_cli(["nightly", "--results", str(root), "--step", "nope"])
    lab_file = tmp_path / "lab.toml"  # a lab file names its lab
    assert "## insert / qp100" in history_cli([str(lab_file), "--results", str(root)])
