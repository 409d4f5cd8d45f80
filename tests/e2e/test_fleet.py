"""A fleet on this machine: a Dask scheduler and two `dbregress worker` processes on the
loopback, a lab with real PostgreSQL run across them, one worker killed outright in the
middle of a unit. The unit runs again on the other worker; every job ends with its steps
in the coordinator's run folder and history, and no process is left. A fleet with TLS
runs a lab for the processes holding its certificates and refuses every other."""

from __future__ import annotations

import functools
import json
import os
import shutil
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

# The load and two query steps: what the fleet must carry is the same for every step.
STEPS = ["l.i0", "l.x", "l.i1", "l.i2", "cleanup", "qr100", "qp100"]
LAB = f"""\
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
query_seconds = 0.5
warmup_s = 0.2
cleanup_wait_s = 0.5
steps = {json.dumps(STEPS)}
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _says(log: Path, text: str) -> bool:
    return text in log.read_text()


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


class Fleet:
    """A scheduler and named workers, each a process of its own, on the loopback; with
    `certs` (a folder of `dbregress fleet-certs`), on TLS: the scheduler and the
    coordinator use the host `coord`'s folder, each worker its own name's."""

    def __init__(self, tmp_path: Path, workdir: Path, certs: Path | None = None) -> None:
        self.tmp, self.workdir, self.certs = tmp_path, workdir, certs
        self.port = _free_port()
        scheme = "tls" if certs else "tcp"
        self.address = f"{scheme}://127.0.0.1:{self.port}"
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.starts = 0

    def tls(self, host: str) -> list[str]:
        return ["--tls", str(self.certs / host)] if self.certs else []

    def start_scheduler(self) -> None:
        log = self.tmp / "scheduler.log"
        args = ["scheduler", "--port", str(self.port), "--dashboard", "none", *self.tls("coord")]
        self.procs["scheduler"] = _start(args, self.tmp, self.workdir, log)
        wait_for(functools.partial(_says, log, "scheduler at"), 60, "the scheduler")

    def start_worker(self, *names: str) -> None:
        """Start the named workers together, then wait until each has joined."""
        logs = {}
        for name in names:
            self.starts += 1
            logs[name] = log = self.tmp / f"{name}-{self.starts}.log"
            args = ["worker", "--scheduler", self.address, "--name", name, "--listen", "127.0.0.1"]
            self.procs[name] = _start([*args, *self.tls(name)], self.tmp, self.workdir, log)
        for name, log in logs.items():
            wait_for(functools.partial(_says, log, f"worker {name}"), 60, f"worker {name}")

    def kill(self, name: str) -> None:
        os.kill(self.procs[name].pid, signal.SIGKILL)
        self.procs[name].wait()

    def run(self, *args: str) -> subprocess.Popen[str]:
        proc = subprocess.Popen(
            [
                *[sys.executable, "-m", "dbregress.cli.main", "run", *args],
                *["--scheduler", self.address, *self.tls("coord")],
            ],
            cwd=self.tmp,
            env=cli_env(self.workdir),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        self.procs["coordinator"] = proc  # type: ignore[assignment]
        return proc

    def stop(self) -> None:
        for name, proc in self.procs.items():
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM if name != "coordinator" else signal.SIGKILL)
        for proc in self.procs.values():
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        deadline = time.monotonic() + 15
        while processes_mentioning(str(self.workdir)) and time.monotonic() < deadline:
            time.sleep(0.3)
        assert processes_mentioning(str(self.workdir)) == []


def _running_job(tmp: Path, started_steps: str = "0[1-3]-*.json") -> str | None:
    """The host of a job (not a warm-up) that has stored a step: a unit in its middle."""
    runs = list((tmp / "results").glob("*/run.json"))
    if not runs:
        return None
    try:
        record = json.loads(runs[0].read_text())
    except json.JSONDecodeError:
        return None
    for job, info in record["jobs"].items():
        done = list((runs[0].parent / job / "steps").glob(started_steps))
        if not job.endswith("/r0") and info.get("host") and done:
            return str(info["host"])
    return None


def test_a_lab_survives_a_worker_killed_mid_unit(tmp_path: Path, workdir: Path) -> None:
    (tmp_path / "lab.toml").write_text(LAB)
    fleet = Fleet(tmp_path, workdir)
    try:
        fleet.start_scheduler()
        fleet.start_worker("w1", "w2")
        coordinator = fleet.run("lab.toml")
        # Kill the first worker that is in the middle of a round: it has sent a step of it.
        wait_for(lambda: _running_job(tmp_path), 300, "a worker in the middle of a round")
        killed = _running_job(tmp_path)
        assert killed in ("w1", "w2")
        fleet.kill(killed)

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
        for job in jobs:
            info = record["jobs"][job]
            assert info["status"] == "ok"
            moved += info["host"] == survivor
            steps = step_results(run, job)
            assert list(steps) == STEPS, job
            assert all(r["status"] == "ok" for r in steps.values())
            assert (run / job / "server.log").stat().st_size > 0
        assert moved >= 3  # the killed worker's round ran again on the survivor
        assert set(record["hosts"]) == {"w1", "w2"}
        assert {u["host"] for u in record["fleet_units"]} <= {"w1", "w2"}

        # Every step is in the coordinator's history, once.
        db = sqlite3.connect(tmp_path / "results" / "history.sqlite")
        rows = db.execute(
            "SELECT column, repeat, step FROM time_samples WHERE run_id = ?", (run.name,)
        ).fetchall()
        db.close()
        assert len(rows) == len(set(rows))
        measured = {(col, rep) for col, rep, _ in rows}
        assert measured >= {("pa", 1), ("pb", 1), ("pa", 2), ("pb", 2)}
        assert json.loads((run / "verdicts.json").read_text())["comparisons"]
    finally:
        fleet.stop()


NULL_LAB = """\
name = "pinned"
placement = "unpinned"
repeats = 2
warmup_job = false
count = false

[[comparison]]
name = "n"
benchmark = "kv"
[[comparison.column]]
label = "na"
build = "null@0"
[[comparison.column]]
label = "nb"
build = "null@0"
[comparison.kv]
keys = 1000
seconds = 1.5
warmup_s = 0
steps = ["fillseq", "readrandom", "readwhilewriting"]
"""


def test_a_jobs_schedule_comparison_waits_for_its_host_to_come_back(
    tmp_path: Path, workdir: Path
) -> None:
    """The jobs schedule compares unpaired figures: all of a comparison stays on one
    host. Its host killed mid-unit, the unit waits (the other worker never takes it) and
    runs again when a worker of that name joins."""
    (tmp_path / "lab.toml").write_text(NULL_LAB)
    fleet = Fleet(tmp_path, workdir)
    try:
        fleet.start_scheduler()
        fleet.start_worker("h1", "h2")
        coordinator = fleet.run("lab.toml")
        wait_for(lambda: _running_job(tmp_path, "0[1-2]-*.json"), 120, "a unit under way")
        host = _running_job(tmp_path, "0[1-2]-*.json")
        assert host in ("h1", "h2")
        fleet.kill(host)
        time.sleep(8)  # the other host stays idle: the unit is not its to take
        assert coordinator.poll() is None
        fleet.start_worker(host)
        _out, err = coordinator.communicate(timeout=300)
        assert coordinator.returncode == 0, err[-3000:]
        assert "started again on" in err
        run, record = run_record(tmp_path)
        assert record["status"] == "ok", record["failures"]
        assert {info["host"] for info in record["jobs"].values()} == {host}
        for job in ("na/r1", "nb/r1", "na/r2", "nb/r2"):
            assert len(step_results(run, job)) == 3
    finally:
        fleet.stop()


COST_LAB = """\
name = "fleetcost"
placement = "unpinned"
repeats = 1
warmup_job = false
count = true
count_replays = 2
count_replays_max = 2
count_steps = ["readrandom"]
schedule = "interleaved"

[[comparison]]
name = "kv"
benchmark = "kv"
[[comparison.column]]
label = "ka"
build = "rocksdb@10.2.1"
[[comparison.column]]
label = "kb"
build = "rocksdb@10.2.1"
[comparison.kv]
keys = 10000
seconds = 0.5
warmup_s = 0.2
steps = ["fillseq", "readrandom"]
"""


@pytest.mark.skipif(shutil.which("valgrind") is None, reason="the cost lane needs valgrind")
def test_the_cost_lane_spreads_its_replays_over_the_fleet(tmp_path: Path, workdir: Path) -> None:
    (tmp_path / "lab.toml").write_text(COST_LAB)
    fleet = Fleet(tmp_path, workdir)
    try:
        fleet.start_scheduler()
        fleet.start_worker("c1", "c2")
        coordinator = fleet.run("lab.toml")
        _out, err = coordinator.communicate(timeout=900)
        assert coordinator.returncode == 0, err[-3000:]
        run, _record = run_record(tmp_path)
        replays = [json.loads(f.read_text()) for f in sorted((run / "cost").glob("k?/r*.json"))]
        assert len(replays) == 4
        assert all(r["status"] == "ok" and "readrandom" in r["steps"] for r in replays)
        assert {r["host"] for r in replays} <= {"c1", "c2"}
        assert (run / "cost" / "lane.json").is_file()
        # Every replay counted with one measurement identity, stored with the run.
        identity = _record["count_identity"]
        assert identity["chosen_by"] == "the coordinator's own"  # it has valgrind here
        assert set(identity["hosts"]) == {"c1", "c2"} and identity["left_out"] == {}
        for field in ("dbregress", "loadgen_sha256", "valgrind_version", "libc"):
            assert identity[field] == _record["hosts"]["c1"][field]
        assert str(identity["valgrind_version"]).startswith("valgrind-")
        verdicts = json.loads((run / "verdicts.json").read_text())
        cost = [
            s["cost"]
            for c in verdicts["comparisons"]
            for col in c["columns"]
            for s in col["steps"]
            if s.get("cost") and s["step"] == "readrandom"
        ]
        assert cost and cost[0]["verdict"] in ("same", "undecided")  # A/A
        db = sqlite3.connect(tmp_path / "results" / "history.sqlite")
        n = db.execute("SELECT COUNT(*) FROM cost_samples WHERE run_id = ?", (run.name,)).fetchone()
        db.close()
        assert n[0] > 0
    finally:
        fleet.stop()


def test_ctrl_c_on_the_coordinator_cancels_the_units_and_resume_finishes(
    tmp_path: Path, workdir: Path
) -> None:
    (tmp_path / "lab.toml").write_text(NULL_LAB.replace("repeats = 2", "repeats = 3"))
    fleet = Fleet(tmp_path, workdir)
    try:
        fleet.start_scheduler()
        fleet.start_worker("h1")
        coordinator = fleet.run("lab.toml")
        wait_for(lambda: _running_job(tmp_path, "0[1-2]-*.json"), 120, "a unit under way")
        coordinator.send_signal(signal.SIGINT)
        _out, err = coordinator.communicate(timeout=120)
        assert coordinator.returncode == 130, err[-3000:]
        assert "--resume" in err and "--scheduler" in err
        # The worker killed its unit's loadgen: nothing of the run is left running.
        wait_for(lambda: not processes_mentioning(str(workdir)), 30, "the unit to stop")
        run, record = run_record(tmp_path)
        assert record["status"] == "interrupted"

        again = fleet.run("--resume", run.name)
        _out, err = again.communicate(timeout=300)
        assert again.returncode == 0, err[-3000:]
        _run, record = run_record(tmp_path)
        assert record["status"] == "ok", record["failures"]
        assert {j for j, info in record["jobs"].items() if info["status"] == "ok"} == {
            f"{c}/r{r}" for c in ("na", "nb") for r in (1, 2, 3)
        }
    finally:
        fleet.stop()


def test_a_worker_stopped_with_sigterm_hands_its_unit_on(tmp_path: Path, workdir: Path) -> None:
    lab = NULL_LAB.replace("count = false", 'count = false\nschedule = "interleaved"')
    (tmp_path / "lab.toml").write_text(lab)
    fleet = Fleet(tmp_path, workdir)
    try:
        fleet.start_scheduler()
        fleet.start_worker("s1", "s2")
        coordinator = fleet.run("lab.toml")
        wait_for(lambda: _running_job(tmp_path, "0[1-2]-*.json"), 120, "a unit under way")
        host = _running_job(tmp_path, "0[1-2]-*.json")
        assert host in ("s1", "s2")
        fleet.procs[host].send_signal(signal.SIGTERM)
        assert fleet.procs[host].wait(timeout=60) == 0
        _out, err = coordinator.communicate(timeout=300)
        assert coordinator.returncode == 0, err[-3000:]
        assert "started again on" in err
        run, record = run_record(tmp_path)
        assert record["status"] == "ok", record["failures"]
        for job in ("na/r1", "nb/r1", "na/r2", "nb/r2"):
            assert record["jobs"][job]["status"] == "ok"
            assert len(step_results(run, job)) == 3
    finally:
        fleet.stop()


def _cli(args: list[str], cwd: Path, workdir: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "dbregress.cli.main", *args],
        cwd=cwd,
        env=cli_env(workdir),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def _refused(proc: subprocess.Popen[str], why: str) -> str:
    _out, err = proc.communicate(timeout=300)
    assert proc.returncode == 2, err[-3000:]
    error = [line for line in err.splitlines() if line.startswith("Error:")]
    assert len(error) == 1 and why in error[0], err[-3000:]
    return error[0]


def test_a_tls_fleet_runs_a_lab_for_its_members_and_refuses_strangers(
    tmp_path: Path, workdir: Path
) -> None:
    """Scheduler, worker and coordinator with the fleet's certificates run a lab; a
    coordinator without certificates, one with another CA's, and a worker whose
    certificate another CA signed are refused at the connection, and none of the lab runs
    for them."""
    # Short steps: what is tested is who may join, not what a unit does.
    (tmp_path / "lab.toml").write_text(NULL_LAB.replace("seconds = 1.5", "seconds = 0.3"))
    made = _cli(["fleet-certs", "certs", "--hosts", "coord,t1"], tmp_path, workdir)
    other = _cli(["fleet-certs", "other", "--hosts", "x"], tmp_path, workdir)
    for proc in (made, other):
        _out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
    # A stranger who trusts the fleet's CA (it has its ca.pem) but whose own certificate
    # another CA signed: only the scheduler's check can refuse it.
    stranger = tmp_path / "stranger"
    stranger.mkdir(mode=0o700)
    shutil.copy(tmp_path / "certs" / "ca.pem", stranger / "ca.pem")
    for name in ("cert.pem", "key.pem"):
        shutil.copy(tmp_path / "other" / "x" / name, stranger / name)
    (stranger / "key.pem").chmod(0o600)

    fleet = Fleet(tmp_path, workdir, certs=tmp_path / "certs")
    strangers: list[subprocess.Popen[str]] = []
    try:
        fleet.start_scheduler()
        assert fleet.address.startswith("tls://")
        fleet.start_worker("t1")
        # A second worker named t1 on this host: one line, and the first one unharmed.
        again = _cli(
            ["worker", "--scheduler", fleet.address, "--name", "t1", *fleet.tls("t1")],
            tmp_path,
            workdir,
        )
        strangers.append(again)
        # One named t1 on "another host" (its own work directory): the scheduler has a t1.
        elsewhere = workdir / "elsewhere"
        elsewhere.mkdir(mode=0o755)
        twin = _cli(
            ["worker", "--scheduler", fleet.address, "--name", "t1", *fleet.tls("t1")],
            tmp_path,
            elsewhere,
        )
        strangers.append(twin)
        _refused(again, "a worker named t1 already runs on this host")
        _refused(twin, "already has a worker named t1")

        lab = ["run", "lab.toml"]
        plain = fleet.address.replace("tls://", "tcp://")
        no_certs = _cli([*lab, "--results", "r-plain", "--scheduler", plain], tmp_path, workdir)
        other_ca = _cli(
            [*lab, "--results", "r-other", "--scheduler", fleet.address, "--tls", "other/x"],
            tmp_path,
            workdir,
        )
        bad_worker = _cli(
            ["worker", "--scheduler", fleet.address, "--name", "bad", "--tls", "stranger"],
            tmp_path,
            workdir,
        )
        strangers += [no_certs, other_ca, bad_worker]
        _refused(no_certs, "cannot reach the Dask scheduler")
        _refused(other_ca, "not signed by this host's CA")
        _refused(bad_worker, "refused this host's certificate")

        # Dask's own client with the stranger's certificate: refused by the scheduler.
        from distributed import Client
        from distributed.security import Security

        security = Security(  # type: ignore[no-untyped-call]
            tls_ca_file=str(stranger / "ca.pem"),
            tls_client_cert=str(stranger / "cert.pem"),
            tls_client_key=str(stranger / "key.pem"),
            require_encryption=True,
        )
        with pytest.raises((OSError, TimeoutError)):
            Client(fleet.address, security=security, timeout=5, set_as_default=False)  # type: ignore[no-untyped-call]

        coordinator = fleet.run("lab.toml")
        _out, err = coordinator.communicate(timeout=300)
        assert coordinator.returncode == 0, err[-3000:]
        assert f"fleet: 1 worker(s) at {fleet.address}" in err
        run, record = run_record(tmp_path)
        assert record["status"] == "ok", record["failures"]
        assert set(record["hosts"]) == {"t1"}  # the stranger never joined
        for job in ("na/r1", "nb/r1", "na/r2", "nb/r2"):
            assert record["jobs"][job]["status"] == "ok"
            assert record["jobs"][job]["host"] == "t1"
            assert len(step_results(run, job)) == 3
        # The refused coordinators ran nothing.
        for results in ("r-plain", "r-other"):
            for found in (tmp_path / results).glob("*/run.json"):
                assert json.loads(found.read_text())["jobs"] == {}
                assert not list(found.parent.glob("*/r*/steps/*.json"))
        log = (tmp_path / "scheduler.log").read_text()
        assert "name: bad" not in log and "TLS handshake failed" in log
    finally:
        for proc in strangers:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        fleet.stop()
