"""sysbench's oltp_point_select against dbregress-loadgen's point-query, side by side.

Debian's sysbench 1.0.20 (`oltp_point_select --skip-trx=on --rand-type=uniform`) and the
loadgen's micro point-query step (SELECT c FROM sbtest1 WHERE id = ?, ids drawn
uniformly) drive the same PostgreSQL server and the same MariaDB server: one client, unix
socket, prepared statements, on the table sysbench itself prepared (sbtest1: id, k, c,
pad). Both placements are measured: server and client on the same CPU, and on separate
CPUs (server on the first CPU, client on the second). The two sides run alternately,
--rounds times per placement, the first side alternating between rounds; medians are
reported. QPS is each tool's own count over its own elapsed time; client CPU per query
is sysbench's getrusage (as our child) over its query count, and the loadgen's own
getrusage over its Q (the step result's per_op client_cpu_us), printed whole and split
into user and system time: both tools make the same three system calls per query
(send, poll, receive), so the kernel's share is what no client code can shrink.

    uv run python bench/sysbench_side_by_side.py [--pg-build postgres@system]
        [--mariadb-build mariadb@system] [--seconds 20] [--rows 100000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import shutil
import statistics
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from dbregress import provision
from dbregress.benchmarks import micro
from dbregress.benchmarks.plan import StepPlan
from dbregress.engines.base import EngineOptions, Sizes
from dbregress.execution.execute import make_engine, work_root
from dbregress.execution.step import collect_step
from dbregress.lab.file import Placement
from dbregress.provision import BuildSpec

# sysbench's "    queries:                             123456 (6172.50 per sec.)"
QUERIES_LINE = re.compile(r"^\s*queries:\s+(\d+)\s+\(([\d.]+) per sec\.\)", re.MULTILINE)


def connection_args(conn: dict[str, Any]) -> list[str]:
    """sysbench's flags for the engine's unix socket, user and database."""
    if conn["driver"] == "postgres":
        return [
            "--db-driver=pgsql",
            f"--pgsql-host={conn['socket_dir']}",
            f"--pgsql-port={conn['port']}",
            f"--pgsql-user={conn['user']}",
            f"--pgsql-db={conn['database']}",
        ]
    if conn["driver"] == "mysql":
        return [
            "--db-driver=mysql",
            f"--mysql-socket={conn['socket']}",
            f"--mysql-user={conn.get('user', 'root')}",
            f"--mysql-db={conn['database']}",
        ]
    raise SystemExit(f"sysbench has no driver for {conn['driver']!r}")


def sysbench(args: list[str], what: str) -> str:
    done = subprocess.run(args, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        tail = (done.stdout + done.stderr)[-3000:]
        raise SystemExit(f"sysbench {what} exited with {done.returncode}:\n{tail}")
    return done.stdout


def prepare(engine: Any, rows: int) -> None:
    conn = connection_args(engine.connection())
    sysbench(
        ["sysbench", "oltp_point_select", *conn, "--tables=1", f"--table-size={rows}", "prepare"],
        "prepare",
    )


def run_sysbench(engine: Any, cpu: int, seconds: float, rows: int) -> dict[str, float]:
    args = [
        "taskset",
        "-c",
        str(cpu),
        "sysbench",
        "oltp_point_select",
        *connection_args(engine.connection()),
        "--tables=1",
        f"--table-size={rows}",
        "--threads=1",
        f"--time={seconds:g}",
        "--skip-trx=on",
        "--rand-type=uniform",
        "run",
    ]
    # taskset execs sysbench, and no other child of ours is reaped meanwhile: the
    # children's rusage delta is sysbench's own CPU time.
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = sysbench(args, "run")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    m = QUERIES_LINE.search(out)
    if m is None or int(m.group(1)) == 0:
        raise SystemExit(f"sysbench printed no queries line:\n{out[-3000:]}")
    queries = int(m.group(1))
    user_s, system_s = after.ru_utime - before.ru_utime, after.ru_stime - before.ru_stime
    return {
        "qps": float(m.group(2)),
        "client_us": (user_s + system_s) * 1e6 / queries,
        "user_us": user_s * 1e6 / queries,
        "system_us": system_s * 1e6 / queries,
    }


def run_loadgen(
    engine: Any, placement: Placement, seconds: float, rows: int, stem: Path
) -> dict[str, float]:
    section = {"tables": 1, "rows": rows, "duration_s": seconds}
    plan = StepPlan("point-query", "point-query", section, duration_s=seconds)
    spec = micro.step_spec(engine.connection(), plan, clients=1, seed=1)
    out = collect_step(engine, spec, stem, plan, seconds * 5 + 60, placement, lambda e, r, q: None)
    count, client = out.result["q"]["count"], out.result["client"]
    return {
        "qps": float(out.result["q"]["value"]),
        "client_us": float(out.result["per_op"]["client_cpu_us"]),
        "user_us": client["user_s"] * 1e6 / count,
        "system_us": client["system_s"] * 1e6 / count,
    }


def placements() -> list[Placement]:
    cpus = sorted(os.sched_getaffinity(0))
    same = Placement("same", frozenset(cpus[:1]), frozenset(cpus[:1]))
    if len(cpus) < 2:
        return [same]
    return [same, Placement("separate", frozenset(cpus[:1]), frozenset(cpus[1:2]))]


def measure(
    build: Any, placement: Placement, args: argparse.Namespace, scratch: Path
) -> dict[str, dict[str, float]]:
    """One server for one placement: sysbench prepares, then the sides alternate."""
    tag = f"{build.spec.engine}-{placement.mode}"
    options = EngineOptions(
        workdir=work_root() / f"sysbench-{os.getpid()}-{tag}",
        log_path=scratch / f"{tag}.log",
        config_name="default",
        sizes=Sizes(cache_mb=512, wal_mb=1024),
        cpus=placement.server_cpus,
    )
    assert placement.client_cpus is not None
    client_cpu = min(placement.client_cpus)
    runs: dict[str, list[dict[str, float]]] = {"sysbench": [], "loadgen": []}
    engine = make_engine(build, options)
    try:
        engine.start()
        prepare(engine, args.rows)
        for i in range(args.rounds):
            sides = ["sysbench", "loadgen"] if i % 2 == 0 else ["loadgen", "sysbench"]
            for side in sides:
                if side == "sysbench":
                    r = run_sysbench(engine, client_cpu, args.seconds, args.rows)
                else:
                    stem = scratch / f"{tag}-r{i}"
                    r = run_loadgen(engine, placement, args.seconds, args.rows, stem)
                runs[side].append(r)
    finally:
        engine.stop()
        shutil.rmtree(options.workdir, ignore_errors=True)
    out = {
        side: {
            k: statistics.median(r[k] for r in rs)
            for k in ("qps", "client_us", "user_us", "system_us")
        }
        for side, rs in runs.items()
    }
    # Each round's own ratios (the two sides ran back to back): their range is the spread.
    pairs = list(zip(runs["loadgen"], runs["sysbench"], strict=True))
    out["spread"] = {
        "qps_lo": min(lg["qps"] / sb["qps"] for lg, sb in pairs),
        "qps_hi": max(lg["qps"] / sb["qps"] for lg, sb in pairs),
        "cpu_lo": min(lg["client_us"] / sb["client_us"] for lg, sb in pairs),
        "cpu_hi": max(lg["client_us"] / sb["client_us"] for lg, sb in pairs),
    }
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--pg-build", default="postgres@system", help="'' leaves PostgreSQL out")
    p.add_argument("--mariadb-build", default="mariadb@system", help="'' leaves MariaDB out")
    p.add_argument("--seconds", type=float, default=20.0)
    p.add_argument("--rows", type=int, default=100_000)
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args()
    builds = [
        provision.fetch(BuildSpec.parse(spec))
        for spec in (args.pg_build, args.mariadb_build)
        if spec
    ]
    version = sysbench(["sysbench", "--version"], "--version").strip()
    print(
        f"{version}; {'; '.join(b.version_string for b in builds)}; "
        f"{args.seconds:g} s per run, {args.rounds} rounds (medians), 1 client, "
        f"table of {args.rows} rows",
        flush=True,
    )
    scratch = Path(tempfile.mkdtemp(prefix="bench-sysbench-"))
    rows: list[str] = []
    try:
        for build in builds:
            for placement in placements():
                m = measure(build, placement, args, scratch)
                sb, lg, sp = m["sysbench"], m["loadgen"], m["spread"]
                rows.append(
                    f"| {build.spec} | {placement.mode} | {sb['qps']:,.0f} | {lg['qps']:,.0f} | "
                    f"{sb['client_us']:.1f} | {lg['client_us']:.1f} | "
                    f"{lg['qps'] / sb['qps']:.2f} ({sp['qps_lo']:.2f}-{sp['qps_hi']:.2f}) | "
                    f"{lg['client_us'] / sb['client_us']:.2f} "
                    f"({sp['cpu_lo']:.2f}-{sp['cpu_hi']:.2f}) | "
                    f"{sb['user_us']:.2f} / {sb['system_us']:.2f} | "
                    f"{lg['user_us']:.2f} / {lg['system_us']:.2f} | "
                    f"{lg['user_us'] / sb['user_us']:.2f} | "
                    f"{lg['system_us'] / sb['system_us']:.2f} |"
                )
                print(f"done: {build.spec}, {placement.mode}", flush=True)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    print(
        "| engine | placement | sysbench QPS | loadgen QPS | sysbench µs/query | "
        "loadgen µs/query | QPS loadgen/sysbench (rounds' range) | "
        "CPU loadgen/sysbench (rounds' range) | sysbench user / sys µs/query | "
        "loadgen user / sys µs/query | user loadgen/sysbench | sys loadgen/sysbench |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for line in rows:
        print(line)


if __name__ == "__main__":
    main()
