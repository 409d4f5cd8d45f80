"""Client cost of a point-query load: dbregress-loadgen against a Python (psycopg) client.

Both drive the Insert Benchmark's point query (SELECT transactionid, productid, data
FROM pi1 WHERE transactionid IN (10 random live ids)), one client, prepared, against the
same PostgreSQL server, with the same CPU placement for both sides. Prints QPS and client
CPU µs/query side by side, per placement, and the ratio of client CPU per query.

    uv run python bench/point_query_client.py [--build postgres@system] [--seconds 20]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from dbregress import provision
from dbregress.benchmarks.insert import step_spec
from dbregress.benchmarks.plan import StepPlan
from dbregress.collect.proc import snapshot_tree
from dbregress.engines.base import EngineOptions, Sizes
from dbregress.execution.execute import make_engine, work_root
from dbregress.execution.step import collect_step
from dbregress.lab.file import Placement
from dbregress.provision import BuildSpec

POINT_QUERY = "SELECT transactionid, productid, data FROM pi1 WHERE transactionid = ANY(%s)"


def psycopg_worker(conninfo: dict[str, Any], seconds: float, lo: int, hi: int) -> None:
    """Runs in its own (pinned) process; prints one JSON line with its own counts."""
    import psycopg

    rng = random.Random(7)
    with psycopg.connect(
        host=conninfo["socket_dir"],
        port=conninfo["port"],
        user=conninfo["user"],
        dbname=conninfo["database"],
        autocommit=True,
    ) as conn:
        cur = conn.cursor()
        queries = rows = 0
        cpu0, t0 = resource.getrusage(resource.RUSAGE_SELF), time.monotonic()
        end = t0 + seconds
        while time.monotonic() < end:
            ids = rng.sample(range(lo, hi + 1), 10)
            cur.execute(POINT_QUERY, (ids,), prepare=True)
            rows += len(cur.fetchall())
            queries += 1
        elapsed = time.monotonic() - t0
        cpu1 = resource.getrusage(resource.RUSAGE_SELF)
    cpu = (cpu1.ru_utime - cpu0.ru_utime) + (cpu1.ru_stime - cpu0.ru_stime)
    if rows != 10 * queries:
        raise SystemExit(f"psycopg client: {rows} rows for {queries} queries, expected 10 each")
    print(json.dumps({"queries": queries, "elapsed_s": elapsed, "cpu_s": cpu}))


def run_psycopg(engine: Any, placement: Placement, seconds: float, rows: int) -> dict[str, float]:
    def pin() -> None:
        if placement.client_cpus is not None:
            os.sched_setaffinity(0, placement.client_cpus)

    before = snapshot_tree(engine.server_pid())
    out = subprocess.run(
        [
            sys.executable,
            __file__,
            "--worker",
            json.dumps(engine.connection()),
            str(seconds),
            str(rows),
        ],
        check=True,
        capture_output=True,
        text=True,
        preexec_fn=pin,
    ).stdout
    usage = before.delta(snapshot_tree(engine.server_pid()))
    r = json.loads(out)
    return {
        "qps": r["queries"] / r["elapsed_s"],
        "client_us": r["cpu_s"] * 1e6 / r["queries"],
        "server_us": (usage.user_s + usage.system_s) * 1e6 / r["queries"],
    }


def run_loadgen(engine: Any, placement: Placement, seconds: float, stem: Path) -> dict[str, float]:
    plan = StepPlan("qp", "qp", {"duration_s": seconds, "insert_rate": 0}, duration_s=seconds)
    spec = step_spec(engine.connection(), plan, clients=1, seed=7)
    out = collect_step(engine, spec, stem, plan, seconds * 5 + 60, placement, lambda e, r, q: None)
    per_op = out.result["per_op"]
    return {
        "qps": out.result["q"]["value"],
        "client_us": per_op["client_cpu_us"],
        "server_us": per_op["server_cpu_us"],
    }


def load(engine: Any, rows: int, stem: Path) -> None:
    plan = StepPlan("l.i0", "l.i0", {"rows": rows, "rows_per_commit": 100})
    spec = step_spec(engine.connection(), plan, clients=1, seed=1)
    collect_step(
        engine, spec, stem, plan, 600, Placement("unpinned", None, None), lambda e, r, q: None
    )


def placements() -> list[Placement]:
    cpus = sorted(os.sched_getaffinity(0))
    same = Placement("same", frozenset(cpus[:1]), frozenset(cpus[:1]))
    if len(cpus) < 2:
        return [same]
    return [same, Placement("separate", frozenset(cpus[:1]), frozenset(cpus[1:2]))]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--build", default="postgres@system")
    p.add_argument("--seconds", type=float, default=20.0)
    p.add_argument("--rows", type=int, default=200_000)
    args = p.parse_args()
    build = provision.fetch(BuildSpec.parse(args.build))
    scratch = Path(tempfile.mkdtemp(prefix="bench-pq-"))
    print(
        f"{build.version_string}; {args.seconds:.0f} s per run, 1 client, "
        f"table of {args.rows} rows",
        flush=True,
    )
    print("| placement | client | QPS | client µs/query | server µs/query |")
    print("|---|---|---|---|---|")
    for placement in placements():
        options = EngineOptions(
            workdir=work_root() / f"bench-{os.getpid()}-{placement.mode}",
            log_path=scratch / "server.log",
            config_name="default",
            sizes=Sizes(cache_mb=256, wal_mb=1024),
            cpus=placement.server_cpus,
        )
        engine = make_engine(build, options)
        try:
            engine.start()
            load(engine, args.rows, scratch / "load")
            lg = run_loadgen(engine, placement, args.seconds, scratch / "qp")
            py = run_psycopg(engine, placement, args.seconds, args.rows)
        finally:
            engine.stop()
            shutil.rmtree(options.workdir, ignore_errors=True)
        for name, r in (("dbregress-loadgen", lg), ("psycopg", py)):
            print(
                f"| {placement.mode} | {name} | {r['qps']:,.0f} | {r['client_us']:.1f} | "
                f"{r['server_us']:.1f} |",
                flush=True,
            )
        print(
            f"| {placement.mode} | ratio loadgen/psycopg | {lg['qps'] / py['qps']:.2f} | "
            f"{lg['client_us'] / py['client_us']:.2f} | |",
            flush=True,
        )


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "--worker":
        psycopg_worker(json.loads(sys.argv[2]), float(sys.argv[3]), 1, int(sys.argv[4]))
    else:
        main()
