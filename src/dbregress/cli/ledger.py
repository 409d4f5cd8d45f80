"""dbregress ledger: the drift ledger (docs/ledger.md). Of a run: per comparison of two
or more columns, each column's cumulative change from the first and its increment over
the one before, per step, in the cost lane and the time lane. Of a lab's history
(`--lab LAB --reference RUN_OR_BUILD`): the same over its runs from a pinned reference,
cost lane only. `--fail-on drift:P%` exits 1 when a step's cumulative cost change is
beyond P% (whole interval above 1 + P), naming each such step and its largest
contributors."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from dbregress.cli import report
from dbregress.cli.exits import EXIT_OK, EXIT_SLOWER, EXIT_UNJUDGED
from dbregress.model.errors import DbregressError
from dbregress.report import ledger
from dbregress.store.run import resolve_run

FORMATS = ("md", "json", "tsv")


def drift_limit(text: str) -> float:
    """`drift:P%` (or `drift:P`) -> P / 100."""
    if not text.startswith("drift:"):
        raise argparse.ArgumentTypeError(f"expected drift:P% (e.g. drift:0.5%), got {text!r}")
    try:
        return report.drift_limit(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "ledger",
        help="the drift ledger: each column's (or night's) cumulative change and increment",
        description="The drift ledger of a run (its comparisons' columns in order: each "
        "column's cumulative change from the first and its increment over the one before, "
        "per step and lane, with intervals and classes), or of a lab's history from a pinned "
        "reference (--lab LAB --reference RUN_OR_BUILD; cost lane). The product of the "
        "increments is set against the total, with the remainder said.",
    )
    p.add_argument("run", nargs="?", help="a run folder, a run id under --results, or latest")
    p.add_argument("--lab", help="the lab's history instead of one run (with --reference)")
    p.add_argument(
        "--reference",
        help="with --lab: a run id (its base columns) or a build (the first column that "
        "measured it) every later point is compared with",
    )
    p.add_argument("--results", type=Path, default=Path("results"), help="the results folder")
    p.add_argument("--step", help="one step only")
    p.add_argument("--lane", choices=("cost", "time", "both"), default="both")
    p.add_argument("--format", choices=FORMATS, default="md")
    p.add_argument(
        "--fail-on",
        type=drift_limit,
        metavar="drift:P%",
        help="exit 1 when a step's cumulative cost change is beyond P%% (its whole "
        "interval above 1 + P), even inside the cost band",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.lab:
        if args.run:
            raise DbregressError("give a run or --lab LAB --reference REF, not both")
        if not args.reference:
            raise DbregressError(
                "--lab needs --reference RUN_OR_BUILD: the ledger of a history is kept "
                "from a pinned reference, never from the last good run"
            )
        found = ledger.lab_ledger(args.results, args.lab, args.reference, args.step)
    else:
        if not args.run:
            raise DbregressError("give a run (a folder, a run id or latest), or --lab LAB")
        if args.reference:
            raise DbregressError("--reference goes with --lab; a run's ledger starts at its base")
        lanes = ("cost", "time") if args.lane == "both" else (args.lane,)
        found = ledger.run_ledger(resolve_run(args.run, args.results), args.step, lanes)
    sys.stdout.write(ledger.dumps(found, args.format, args.fail_on))
    if args.fail_on is not None:
        found_drift = ledger.beyond(found, args.fail_on)
        for d in found_drift:
            print(f"drift: {ledger.drift_line(d, args.fail_on)}", file=sys.stderr)
        if found_drift:
            return EXIT_SLOWER
        missing = ledger.gaps(found, args.fail_on)
        for line in missing:
            print(f"drift not judged: {line}", file=sys.stderr)
        return EXIT_UNJUDGED if missing else EXIT_OK
    return EXIT_OK
