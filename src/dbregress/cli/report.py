"""dbregress report RUN: print and write the Markdown report of a run."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from dbregress.analysis.summary import matrices
from dbregress.report import markdown
from dbregress.store.files import write_atomic
from dbregress.store.run import read_run, resolve_run


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "report",
        help="print and write a run's report",
        description="Print a run's Markdown report and write it to <run>/report.md.",
    )
    p.add_argument("run", help="run folder, run id under --results, or 'latest'")
    p.add_argument("--results", type=Path, default=Path("results"))
    p.set_defaults(func=run)


def write_report(path: Path, summary: bool = False) -> str:
    """Writes report.md into the run folder; returns the text to print."""
    data = read_run(path)
    m = matrices(data.record, data.steps)
    full = markdown.render(data.record, m)
    write_atomic(path / "report.md", full)
    shown = markdown.summary_tables(data.record, m) if summary else full
    return f"{shown}\nReport: {path / 'report.md'}"


def run(args: argparse.Namespace) -> int:
    print(write_report(resolve_run(args.run, args.results)))
    return 0
