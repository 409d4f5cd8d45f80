"""Debian's MariaDB under callgrind, a file per thread, as `dbregress explain` counts it:
the server runs under the Callgrind wrapper (as `nobody` when we are root), the loadgen
drives windows of real statements, vgdb zeroes and dumps at the windows' edges, and the
window's files split into the connection threads and the rest.

Two replays (a fresh server each) run the same steps: a table loaded, two windows of the
same point queries, a window of inserts with purge held off it (ReadViewHold). The same
statements must count within 1% of each other, in one server and across the two; the
inserts within 2% across the two (measured: 0.1-0.8% over repeated replays).
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from dbregress import provision
from dbregress.benchmarks import micro
from dbregress.benchmarks.plan import StepPlan
from dbregress.collect import valgrind
from dbregress.collect.proc import tree_pids
from dbregress.collect.valgrind import Callgrind
from dbregress.engines import process
from dbregress.engines.base import EngineOptions, Sizes
from dbregress.engines.mysql import QUIET_MYSQL, MysqlEngine
from dbregress.explain import callgrind
from dbregress.explain.stepper import Hooks, drive
from dbregress.explain.threads import (
    HoldError,
    ReadViewHold,
    client_binary,
    function_name,
    split_connection_threads,
)
from dbregress.explain.window_split import window_files
from dbregress.loadgen.client import Loadgen, find_binary
from dbregress.model.errors import LoadgenError
from dbregress.provision import BuildSpec

pytestmark = pytest.mark.engine

ROWS = 5000  # one sbtest table
SKIP, OPS = 50, 300  # each window: warm-up calls, then the counted ones
SLOW = 20  # the engine's timeouts under valgrind, as explain's SLOWDOWN
STEP_TIMEOUT_S = 600.0
SAME = 0.01  # the same statements: per-op instructions within 1%
WRITES = 0.02  # a fresh server's inserts with purge held: within 2%


def _requirements() -> str | None:
    if not Path("/usr/sbin/mariadbd").exists():
        return "no system MariaDB (apt-get install mariadb-server)"
    try:
        valgrind.require()
        find_binary()
    except (valgrind.ValgrindError, LoadgenError) as e:
        return str(e)
    return None


@dataclass
class Counted:
    """One window's figures."""

    per_op: float  # the connection threads' instructions per statement
    connections: list[int]  # instructions of each thread that ran the dispatcher
    background: int  # files of the other threads
    background_ir: int  # instructions of the other threads
    functions: set[str] = field(default_factory=set)  # the connection threads' functions


class _Window(Hooks):
    """As explain's count hooks: instrumentation on at ready, zero at the window's open,
    dump and off at its close; the read view held from ready (before the warm-up calls)
    to after the dump."""

    def __init__(
        self, cg: Callgrind, engine: MysqlEngine, hint: str, hold: ReadViewHold | None
    ) -> None:
        self.cg, self.engine, self.hint, self.hold = cg, engine, hint, hold
        self.opened = self.closed = 0.0
        self.close: dict[str, Any] | None = None

    def _pids(self) -> list[int]:
        return tree_pids(self.engine.server_pid())

    def ready(self, loadgen: Loadgen, event: dict[str, Any]) -> None:
        if self.hold is not None:
            self.hold.start()
        self.cg.control(self._pids(), "instrumentation on")

    def window(self, loadgen: Loadgen, event: dict[str, Any]) -> None:
        if event["edge"] == "open":
            self.cg.control(self._pids(), "zero")
            self.opened = time.time()
            return
        self.cg.control(self._pids(), f"dump {self.hint}")
        self.closed = time.time()
        self.close = event
        self.cg.control(self._pids(), "instrumentation off")
        if self.hold is not None:
            self.hold.release()


@dataclass
class Replay:
    """A fresh server under callgrind and what its windows counted."""

    root: Path
    engine: MysqlEngine
    cg: Callgrind
    windows: dict[str, Counted] = field(default_factory=dict)

    def count(self, name: str, step: str, seed: int, hold: bool = False) -> Counted:
        section = {"tables": 1, "rows": ROWS, "duration_s": 600.0}  # ends at the close
        plan = StepPlan(step, step, section, duration_s=600.0)
        spec = micro.step_spec(self.engine.connection(), plan, 1, seed)
        spec["window"] = {"skip_ops": SKIP, "ops": OPS}
        held = None
        if hold:
            client = client_binary(self.engine.build.basedir)
            assert client is not None, f"no mariadb client under {self.engine.build.basedir}"
            held = ReadViewHold(client, self.engine.connection())
        hooks = _Window(self.cg, self.engine, f"test-{name}", held)
        try:
            drive(self.engine, spec, self.root / "steps" / name, STEP_TIMEOUT_S, None, hooks)
        finally:
            if held is not None:
                held.release()
        assert hooks.close is not None and hooks.close["ops"] == OPS, hooks.close
        files = window_files(self.cg.out_dir, hooks.hint, hooks.opened, hooks.closed)
        profiles = {f: callgrind.read(f) for f in files}
        split = split_connection_threads(profiles)
        assert split is not None, f"{name}: no thread ran the dispatcher in {files}"
        mine, rest = split
        merged = callgrind.merge(profiles[f] for f in mine)
        others = callgrind.merge(profiles[f] for f in rest)
        counted = Counted(
            per_op=merged.total("Ir") / OPS,
            connections=sorted((profiles[f].total("Ir") for f in mine), reverse=True),
            background=len(rest),
            background_ir=others.total("Ir") if others.events else 0,
            functions={function_name(fn) for _, fn in merged.functions},
        )
        for f in files:
            f.unlink()
        self.windows[name] = counted
        return counted


def _replay(root: Path) -> Replay:
    """A fresh server in `root`: a table loaded, two windows of the same point queries,
    a window of inserts with the read view held."""
    build = provision.fetch(BuildSpec.parse("mariadb@system"))
    cg = Callgrind(root / "callgrind", process.as_server_user(), separate_threads=True)
    cg.prepare(process.run_as())
    options = EngineOptions(
        workdir=root / "work",
        log_path=root / "server.log",
        config_name="ci",
        settings=dict(QUIET_MYSQL),
        sizes=Sizes(cache_mb=128, wal_mb=256),
        start_timeout_s=120.0 * SLOW,
        stop_timeout_s=60.0 * SLOW,
        wrapper=tuple(cg.wrapper()),
    )
    replay = Replay(root, MysqlEngine(build, options), cg)
    engine = replay.engine
    try:
        engine.start()
        load = StepPlan("load", "load", {"tables": 1, "rows": ROWS}, reported=False)
        spec = micro.step_spec(engine.connection(), load, 1, 7)
        drive(engine, spec, root / "steps" / "load", STEP_TIMEOUT_S, None)
        replay.count("points-1", "point-query", seed=1001)
        replay.count("points-2", "point-query", seed=1001)  # the same statements again
        replay.count("inserts", "insert", seed=1002, hold=True)
    finally:
        engine.stop()
    return replay


@pytest.fixture(scope="module")
def replays() -> Iterator[list[Replay]]:
    missing = _requirements()
    if missing:
        pytest.skip(missing)
    roots: list[Path] = []
    try:
        for _ in range(2):
            # short and 0755: as root the server runs as nobody, and a socket path is short
            roots.append(Path(tempfile.mkdtemp(prefix="dbr-cg-")))
            roots[-1].chmod(0o755)
        yield [_replay(root) for root in roots]
    finally:
        for root in roots:
            shutil.rmtree(root, ignore_errors=True)


def _spread(values: list[float]) -> float:
    return (max(values) - min(values)) / min(values)


def test_the_connection_thread_apart_from_the_background(replays: list[Replay]) -> None:
    for replay in replays:
        for name, w in replay.windows.items():
            # one client: one thread ran its statements; another that ran the dispatcher
            # can only be one finishing a statement from before the window (the read
            # view's session, just opened): a sliver of the work
            assert w.connections and w.connections[0] >= 0.99 * sum(w.connections), (name, w)
            assert w.background >= 1, (name, w)
            assert w.per_op > 10_000, (name, w)  # a query is tens of thousands
            assert {"dispatch_command", "mysql_execute_command"} <= w.functions, name
        # InnoDB's timer, purge, log and I/O threads did work in some window
        assert any(w.background_ir > 0 for w in replay.windows.values()), replay.windows


def test_the_same_statements_count_the_same(replays: list[Replay]) -> None:
    points = [r.windows[n].per_op for r in replays for n in ("points-1", "points-2")]
    print(f"\npoint-query per op: {[round(p, 1) for p in points]}, spread {_spread(points):.4%}")
    assert _spread(points) <= SAME, points


def test_inserts_count_the_same_in_fresh_servers(replays: list[Replay]) -> None:
    inserts = [r.windows["inserts"].per_op for r in replays]
    print(f"\ninsert per op: {[round(p, 1) for p in inserts]}, spread {_spread(inserts):.4%}")
    assert _spread(inserts) <= WRITES, inserts


def test_the_split_needs_the_dispatcher() -> None:
    """By name, whatever the parameters and callgrind's suffixes; None without it."""

    def profile(*functions: str) -> callgrind.Profile:
        cost = [1] * len(callgrind.EVENTS)
        return callgrind.Profile(functions={("/usr/sbin/mariadbd", f): cost for f in functions})

    conn, other = Path("callgrind.out.7.1-13"), Path("callgrind.out.7.1-02")
    dispatch = "dispatch_command(enum_server_command, THD*, char*, unsigned int, bool)'2"
    split = split_connection_threads({conn: profile(dispatch), other: profile("queue_replace")})
    assert split == ([conn], [other])
    cold = profile("do_command(THD*, bool) [clone .cold]")
    assert split_connection_threads({conn: cold, other: profile()}) == ([conn], [other])
    # a server without symbols: functions by address only
    stripped = {conn: profile("0x000000000083d4e0"), other: profile("0x0000000000efef8d")}
    assert split_connection_threads(stripped) is None
    assert split_connection_threads({conn: profile(dispatch)}) is None  # one file


def test_a_read_view_that_cannot_open_says_why(tmp_path: Path) -> None:
    client = client_binary(Path("/usr"))
    if client is None:
        pytest.skip("no mariadb client (apt-get install mariadb-client)")
    hold = ReadViewHold(client, {"socket": str(tmp_path / "none.sock"), "database": "test"})
    with pytest.raises(HoldError, match=r"read view: the client ended .*Can't connect"):
        hold.start()
    hold.release()  # nothing held: nothing to do


def test_a_read_view_opens_on_a_client_that_requires_tls_by_default() -> None:
    """MariaDB 11.4's client requires TLS unless told not to: every counting replay of
    11.4.5 failed "SSL is required, but the server does not support it" before the
    session said --skip-ssl."""
    build = provision.fetch(BuildSpec.parse("mariadb@11.4.5"))
    client = build.basedir / "bin" / "mariadb"
    assert "--skip-ssl" in ReadViewHold(client, {"socket": "-", "database": "test"}).args
    root = Path(tempfile.mkdtemp(prefix="dbr-rv-"))  # short: a socket's path is short
    root.chmod(0o755)
    options = EngineOptions(
        workdir=root / "work",
        log_path=root / "server.log",
        config_name="ci",
        sizes=Sizes(cache_mb=128, wal_mb=256),
        start_timeout_s=120.0 * SLOW,
        stop_timeout_s=60.0 * SLOW,
    )
    engine = MysqlEngine(build, options)
    try:
        engine.start()
        hold = ReadViewHold(client, engine.connection())
        hold.start()  # raised HoldError before
        hold.release()
    finally:
        engine.stop()
        shutil.rmtree(root, ignore_errors=True)
