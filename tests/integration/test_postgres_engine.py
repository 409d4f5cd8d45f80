"""Real PostgreSQL servers: fetched builds start, answer, refuse bad settings, crash, stop."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from dbregress import provision
from dbregress.collect.proc import tree_pids
from dbregress.engines.base import EngineOptions, Sizes
from dbregress.engines.postgres import PostgresEngine, processes_in
from dbregress.model.errors import ConfigRejected, EngineCrashed, EngineError
from dbregress.provision import Build, BuildSpec
from tests.integration.spies import server_waits

pytestmark = pytest.mark.engine

VERSIONS = ["12.20.0", "17.2.0", "system"]


@pytest.fixture(scope="module", params=VERSIONS)
def build(request: pytest.FixtureRequest) -> Build:
    if request.param == "system" and not list(Path("/usr/lib/postgresql").glob("*/bin/postgres")):
        pytest.skip("no system PostgreSQL (apt-get install postgresql)")
    return provision.fetch(BuildSpec.parse(f"postgres@{request.param}"))


@pytest.fixture
def workroot() -> Iterator[Path]:
    """A 0755 directory: as root the server runs as nobody, who cannot enter pytest's
    0700 tmp_path."""
    root = Path(tempfile.mkdtemp(prefix="dbregress-test-"))
    root.chmod(0o755)
    yield root
    shutil.rmtree(root)


def _engine(build: Build, root: Path, config: str = "ci", **kwargs: object) -> PostgresEngine:
    options = EngineOptions(
        workdir=root / "work",
        log_path=root / "results" / "server.log",
        config_name=config,
        sizes=Sizes(cache_mb=64, wal_mb=256),
        **({"start_timeout_s": 60, "stop_timeout_s": 20} | kwargs),  # type: ignore[arg-type]
    )
    return PostgresEngine(build, options)


def _connect(engine: PostgresEngine) -> psycopg.Connection[tuple[object, ...]]:
    c = engine.connection()
    return psycopg.connect(
        host=c["socket_dir"], port=c["port"], user=c["user"], dbname=c["database"]
    )


def _tcp_listen_inodes() -> set[str]:
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A":  # LISTEN
                inodes.add(fields[9])
    return inodes


def _socket_inodes(pids: list[int]) -> set[str]:
    inodes = set()
    for pid in pids:
        for fd in Path(f"/proc/{pid}/fd").iterdir():
            target = os.readlink(fd)
            if target.startswith("socket:["):
                inodes.add(target[8:-1])
    return inodes


def _state(pid: int) -> str | None:
    """The process's state letter, None once it is gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return None


def _assert_gone(engine: PostgresEngine, pids: list[int]) -> None:
    assert processes_in(engine.data_dir) == []
    # Backends SIGKILLed by stop() may still be exiting (state R or D, their working
    # directory already released) when it returns: they get a moment to finish dying.
    # A zombie waiting for init is not a running process.
    deadline = time.monotonic() + 10
    while (alive := [p for p in pids if _state(p) not in (None, "Z")]) and (
        time.monotonic() < deadline
    ):
        time.sleep(0.05)
    assert alive == [], {p: _state(p) for p in alive}


def test_start_answer_stop(build: Build, workroot: Path) -> None:
    engine = _engine(build, workroot, config="default")
    engine.start()
    try:
        pids = tree_pids(engine.server_pid())
        c = engine.connection()
        assert (Path(c["socket_dir"]) / f".s.PGSQL.{c['port']}").is_socket()
        assert _socket_inodes(pids).isdisjoint(_tcp_listen_inodes())  # TCP is off
        with _connect(engine) as conn:
            version = str(conn.execute("select version()").fetchone()[0])  # type: ignore[index]
            assert build.version_string.split(") ")[1].split()[0] in version
            assert conn.execute("show shared_buffers").fetchone() == ("64MB",)
            assert conn.execute("show fsync").fetchone() == ("on",)
            assert conn.execute("show listen_addresses").fetchone() == ("",)
            conn.execute("create table t as select g from generate_series(1, 10000) g")
        assert engine.data_size_bytes() > 1_000_000
        engine.check_alive()
        assert engine.settings_applied()["max_wal_size"] == "256MB"
    finally:
        engine.stop()
    _assert_gone(engine, pids)
    engine.stop()  # idempotent
    assert "ready to accept connections" in (workroot / "results" / "server.log").read_text()
    shutil.rmtree(workroot / "work")  # everything the server wrote is deletable


def test_fetched_version_matches(build: Build) -> None:
    if build.spec.is_system:
        assert build.identity["source"] == "system"
        return
    major_minor = build.spec.version.rsplit(".", 1)[0]
    assert build.version_string == f"postgres (PostgreSQL) {major_minor}"
    assert build.identity["coordinates"].endswith(f":{build.spec.version}")
    assert len(build.identity["sha256"]) == 64


def test_rejected_setting_names_profile(build: Build, workroot: Path) -> None:
    engine = _engine(build, workroot, settings={"shared_bufers": "1GB"})
    with pytest.raises(ConfigRejected) as e:
        engine.start()
    message = str(e.value)
    assert "'ci'" in message
    assert 'unrecognized configuration parameter "shared_bufers"' in message
    assert processes_in(engine.data_dir) == []


def test_invalid_value_is_rejected(build: Build, workroot: Path) -> None:
    engine = _engine(build, workroot, settings={"fsync": "maybe"})
    with pytest.raises(ConfigRejected, match='parameter "fsync" requires a Boolean value'):
        engine.start()


def test_sigkill_is_detected_and_cleaned_up(build: Build, workroot: Path) -> None:
    engine = _engine(build, workroot)
    engine.start()
    try:
        pids = tree_pids(engine.server_pid())
        os.kill(engine.server_pid(), signal.SIGKILL)
        deadline = time.monotonic() + 10
        with pytest.raises(EngineCrashed) as e:  # polls until the crash is seen
            while time.monotonic() < deadline:
                engine.check_alive()
                time.sleep(0.05)
        assert "SIGKILL" in str(e.value)
        assert "ready to accept connections" in str(e.value)  # the log's tail
    finally:
        engine.stop()
    _assert_gone(engine, pids)


def test_backend_crash_is_detected(build: Build, workroot: Path) -> None:
    """A backend killed by a signal makes the postmaster reset everything: a crash."""
    engine = _engine(build, workroot)
    engine.start()
    conn = _connect(engine)
    try:
        backend = int(conn.execute("select pg_backend_pid()").fetchone()[0])  # type: ignore[index]
        os.kill(backend, signal.SIGKILL)
        deadline = time.monotonic() + 10
        with pytest.raises(EngineCrashed, match="a server process crashed"):
            while time.monotonic() < deadline:
                engine.check_alive()
                time.sleep(0.05)
    finally:
        conn.close()
        engine.stop()


def test_stop_kills_a_server_that_ignores_shutdown(
    build: Build, workroot: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = _engine(build, workroot, stop_timeout_s=0.5)
    engine.start()
    pids = tree_pids(engine.server_pid())
    os.kill(engine.server_pid(), signal.SIGSTOP)  # stop() must wake it first
    # stop() wakes the tree, then a woken server would act on SIGINT at once: asking
    # with SIGCONT instead makes it a server that ignores the request, every time
    monkeypatch.setattr(engine, "STOP_SIGNAL", signal.SIGCONT)
    waits = server_waits(monkeypatch, engine.server_pid())
    engine.stop()
    # the shutdown is waited for stop_timeout_s, not longer; then the killed tree is
    # reaped (a wait without a timeout)
    assert waits == [engine.options.stop_timeout_s, None]
    _assert_gone(engine, pids)


def test_pinned_to_cpus(build: Build, workroot: Path) -> None:
    ours = os.sched_getaffinity(0)
    engine = _engine(build, workroot, cpus=frozenset({0}))
    engine.start()
    assert os.sched_getaffinity(0) == ours  # only the server is pinned
    try:
        for pid in tree_pids(engine.server_pid()):
            assert os.sched_getaffinity(pid) == {0}
    finally:
        engine.stop()


def test_unknown_profile_and_used_workdir(build: Build, workroot: Path) -> None:
    with pytest.raises(ConfigRejected, match="shipped: ci, default"):
        _engine(build, workroot, config="nope").start()
    (workroot / "work").mkdir()
    (workroot / "work" / "old").write_text("x")
    with pytest.raises(EngineError, match="not empty"):
        _engine(build, workroot).start()


@pytest.mark.skipif(os.geteuid() != 0, reason="only root runs the server as nobody")
def test_private_parent_is_explained(build: Build, workroot: Path) -> None:
    private = workroot / "private"
    private.mkdir(mode=0o700)
    with pytest.raises(EngineError, match="not traversable by user 'nobody'"):
        _engine(build, private).start()


_FROZEN_AND_KILLED = """
import sys, time
from pathlib import Path
from dbregress import provision
from dbregress.engines.process import freeze_tree
from dbregress.provision import BuildSpec
from tests.integration.test_postgres_engine import _engine

engine = _engine(provision.fetch(BuildSpec.parse(sys.argv[2])), Path(sys.argv[1]))
engine.start()
freeze_tree(engine.server_pid())  # as an interleaved round freezes the waiting side
print(engine.data_dir, flush=True)
time.sleep(600)
"""


def test_a_frozen_server_dies_with_its_killed_starter(workroot: Path) -> None:
    """A process that starts a server, freezes it (SIGSTOP, as the waiting side of an
    interleaved round is) and is then SIGKILLed leaves nothing running. The parent-death
    signal kills the postmaster only; its children, each in a session of its own and
    stopped, are killed by the data directory's guard. One version shows it."""
    starter = subprocess.Popen(
        [sys.executable, "-c", _FROZEN_AND_KILLED, str(workroot), "postgres@17.2.0"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert starter.stdout is not None
        data_dir = Path(starter.stdout.readline().strip())
        frozen = processes_in(data_dir)
        assert len(frozen) >= 3, frozen  # checkpointer, writers, launchers
        assert {_state(p) for p in frozen} == {"T"}
    finally:
        starter.kill()
        starter.wait()
        starter.stdout.close()
    deadline = time.monotonic() + 15
    while (left := processes_in(data_dir)) and time.monotonic() < deadline:
        time.sleep(0.1)
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    assert left == [], {p: _state(p) for p in left}
