"""dbregress fetch ENGINE@VERSION...: bring builds into the cache."""

from __future__ import annotations

import argparse
from typing import Any

from dbregress import provision
from dbregress.provision import BuildSpec


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "fetch",
        help="fetch builds into the build cache",
        description="Fetch builds (e.g. postgres@17.2.0) into the build cache; "
        "a cached build is reused.",
    )
    p.add_argument("builds", nargs="+", metavar="ENGINE@VERSION")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    for text in args.builds:
        build = provision.fetch(BuildSpec.parse(text))
        print(f"{text}: {build.version_string} in {build.basedir}")
    return 0
