"""dbregress site: the run history of a results folder as a static site (site/write.py,
docs/history.md "The site"): an index of labs, a page per step with both lanes over the
runs, a "what moved" page per lab, version-series pages, and their data as JSON. It
opens from disk with no server and no network; written again, only what changed is."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from dbregress.site.write import build_site


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "site",
        help="write the run history as a static site (HTML and JSON, opens from disk)",
        description="Write a static site of every lab in the results folder's run history: "
        "an index (each lab's last run, open regressions, what it did not judge, the nightly "
        "recipe's nights and a sparkline per step), a page "
        "per step with both lanes over the runs (change points marked, method boundaries "
        "drawn, each point linked to its run's report), a 'what moved' page per lab, and "
        "version-series pages. Only files whose content changed are written again.",
    )
    p.add_argument("--results", type=Path, default=Path("results"), help="the results folder")
    p.add_argument(
        "--out", type=Path, default=None, help="where the site goes (default: RESULTS/site)"
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    root: Path = args.results
    out: Path = args.out if args.out is not None else root / "site"
    done = build_site(root, out)
    for line in done.problems:
        print(f"warning: {line}", file=sys.stderr)
    labs = len(done.labs_read) + len(done.labs_kept)
    print(
        f"site: {labs} lab(s) ({len(done.labs_read)} read, {len(done.labs_kept)} unchanged); "
        f"{len(done.written)} file(s) written, {len(done.unchanged)} unchanged, "
        f"{len(done.removed)} removed; {done.seconds:.1f} s; open {out / 'index.html'}"
    )
    return 0
