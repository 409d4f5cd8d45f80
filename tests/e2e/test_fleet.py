"""A fleet on this machine: a Dask scheduler and two `dbregress worker` processes on the
loopback, a lab with real PostgreSQL run across them, one worker killed outright in the
middle of a unit. The unit runs again on the other worker; every job ends with its steps
in the coordinator's run folder and history, and no process is left."""

from __future__ import annotations

import json
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.e2e.conftest import cli_env, processes_mentioning, run_record, step_results, wait_for

pytestmark = pytest.mark.engine

LAB = """\
name = "fleet"
placement = "unpinned"
repeats = 2
count = false
schedule = "interleaved"
slice_ms = 50

[[comparison]]
name = "pg"
benchmark = "insert"
[[comparison.column]]
label = "pa"
build = "postgres@17.2.0"
[[comparison.column]]
label = "pb"
build = "postgres@17.2.0"
[comparison.insert]
clients = 1
load_rows = 20000
write_rows = 2000
query_seconds = 1
warmup_s = 0.2
cleanup_wait_s = 0.5
"""


STEPS = ["l.i0", "l.x", "l.i1", "l.i2", "cleanup"] + [
    f"q{kind}{rate}" for rate in (100, 500, 1000) for kind in ("r", "p")
]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _start(args: list[str], cwd: Path, workdir: Path, log: Path) -> subprocess.Popen[bytes]:
    with log.open("wb") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "dbregress.cli.main", *args],
            cwd=cwd,
            env=cli_env(workdir),
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def test_a_lab_survives_a_worker_killed_mid_unit(tmp_path: Path, workdir: Path) -> None:
    port = _free_port()
    address = f"tcp://127.0.0.1:{port}"
    (tmp_path / "lab.toml").write_text(LAB)
    procs: dict[str, subprocess.Popen[bytes]] = {}
    try:
        procs["scheduler"] = _start(
            ["scheduler", "--port", str(port), "--dashboard", "none"],
            tmp_path,
            workdir,
            tmp_path / "scheduler.log",
        )
        wait_for(
            lambda: "scheduler at" in (tmp_path / "scheduler.log").read_text(), 60, "scheduler"
        )
        for name in ("w1", "w2"):
            procs[name] = _start(
                ["worker", "--scheduler", address, "--name", name, "--listen", "127.0.0.1"],
                tmp_path,
                workdir,
                tmp_path / f"{name}.log",
            )
        for name in ("w1", "w2"):
            log = tmp_path / f"{name}.log"
            wait_for(lambda log=log: f"worker {log.stem}" in log.read_text(), 60, name)
        coordinator = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "dbregress.cli.main",
                "run",
                "lab.toml",
                "--scheduler",
                address,
            ],
            cwd=tmp_path,
            env=cli_env(workdir),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        procs["coordinator"] = coordinator  # type: ignore[assignment]

        # Kill the first worker that is in the middle of a round: it has sent a step of it.
        def victim() -> str | None:
            runs = list((tmp_path / "results").glob("*/run.json"))
            if not runs:
                return None
            record = json.loads(runs[0].read_text())
            for job, info in record["jobs"].items():
                done = list((runs[0].parent / job / "steps").glob("0[1-3]-*.json"))
                if not job.endswith("/r0") and info.get("host") and done:
                    return str(info["host"])
            return None

        wait_for(victim, 300, "a worker in the middle of a round")
        killed = victim()
        assert killed in ("w1", "w2")
        os.kill(procs[killed].pid, signal.SIGKILL)
        procs[killed].wait()

        _out, err = coordinator.communicate(timeout=900)
        assert coordinator.returncode == 0, err[-3000:]
        assert "started again on" in err, err  # the killed worker's round moved
        run, record = run_record(tmp_path)
        assert record["status"] == "ok"
        assert record["failures"] == []
        jobs = {"pa/r0", "pa/r1", "pb/r1", "pa/r2", "pb/r2"}
        assert set(record["jobs"]) == jobs
        survivor = "w2" if killed == "w1" else "w1"
        moved = 0
        steps = {}
        for job in jobs:
            info = record["jobs"][job]
            assert info["status"] == "ok"
            moved += info["host"] == survivor
            steps[job] = step_results(run, job)
            assert list(steps[job]) == STEPS, job
            assert all(r["status"] == "ok" for r in steps[job].values())
            assert (run / job / "server.log").stat().st_size > 0
        assert moved >= 3  # the killed worker's round ran again on the survivor
        assert set(record["hosts"]) == {"w1", "w2"}

        # Every step is in the coordinator's history, once.
        db = sqlite3.connect(tmp_path / "results" / "history.sqlite")
        rows = db.execute(
            "SELECT column, repeat, step FROM time_samples WHERE run_id = ?", (run.name,)
        ).fetchall()
        db.close()
        assert len(rows) == len(set(rows))
        measured = {(lb, rep) for lb, rep, _ in rows}
        assert measured >= {("pa", 1), ("pb", 1), ("pa", 2), ("pb", 2)}

        # Paired verdicts came out of rounds that each ran whole on one host.
        verdicts = json.loads((run / "verdicts.json").read_text())
        assert verdicts["comparisons"]
    finally:
        for name, proc in procs.items():
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM if name != "coordinator" else signal.SIGKILL)
        for proc in procs.values():
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
    deadline = time.monotonic() + 15
    while processes_mentioning(str(workdir)) and time.monotonic() < deadline:
        time.sleep(0.3)
    assert processes_mentioning(str(workdir)) == []
