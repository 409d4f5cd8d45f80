"""Real MariaDB servers: Maven builds and the system one start, answer, refuse bad settings,
crash, and stop leaving nothing behind."""

from __future__ import annotations

import os
import shutil
import signal
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pymysql
import pytest

from dbregress import provision
from dbregress.collect.proc import tree_pids
from dbregress.engines.base import EngineOptions, Sizes
from dbregress.engines.mysql import MysqlEngine
from dbregress.engines.process import processes_in
from dbregress.model.errors import ConfigRejected, EngineCrashed, EngineError
from dbregress.provision import Build, BuildSpec
from tests.integration.spies import server_waits

pytestmark = pytest.mark.engine

VERSIONS = ["10.2.11", "11.4.5", "system"]


@pytest.fixture(scope="module", params=VERSIONS)
def build(request: pytest.FixtureRequest) -> Build:
    if request.param == "system" and not Path("/usr/sbin/mariadbd").exists():
        pytest.skip("no system MariaDB (apt-get install mariadb-server)")
    return provision.fetch(BuildSpec.parse(f"mariadb@{request.param}"))


@pytest.fixture
def workroot() -> Iterator[Path]:
    """A short 0755 directory: as root the server runs as nobody, who cannot enter
    pytest's 0700 tmp_path, and a unix socket path must stay under 108 bytes."""
    root = Path(tempfile.mkdtemp(prefix="dbr-my-"))
    root.chmod(0o755)
    yield root
    shutil.rmtree(root)


def _engine(build: Build, root: Path, config: str = "ci", **kwargs: object) -> MysqlEngine:
    options = EngineOptions(
        workdir=root / "work",
        log_path=root / "results" / "server.log",
        config_name=config,
        sizes=Sizes(cache_mb=64, wal_mb=256),
        **({"start_timeout_s": 120, "stop_timeout_s": 30} | kwargs),  # type: ignore[arg-type]
    )
    return MysqlEngine(build, options)


def _connect(engine: MysqlEngine) -> pymysql.connections.Connection:
    c = engine.connection()
    return pymysql.connect(unix_socket=c["socket"], user=c["user"], database=c["database"])


def _query(engine: MysqlEngine, sql: str) -> tuple[object, ...]:
    conn = _connect(engine)
    try:
        with conn.cursor() as cursor:
            cursor.execute(sql)
            row = cursor.fetchone()
            assert row is not None
            return tuple(row)
    finally:
        conn.close()


def _processes_mentioning(text: str) -> list[int]:
    """Live processes whose command line mentions `text` (a scan of /proc)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            if text in cmdline and int(entry.name) != os.getpid():
                found.append(int(entry.name))
    return found


def _assert_gone(engine: MysqlEngine, pids: list[int]) -> None:
    assert processes_in(engine.data_dir) == []
    assert _processes_mentioning(str(engine.config_path)) == []
    for pid in pids:
        state = Path(f"/proc/{pid}/stat")
        if state.exists():  # a zombie waiting for init is not a running process
            assert state.read_text().rsplit(")", 1)[1].split()[0] == "Z"


def _tcp_listen_inodes() -> set[str]:
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A":  # LISTEN
                inodes.add(fields[9])
    return inodes


def _socket_inodes(pid: int) -> set[str]:
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except FileNotFoundError:  # closed meanwhile
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    return inodes


def test_start_answer_stop(build: Build, workroot: Path) -> None:
    engine = _engine(build, workroot, config="default")
    engine.start()
    try:
        pids = tree_pids(engine.server_pid())
        assert Path(engine.connection()["socket"]).is_socket()
        assert _socket_inodes(engine.server_pid()).isdisjoint(_tcp_listen_inodes())
        version = str(_query(engine, "SELECT VERSION()")[0])
        assert version.startswith(".".join(map(str, engine.server.version)))
        assert _query(engine, "SELECT @@innodb_buffer_pool_size") == (64 << 20,)
        assert _query(engine, "SELECT @@skip_networking") == (1,)
        assert _query(engine, "SELECT @@have_ssl") == ("DISABLED",)
        assert _query(engine, "SELECT @@innodb_flush_log_at_trx_commit") == (1,)
        assert _query(engine, "SELECT @@character_set_server") == ("utf8mb4",)
        conn = _connect(engine)
        with conn.cursor() as cursor:
            cursor.execute("CREATE TABLE t (id INT PRIMARY KEY, c VARCHAR(100)) ENGINE=InnoDB")
            cursor.executemany(
                "INSERT INTO t VALUES (%s, %s)", [(i, "x" * 90) for i in range(2000)]
            )
        conn.commit()
        conn.close()
        assert engine.data_size_bytes() > 1_000_000
        engine.check_alive()
        assert engine.settings_applied()["innodb_buffer_pool_size"] == "64M"
    finally:
        engine.stop()
    _assert_gone(engine, pids)
    engine.stop()  # idempotent
    log = (workroot / "results" / "server.log").read_text()
    assert "ready for connections" in log and "Shutdown complete" in log
    shutil.rmtree(workroot / "work")  # everything the server wrote is deletable


def test_fetched_version_matches(build: Build) -> None:
    assert "MariaDB" in build.version_string
    if build.spec.is_system:
        assert build.identity["source"] == "system"
        assert build.identity["path"] == "/usr"
        return
    assert f"Ver {build.spec.version}-MariaDB" in build.version_string
    assert build.identity["coordinates"].endswith(f":{build.spec.version}")
    assert len(build.identity["sha256"]) == 64


def test_rejected_option_names_profile(build: Build, workroot: Path) -> None:
    engine = _engine(build, workroot, settings={"innodb_bufer_pool_size": "1G"})
    with pytest.raises(ConfigRejected) as e:
        engine.start()
    message = str(e.value)
    assert "'ci'" in message
    assert "unknown variable 'innodb_bufer_pool_size=1G'" in message
    assert processes_in(engine.data_dir) == []


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
        assert "ready for connections" in str(e.value)  # the log's tail
    finally:
        engine.stop()
    _assert_gone(engine, pids)


def test_stop_kills_a_server_that_ignores_shutdown(
    build: Build, workroot: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = _engine(build, workroot, stop_timeout_s=0.5)
    engine.start()
    pids = tree_pids(engine.server_pid())
    os.kill(engine.server_pid(), signal.SIGSTOP)  # stop() must wake it first
    # stop() wakes the tree, then a woken server would act on SIGTERM at once: asking
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
        for task in Path(f"/proc/{engine.server_pid()}/task").iterdir():
            assert os.sched_getaffinity(int(task.name)) == {0}
    finally:
        engine.stop()


def test_unknown_profile_and_used_workdir(build: Build, workroot: Path) -> None:
    with pytest.raises(ConfigRejected, match="shipped: ci, default, myrocks"):
        _engine(build, workroot, config="nope").start()
    (workroot / "work").mkdir()
    (workroot / "work" / "old").write_text("x")
    with pytest.raises(EngineError, match="not empty"):
        _engine(build, workroot).start()


def test_myrocks(build: Build, workroot: Path) -> None:
    """MyRocks where the build has it (Debian's mariadb-plugin-rocksdb), else rejected."""
    engine = _engine(build, workroot, config="myrocks")
    has_plugin = build.spec.is_system and Path("/usr/lib/mysql/plugin/ha_rocksdb.so").exists()
    if not has_plugin:
        with pytest.raises(ConfigRejected, match="has no MyRocks"):
            engine.start()
        return
    engine.start()
    try:
        assert engine.connection()["storage_engine"] == "RocksDB"
        assert _query(engine, "SELECT @@default_storage_engine") == ("ROCKSDB",)
        assert _query(engine, "SELECT @@rocksdb_block_cache_size") == (64 << 20,)
    finally:
        engine.stop()


@pytest.mark.skipif(os.geteuid() != 0, reason="only root runs the server as nobody")
def test_runs_as_nobody(build: Build, workroot: Path) -> None:
    engine = _engine(build, workroot)
    engine.start()
    try:
        status = Path(f"/proc/{engine.server_pid()}/status").read_text()
        uid_line = next(line for line in status.splitlines() if line.startswith("Uid:"))
        assert uid_line.split()[1] == "65534"
    finally:
        engine.stop()
