"""dbregress versions ENGINE: the versions that can be fetched."""

from __future__ import annotations

import argparse
from typing import Any

from dbregress import provision


def add_parser(sub: Any) -> None:
    p = sub.add_parser("versions", help="list the versions of an engine that can be fetched")
    p.add_argument("engine", choices=provision.ENGINES)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    for version in provision.versions(args.engine):
        print(version)
    print("system")
    return 0
