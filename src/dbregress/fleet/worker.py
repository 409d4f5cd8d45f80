"""`dbregress scheduler` and `dbregress worker`: the fleet's processes, on Dask's own.

A worker has a thread per CPU and the resources `bench` (1), `cpus` (its CPUs),
`host:<name>` and `group:<group>`: it takes one time-lane unit at a time and nothing
beside it, counting replays one per CPU, and units that must stay on one host or one
group find it by name, also after it was started again. Its engines' data
directories and scratch run folders live below its own directory (the machine's work
directory plus its name), which it empties when it starts: a worker that was killed
leaves nothing behind there that the next one keeps.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
from pathlib import Path
from typing import Any

from dbregress import interrupts
from dbregress.fleet.host import fingerprint

# A benchmark host's worker must not add noise of its own: Dask's statistical profiler
# (a thread sampling every 10 ms) and its system monitor's disk sampling are off or slowed.
QUIET_WORKER = {
    "distributed.worker.profile.enabled": False,
    "distributed.admin.system-monitor.interval": "5s",
    "distributed.admin.system-monitor.disk": False,
}


def resources(name: str, group: str, cpus: int) -> dict[str, float]:
    """`bench`: one time-lane unit at a time; `cpus`: a counting replay takes one, a
    time-lane unit all (so it never runs beside replays); `host:`/`group:`: where a
    comparison's units may go."""
    from dbregress.fleet.coordinator import RESOURCE, group_resource, host_resource
    from dbregress.fleet.lane import CPUS

    return {RESOURCE: 1, CPUS: cpus, host_resource(name): 1, group_resource(group): 1}


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


def serve_scheduler(host: str, port: int, dashboard: str | None, say: Any) -> None:
    from distributed import Scheduler

    async def main() -> None:
        kwargs: dict[str, Any] = {"host": host, "port": port}
        kwargs["dashboard_address"] = dashboard if dashboard else None
        kwargs["dashboard"] = bool(dashboard)
        async with Scheduler(**kwargs) as s:
            link = s.services.get("dashboard")
            say(f"scheduler at {s.address}")
            if link is not None:
                say(f"dashboard at http://{host}:{link.port}/status")
            await _serve_until_signal(s)

    asyncio.run(main())


def serve_worker(
    scheduler: str,
    name: str,
    group: str | None,
    listen: str | None,
    results: Path | None,
    say: Any,
) -> None:
    import dask
    from distributed import Worker

    from dbregress.fleet.unit import worker_state
    from dbregress.runner import work_root

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
        cpus = int(fp.get("cpu_count") or 1)
        kwargs: dict[str, Any] = {
            "nthreads": cpus,  # replays side by side; a time-lane unit takes every CPU
            "name": name,
            "resources": resources(name, fp["group"], cpus),
            "dashboard": False,
            # Its engines run as processes of their own: nothing of a unit lives in the
            # worker's memory for Dask to manage.
            "memory_limit": 0,
            "local_directory": str(own / "dask"),
        }
        if listen:
            kwargs["host"] = listen
        async with Worker(scheduler, **kwargs) as w:
            say(f"worker {name} (group {fp['group']}) at {w.address}, scheduler {scheduler}")
            await _serve_until_signal(w, stop_unit)

    try:
        with dask.config.set(QUIET_WORKER):
            asyncio.run(main())
    finally:
        shutil.rmtree(own, ignore_errors=True)
