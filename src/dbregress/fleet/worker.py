"""`dbregress scheduler` and `dbregress worker`: the fleet's processes, on Dask's own.

A worker has a thread per CPU and the resources `bench` (1), `cpus` (its CPUs),
`host:<name>` and `group:<group>`: it takes one time-lane unit at a time and nothing
beside it, counting replays one per CPU, and units that must stay on one host or one
group find it by name, also after it was started again. Its engines' data
directories and scratch run folders live below its own directory (the machine's work
directory plus its name), which it empties when it starts: a worker that was killed
leaves nothing behind there that the next one keeps. One worker of a name runs per host
(a lock file beside that directory): a second one is refused before it touches the
first one's directory.

Both speak TLS with the host's certificates when given them (fleet/tls.py); without them
they listen on loopback only.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import shutil
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NotRequired, TypedDict

from dbregress.fleet import tls as fleet_tls
from dbregress.fleet.host import fingerprint
from dbregress.model import interrupts
from dbregress.model.errors import LabError
from dbregress.shapes.host import Fingerprint

# A benchmark host's worker must not add noise of its own: Dask's statistical profiler
# (a thread sampling every 10 ms) and its system monitor's disk sampling are off or slowed.
QUIET_WORKER = {
    "distributed.worker.profile.enabled": False,
    "distributed.admin.system-monitor.interval": "5s",
    "distributed.admin.system-monitor.disk": False,
}


class SchedulerOptions(TypedDict):
    """The keyword arguments of the fleet's Dask Scheduler."""

    host: str
    port: int
    protocol: NotRequired[str]
    security: NotRequired[Any]  # distributed.Security
    dashboard_address: str | None
    dashboard: bool


class WorkerOptions(TypedDict):
    """The keyword arguments of a benchmark host's Dask Worker."""

    nthreads: int
    name: str
    resources: dict[str, float]
    dashboard: bool
    memory_limit: int
    local_directory: str
    host: NotRequired[str]
    security: NotRequired[Any]  # distributed.Security
    protocol: NotRequired[str]


def resources(name: str, group: str, cpus: int, count_key: str | None = None) -> dict[str, float]:
    """`bench`: one time-lane unit at a time; `cpus`: a counting replay takes one, a
    time-lane unit all (so it never runs beside replays); `host:`/`group:`: where a
    comparison's units may go; `count:<key>`: the host's measurement identity, where a
    lab's counting replays may go (one per CPU)."""
    from dbregress.fleet.coordinator import RESOURCE, group_resource, host_resource
    from dbregress.fleet.lane import CPUS, count_resource

    out: dict[str, float] = {
        RESOURCE: 1,
        CPUS: cpus,
        host_resource(name): 1,
        group_resource(group): 1,
    }
    if count_key is not None:
        out[count_resource(count_key)] = cpus
    return out


async def _serve_until_signal(server: Any, on_signal: Any = None) -> None:
    """Serve until the server ends or SIGINT/SIGTERM; then `on_signal` and close."""
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()

    def asked_to_stop() -> None:
        if on_signal is not None:
            on_signal()
        stop.set()

    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, asked_to_stop)
    ended = asyncio.ensure_future(server.finished())
    asked = asyncio.ensure_future(stop.wait())
    await asyncio.wait([ended, asked], return_when=asyncio.FIRST_COMPLETED)
    if not ended.done():
        await server.close()
    for task in (ended, asked):
        task.cancel()


def dashboard_address(given: str | None) -> str | None:
    """`--dashboard`: none, a port (on loopback), or HOST:PORT (elsewhere only if asked)."""
    if given is None or given.strip().lower() == "none":
        return None
    text = given.strip()
    host, sep, port = text.rpartition(":")
    if not sep:
        host, port = "", text
    if not port.isdigit():
        raise LabError(f"--dashboard {given}: give PORT, HOST:PORT or none")
    return f"{host.strip('[]') or '127.0.0.1'}:{port}"


def serve_scheduler(
    host: str, port: int, dashboard: str | None, say: Any, tls: Path | None = None
) -> None:
    """The fleet's scheduler: with `tls` (this host's certificates) on tls:// and only for
    processes with a certificate of the fleet's CA; without, on loopback only."""
    from distributed import Scheduler

    fleet_tls.require_loopback_without_tls("--host", host, tls)
    kwargs: SchedulerOptions = {
        "host": host,
        "port": port,
        "dashboard_address": dashboard if dashboard else None,
        "dashboard": bool(dashboard),
    }
    if tls is not None:
        kwargs["protocol"] = "tls"
        kwargs["security"] = fleet_tls.security(tls)

    async def main() -> None:
        try:
            server = Scheduler(**kwargs)
            await server
        except OSError as e:
            raise LabError(f"the scheduler cannot listen on {host}:{port}: {e}") from None
        async with server as s:
            link = s.services.get("dashboard")
            say(f"scheduler at {s.address}{' (TLS)' if tls is not None else ''}")
            if link is not None and dashboard is not None:
                say(f"dashboard at http://{dashboard.rpartition(':')[0]}:{link.port}/status")
            await _serve_until_signal(s)

    asyncio.run(main())


@contextlib.contextmanager
def one_per_host(name: str, root: Path) -> Iterator[None]:
    """Hold the lock of worker `name` on this host; refused if another process holds it."""
    root.mkdir(parents=True, exist_ok=True)
    path = root / f"worker-{name}.lock"
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            other = os.pread(fd, 32, 0).decode(errors="replace").strip() or "?"
            raise LabError(
                f"a worker named {name} already runs on this host (pid {other}): stop it, or "
                "give this one another --name"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        yield
    finally:
        os.close(fd)  # releases the lock


def serve_worker(
    scheduler: str,
    name: str,
    group: str | None,
    listen: str | None,
    results: Path | None,
    say: Any,
    tls: Path | None = None,
) -> None:
    """A benchmark host's worker. `tls`: this host's certificates; without them the
    scheduler must be on loopback and the worker listens there."""
    from dbregress.execution.execute import work_root

    address = fleet_tls.scheduler_address(scheduler, tls)
    if tls is None:
        listen = listen or "127.0.0.1"
        fleet_tls.require_loopback_without_tls("--listen", listen, None)
    security = fleet_tls.security(tls) if tls is not None else None
    with one_per_host(name, work_root()):
        if tls is not None:
            fleet_tls.probe(address, tls)  # a refused certificate: one line, not a retry loop
        _serve_worker(address, name, group, listen, results, say, security)


def _serve_worker(
    scheduler: str,
    name: str,
    group: str | None,
    listen: str | None,
    results: Path | None,
    say: Any,
    security: Any,
) -> None:
    import dask
    from distributed import Worker

    from dbregress.execution.execute import work_root
    from dbregress.fleet.unit import worker_state

    own = work_root() / f"worker-{name}"
    if own.exists():  # what a killed worker of this name left
        shutil.rmtree(own, ignore_errors=True)
    own.mkdir(parents=True, exist_ok=True)
    own.chmod(0o755)
    os.environ["DBREGRESS_WORKDIR"] = str(own)  # its engines' data directories
    fp = fingerprint(name, group, results)
    state = worker_state(name, own / "scratch", fp)

    def stop_unit() -> None:
        """The running unit's engine is killed, its step recorded as failed, the unit
        ends and the worker closes; the coordinator runs the unit again elsewhere."""
        state["stopping"] = True
        interrupts.hurry_now()

    async def main() -> None:
        kwargs = worker_options(fp, own, listen, security)
        try:
            started = await Worker(scheduler, **kwargs)
        except (RuntimeError, ValueError) as e:  # the scheduler's answer to the registration
            if "name taken" in f"{e} {e.__cause__}":
                raise LabError(
                    f"the scheduler at {scheduler} already has a worker named {name} (on "
                    "another host?): give this one another --name"
                ) from None
            raise
        async with started as w:
            say(f"worker {name} (group {fp['group']}) at {w.address}, scheduler {scheduler}")
            await _serve_until_signal(w, stop_unit)

    try:
        with dask.config.set(QUIET_WORKER):
            asyncio.run(main())
    finally:
        shutil.rmtree(own, ignore_errors=True)


def worker_options(fp: Fingerprint, own: Path, listen: str | None, security: Any) -> WorkerOptions:
    """The Dask Worker of the host `fp` describes, its files below `own`."""
    cpus = int(fp.get("cpu_count") or 1)
    kwargs: WorkerOptions = {
        "nthreads": cpus,  # replays side by side; a time-lane unit takes every CPU
        "name": fp["name"],
        "resources": resources(fp["name"], fp["group"], cpus, fp["count_key"]),
        "dashboard": False,
        # Its engines run as processes of their own: nothing of a unit lives in the
        # worker's memory for Dask to manage.
        "memory_limit": 0,
        "local_directory": str(own / "dask"),
    }
    if listen:
        kwargs["host"] = listen
    if security is not None:
        kwargs["security"] = security
        kwargs["protocol"] = "tls"
    return kwargs
