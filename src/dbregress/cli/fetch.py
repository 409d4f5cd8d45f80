"""dbregress fetch ENGINE@VERSION...: bring builds into the cache."""

from __future__ import annotations

import argparse
import json
from typing import Any

from dbregress import provision
from dbregress.model import interrupts
from dbregress.model.errors import LabError
from dbregress.provision import BuildSpec, source


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "fetch",
        help="fetch builds into the build cache",
        description="Fetch builds (e.g. postgres@17.2.0) into the build cache; "
        "a cached build is reused.",
    )
    p.add_argument("builds", nargs="+", metavar="ENGINE@VERSION")
    p.add_argument(
        "--why",
        action="store_true",
        help="for source builds (ENGINE@src:...): print the build's cache key and every "
        "input it is made of (tree, submodules, recipe, compilers, tools, options, "
        "environment, CPU for native flavors) as JSON, and whether it is built; builds "
        "nothing",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.why:
        specs = [BuildSpec.parse(text) for text in args.builds]
        other = [str(s) for s in specs if not s.is_source]
        if other:
            raise LabError(
                f"--why is for source builds (ENGINE@src:PATH...); not: {', '.join(other)}"
            )
        out = {str(s): source.why(s) for s in specs}
        print(json.dumps(out, indent=2, sort_keys=True))
        return 0
    interrupts.install()  # a SIGTERM stops a source build's compilers too (build.py)
    for text in args.builds:
        build = provision.fetch(BuildSpec.parse(text))
        print(f"{text}: {build.version_string} in {build.basedir}")
    return 0
