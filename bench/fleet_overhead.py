"""What the fleet costs per unit of work: a simulated fleet of many workers on this host.

    uv run python bench/fleet_overhead.py [--workers 100] [--comparisons 100]
    uv run python bench/fleet_overhead.py show RUN

Starts a Dask scheduler and --workers workers in one process (in-process workers, one
thread each, with the resources and fingerprints `dbregress worker` gives them, all of
one group), then runs a lab of --comparisons comparisons of the null engine (no database:
its loadgen's driver does nothing) through `dbregress run --scheduler` as a user would:
each comparison on its own host (the jobs schedule), a warm-up unit and two rounds each.

From the run's unit timeline (run.json `fleet_units`) it prints, per unit:
- dispatch: from the moment the unit could start (submitted, or its host's previous unit
  ended) to the worker starting it;
- return: from the worker's end of the unit to the coordinator having stored it;
- setup: the worker's own time outside the jobs is not separated (it is in the unit);
and the lab's wall time against the units' own time. The sum of dispatch and return is
the scheduler's overhead per unit (a unit is one warm-up job or one round of two jobs).
Every worker and loadgen shares this host's cores, so the units' own times are inflated;
the overhead figures are what the fleet adds on top.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

LAB_HEAD = """\
name = "fleet-sim"
placement = "unpinned"
repeats = 2
count = false
"""

COMPARISON = """
[[comparison]]
name = "c{i:03d}"
benchmark = "kv"
[[comparison.column]]
label = "a{i:03d}"
build = "null@0"
[[comparison.column]]
label = "b{i:03d}"
build = "null@0"
[comparison.kv]
keys = 1000
seconds = 0.2
warmup_s = 0
steps = ["fillseq", "readrandom"]
"""


def serve(port: int, workers: int, root: Path) -> None:
    """The simulated fleet: a scheduler and `workers` in-process workers."""
    import dask
    from distributed import Scheduler, Worker

    from dbregress.fleet.host import fingerprint
    from dbregress.fleet.unit import worker_state
    from dbregress.fleet.worker import QUIET_WORKER, resources

    dask.config.set(QUIET_WORKER)

    async def main() -> None:
        async with Scheduler(host="127.0.0.1", port=port, dashboard=False) as s:
            fp = fingerprint("sim", None, None)
            started = []
            for i in range(workers):
                name = f"sim{i:03d}"
                worker_state(name, root / name / "scratch", {**fp, "name": name, "cpu_count": 1})
                started.append(
                    Worker(
                        s.address,
                        nthreads=1,
                        name=name,
                        resources=resources(name, fp["group"], 1),
                        dashboard=False,
                        memory_limit=0,
                        local_directory=str(root / name / "dask"),
                    )
                )
            await asyncio.gather(*started)
            print(f"ready {s.address}", flush=True)
            await s.finished()

    asyncio.run(main())


def show(run: Path) -> None:
    record = json.loads((run / "run.json").read_text())
    units = sorted(record.get("fleet_units", []), key=lambda u: u["started"])
    if not units:
        sys.exit(f"{run}: no fleet_units: not a fleet run")
    free_at: dict[str, float] = {}
    dispatch, back, own = [], [], []
    for u in units:
        ready = max(u["submitted"], free_at.get(u["host"], 0.0))
        dispatch.append(u["started"] - ready)
        back.append(u["received"] - u["ended"])
        own.append(u["ended"] - u["started"])
        free_at[u["host"]] = u["ended"]
    jobs = len(record["jobs"])
    start = min(u["submitted"] for u in units)
    wall = max(u["received"] for u in units) - start
    hosts = len({u["host"] for u in units})

    def q(xs: list[float], f: float) -> float:
        xs = sorted(xs)
        return xs[min(len(xs) - 1, int(f * len(xs)))]

    print(f"run {run.name}: {len(units)} units ({jobs} jobs) on {hosts} hosts, wall {wall:.1f} s")
    store = record.get("fleet_store") or {}
    if store:
        print(
            f"coordinator: {store['messages']} messages stored in {store['busy_s']:.1f} s "
            f"({1000 * store['busy_s'] / max(1, store['messages']):.1f} ms each, "
            f"{store['busy_s'] / wall:.0%} of the wall time)"
        )
    print("per unit (s)        median     p90     max")
    for name, xs in (("dispatch", dispatch), ("return", back), ("own time", own)):
        print(f"  {name:<16} {statistics.median(xs):8.3f} {q(xs, 0.9):7.3f} {max(xs):7.3f}")
    total = [d + b for d, b in zip(dispatch, back, strict=True)]
    print(
        "scheduler overhead per unit (dispatch + return): "
        f"median {statistics.median(total):.3f} s, p90 {q(total, 0.9):.3f} s; "
        f"per job {sum(total) / jobs:.3f} s"
    )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("what", nargs="*", help="nothing to run the simulation; `show RUN`")
    p.add_argument("--workers", type=int, default=100)
    p.add_argument("--comparisons", type=int, default=100)
    p.add_argument("--port", type=int, default=8799)
    p.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--root", type=Path, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.serve:
        serve(args.port, args.workers, args.root)
        return
    if args.what:
        if args.what[0] != "show" or len(args.what) != 2:
            sys.exit("usage: fleet_overhead.py [--workers N] [--comparisons N] | show RUN")
        show(Path(args.what[1]))
        return
    tmp = Path(tempfile.mkdtemp(prefix="fleet-sim-"))
    workdir = Path("/var/tmp") / f"dbregress-fleet-sim-{os.getpid()}"
    workdir.mkdir(mode=0o755, exist_ok=True)
    env = {**os.environ, "DBREGRESS_WORKDIR": str(workdir), "DASK_LOGGING__DISTRIBUTED": "warning"}
    fleet = subprocess.Popen(
        [
            sys.executable,
            __file__,
            "--serve",
            "--port",
            str(args.port),
            "--workers",
            str(args.workers),
            "--root",
            str(workdir),
        ],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert fleet.stdout is not None
        line = fleet.stdout.readline()
        if not line.startswith("ready"):
            sys.exit(f"the simulated fleet did not start: {line!r}")
        lab = tmp / "fleet-sim.toml"
        lab.write_text(LAB_HEAD + "".join(COMPARISON.format(i=i) for i in range(args.comparisons)))
        t0 = time.monotonic()
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "dbregress.cli.main",
                "run",
                str(lab),
                "--scheduler",
                f"tcp://127.0.0.1:{args.port}",
                "--results",
                str(tmp / "results"),
            ],
            env=env,
            capture_output=True,
            text=True,
        )
        if done.returncode != 0:
            sys.exit(f"the lab failed ({done.returncode}):\n{done.stderr[-3000:]}")
        print(f"dbregress run --scheduler: {time.monotonic() - t0:.1f} s")
        (run,) = (tmp / "results").glob("2*")
        show(run)
    finally:
        fleet.terminate()
        fleet.wait(60)
        subprocess.run(["rm", "-rf", str(workdir)], check=False)


if __name__ == "__main__":
    main()
