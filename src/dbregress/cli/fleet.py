"""dbregress scheduler / worker / fleet-certs: the processes of a fleet and its
certificates (docs/fleet.md)."""

from __future__ import annotations

import argparse
import socket
import sys
from pathlib import Path
from typing import Any

from dbregress.fleet.tls import ENV, tls_dir
from dbregress.model.errors import LabError


def add_tls(p: argparse.ArgumentParser) -> None:
    """--tls DIR: this host's certificates (a folder `dbregress fleet-certs` made)."""
    p.add_argument(
        "--tls",
        type=Path,
        metavar="DIR",
        help="this host's fleet certificates (ca.pem, cert.pem, key.pem: a host's folder "
        f"from `dbregress fleet-certs`); default ${ENV}. Without them the fleet stays on "
        "loopback",
    )


def add_parser(sub: Any) -> None:
    _add_certs(sub)
    _add_scheduler(sub)
    _add_worker(sub)


def _add_certs(sub: Any) -> None:
    c = sub.add_parser(
        "fleet-certs",
        help="make a fleet's TLS certificates",
        description="Make a fleet's certificate authority (DIR/ca.pem, DIR/ca-key.pem) and "
        "a folder per host (DIR/HOST: ca.pem, cert.pem, key.pem) to copy to that host and "
        "give to its scheduler, worker and coordinator as --tls. Run again with new "
        "hosts to add them to the same fleet (docs/fleet.md).",
    )
    c.add_argument("dir", type=Path, metavar="DIR", help="folder of the fleet's certificates")
    c.add_argument(
        "--hosts",
        required=True,
        help="the hosts' names, comma-separated (the coordinator's and every benchmark "
        "host's), e.g. coord,bench1,bench2",
    )
    c.set_defaults(func=certs)


def _add_scheduler(sub: Any) -> None:
    s = sub.add_parser(
        "scheduler",
        help="start a fleet's Dask scheduler",
        description="Start the Dask scheduler that a fleet's workers join and "
        "`dbregress run LAB --scheduler ADDR` sends labs to (docs/fleet.md).",
    )
    s.add_argument(
        "--host",
        default="127.0.0.1",
        help="address to listen on (default: loopback; any other needs --tls)",
    )
    s.add_argument("--port", type=int, default=8786, help="port (default: 8786)")
    s.add_argument(
        "--dashboard",
        default="8787",
        metavar="ADDR",
        help="the Dask dashboard's PORT (on loopback) or HOST:PORT (e.g. 0.0.0.0:8787 to "
        "show it to the network); default 8787 on loopback; 'none' for no dashboard",
    )
    add_tls(s)
    s.set_defaults(func=scheduler)


def _add_worker(sub: Any) -> None:
    w = sub.add_parser(
        "worker",
        help="join a fleet as a benchmark host",
        description="Join the fleet of a Dask scheduler as a benchmark host: run one "
        "unit of a lab at a time, fetch its builds, send every step to the coordinator.",
    )
    w.add_argument(
        "--scheduler",
        required=True,
        metavar="ADDR",
        help="e.g. tls://coord:8786 (with --tls), or tcp://127.0.0.1:8786",
    )
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
    w.add_argument(
        "--listen",
        metavar="HOST",
        help="address the worker listens on (default: with --tls, the one that reaches the "
        "scheduler; without, loopback)",
    )
    add_tls(w)
    w.add_argument(
        "--results",
        type=Path,
        default=Path("results"),
        help="where this host's calibration is (dbregress calibrate --results), to tell "
        "the fleet its noise (default: results)",
    )
    w.set_defaults(func=worker)


def certs(args: argparse.Namespace) -> int:
    from dbregress.fleet.tls import CA_CERT, CA_KEY, make_certs

    hosts = [h.strip() for h in args.hosts.split(",") if h.strip()]
    new_ca, made = make_certs(args.dir, hosts)
    ca = args.dir / CA_CERT
    print(f"{'made the fleet CA' if new_ca else 'signed with the fleet CA'} {ca}")
    for folder in made:
        print(f"  {folder.name}: copy {folder}/ to that host (ca.pem, cert.pem, key.pem)")
    print(
        f"Keep {args.dir / CA_KEY} here, on no other host (it signs new members); each "
        "host gives its folder to dbregress scheduler/worker/run/bisect as --tls DIR (or "
        f"${ENV}=DIR). Keys are written 0600: copy them so (scp -p, or chmod 600)."
    )
    return 0


def scheduler(args: argparse.Namespace) -> int:
    from dbregress.fleet.worker import dashboard_address, serve_scheduler

    serve_scheduler(
        args.host,
        args.port,
        dashboard_address(args.dashboard),
        lambda line: print(line, flush=True),
        tls_dir(args.tls),
    )
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
        tls_dir(args.tls),
    )
    return 0
