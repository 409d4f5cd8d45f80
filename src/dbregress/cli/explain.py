"""dbregress explain RUN: instructions, simulated cache misses and branch
mispredictions per operation, the top functions, flame graphs, and a named cause per
slower step (docs/metrics.md, "Explanations")."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from dbregress.explain.explainer import ExplainRequest, explain
from dbregress.model import interrupts
from dbregress.report.explanations import causes_text
from dbregress.store.run import resolve_run


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "explain",
        help="measure why steps of a run got slower (valgrind, perf)",
        description="Start each build as the run did, replay the benchmark, and run the "
        "chosen steps under valgrind's callgrind (instructions, simulated cache misses "
        "and branch mispredictions per operation, per function) and under perf (flame "
        "graphs). Writes explain/explain.json into the run folder; `dbregress report` "
        "then adds an Explanations section with a named cause per slower step.",
    )
    p.add_argument("run", help="run folder, run id under --results, or 'latest'")
    p.add_argument("--results", type=Path, default=Path("results"))
    p.add_argument(
        "--step",
        action="append",
        default=[],
        metavar="STEP",
        help="a step to explain (repeatable; default: every step with a `slower` verdict, "
        "else every step)",
    )
    p.add_argument(
        "--column",
        action="append",
        default=[],
        metavar="LABEL",
        help="a column to measure (repeatable; default: every column of each comparison, "
        "the base included)",
    )
    p.add_argument(
        "--ops",
        type=int,
        metavar="N",
        help="Q calls counted per window, after N/2 warm-up calls (default: sized from "
        "the run: about 100 ms of the step's calls, 20 to 2000; for a fixed-work step the "
        "middle half of its calls, at most 20000)",
    )
    p.add_argument(
        "--no-profile",
        action="store_true",
        help="skip the perf jobs (no flame graphs)",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.ops is not None and args.ops < 1:
        raise SystemExit("dbregress explain: --ops must be at least 1")
    interrupts.install()
    path = resolve_run(args.run, args.results)
    request = ExplainRequest(
        run=path,
        steps=tuple(args.step),
        columns=tuple(args.column),
        ops=args.ops,
        profile=not args.no_profile,
    )
    written = explain(request, lambda line: print(line, file=sys.stderr, flush=True))
    print(causes_text(path))
    print(f"Explanations: {written} (dbregress report {path} adds them to report.md)")
    return 0
