"""dbregress scheduler / dbregress worker: the processes of a fleet (docs/fleet.md)."""

from __future__ import annotations

import argparse
import socket
import sys
from pathlib import Path
from typing import Any

from dbregress.errors import LabError


def add_parser(sub: Any) -> None:
    s = sub.add_parser(
        "scheduler",
        help="start a fleet's Dask scheduler",
        description="Start the Dask scheduler that a fleet's workers join and "
        "`dbregress run LAB --scheduler ADDR` sends labs to (docs/fleet.md).",
    )
    s.add_argument("--host", default="127.0.0.1", help="address to listen on (default: loopback)")
    s.add_argument("--port", type=int, default=8786, help="port (default: 8786)")
    s.add_argument(
        "--dashboard",
        default=":8787",
        metavar="ADDR",
        help="the Dask dashboard's [host]:port (default :8787); 'none' for no dashboard",
    )
    s.set_defaults(func=scheduler)

    w = sub.add_parser(
        "worker",
        help="join a fleet as a benchmark host",
        description="Join the fleet of a Dask scheduler as a benchmark host: run one "
        "unit of a lab at a time, fetch its builds, send every step to the coordinator.",
    )
    w.add_argument("--scheduler", required=True, metavar="ADDR", help="e.g. tcp://host:8786")
    w.add_argument(
        "--name",
        default=socket.gethostname(),
        help="this host's name in the fleet (default: the hostname); a worker started "
        "again under the same name takes the units that wait for it",
    )
    w.add_argument(
        "--group",
        help="a group of identical hosts this one belongs to (default: the hosts whose "
        "CPU, cores, memory, kernel, governor and virtualization are the same)",
    )
    w.add_argument("--listen", metavar="HOST", help="address the worker listens on")
    w.add_argument(
        "--results",
        type=Path,
        default=Path("results"),
        help="where this host's calibration is (dbregress calibrate --results), to tell "
        "the fleet its noise (default: results)",
    )
    w.set_defaults(func=worker)


def scheduler(args: argparse.Namespace) -> int:
    from dbregress.fleet.worker import serve_scheduler

    dashboard = None if args.dashboard == "none" else args.dashboard
    serve_scheduler(args.host, args.port, dashboard, lambda line: print(line, flush=True))
    return 0


def worker(args: argparse.Namespace) -> int:
    from dbregress.fleet.worker import serve_worker

    if not args.name or "/" in args.name or ":" in args.name:
        raise LabError(f"--name {args.name!r}: give a name without '/' or ':'")
    serve_worker(
        args.scheduler,
        args.name,
        args.group,
        args.listen,
        args.results,
        lambda line: print(line, file=sys.stderr, flush=True),
    )
    return 0
