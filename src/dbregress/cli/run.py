"""dbregress run LAB: run every job of a lab, then print the summary tables."""

from __future__ import annotations

import argparse
import dataclasses
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from dbregress.analysis.compare import RunVerdicts
from dbregress.analysis.gate import bugs
from dbregress.cli import progress
from dbregress.cli.exits import EXIT_CRASH, EXIT_SLOWER
from dbregress.cli.fleet import add_tls
from dbregress.cli.report import add_fail_on, gate, write_report
from dbregress.collect.valgrind import require as require_valgrind
from dbregress.explain.explainer import ExplainRequest, explain, require_explainable
from dbregress.lab.file import Lab, load_lab
from dbregress.model import interrupts
from dbregress.model.errors import DbregressError, InternalError, Interrupted, LabError
from dbregress.store.replays import load_replays
from dbregress.store.run import read_run, resolve_run
from dbregress.workflow.lab_run import run_lab, runner_for


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "run",
        help="run a lab file",
        description="Run a lab file: fetch its "
        "builds, run every step on each, store results, print a summary.",
    )
    p.add_argument("lab", type=Path, nargs="?", help="lab file (TOML), see docs/lab-file.md")
    p.add_argument(
        "--resume",
        metavar="RUN",
        help="continue an interrupted run (a run folder, a run id under --results, or "
        "'latest') with the lab file stored in it: finished jobs are kept, the interrupted "
        "one runs again from its start",
    )
    p.add_argument(
        "--results",
        type=Path,
        default=Path("results"),
        help="folder that receives the run folder (default: results)",
    )
    p.add_argument(
        "--scheduler",
        metavar="ADDR",
        help="run the lab's jobs on a fleet: the address of its Dask scheduler "
        "(dbregress scheduler; docs/fleet.md). Without it, everything runs here",
    )
    p.add_argument(
        "--recount",
        action="store_true",
        help="count every replay anew: take none from the count store (as `recount = "
        "true` in the lab file; each counted replay still goes into it)",
    )
    add_tls(p)
    add_fail_on(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if (args.lab is None) == (args.resume is None):
        raise LabError("give a lab file to run, or --resume RUN to continue one (not both)")
    interrupts.install()
    resume = resolve_run(args.resume, args.results) if args.resume else None
    return run_loaded(load_lab(resume / "lab.toml" if resume else args.lab), args, resume)


Hook = Callable[[Path], None]


def run_loaded(
    lab: Lab,
    args: argparse.Namespace,
    resume: Path | None = None,
    started: Hook | None = None,
    reported: Hook | None = None,
) -> int:
    """Runs a loaded lab as `dbregress run` does (args: its options), prints its report
    and returns the exit status. `started` gets the run folder once it exists, `reported`
    once its report (verdicts.json) is written, before the gate answers (`dbregress
    study run` writes its record and its page there)."""
    if args.recount:
        lab = dataclasses.replace(lab, recount=True)
    if lab.explain:
        require_explainable(lab)  # before hours of running, not after
    if lab.count and not args.scheduler:  # asked for: a missing valgrind is an error, now
        require_valgrind("the cost lane (count = true)", ", or set count = false")
    display = progress.for_stderr()  # a live display on a terminal, else a line per step
    runner = runner_for(
        lab,
        args.results,
        display.line,
        scheduler=args.scheduler,
        tls=args.tls,
        progress=display.update,
        resume=resume,
    )
    print(
        f"{'resuming' if resume else 'run'} {runner.path.name}: {len(lab.jobs())} job(s) "
        f"(repeats {lab.repeats}, a warm-up job per comparison: {lab.warmup_job})",
        file=sys.stderr,
    )
    if started is not None:
        started(runner.path)
    failed: DbregressError | None = None
    try:
        say = lambda line: print(line, file=sys.stderr, flush=True)  # noqa: E731
        run_lab(runner, lab, say, live=display)
        if lab.explain:
            written = explain(
                ExplainRequest(run=runner.path, steps=(), columns=(), ops=None, profile=True),
                lambda line: print(line, file=sys.stderr, flush=True),
            )
            print(f"Explanations: {written}", file=sys.stderr)
    except DbregressError as e:
        failed = e
    text, verdicts = _report(runner.path, failed, gated=args.fail_on is not None)
    print(text)
    if reported is not None:
        reported(runner.path)
    data = read_run(runner.path)
    code = gate(
        verdicts,
        args.fail_on,
        data.record,
        path=runner.path,
        data=data,
        allow_undecided=args.allow_undecided,
    )
    return outcome(code, failed, bugs(data.record, replays=load_replays(runner.path)))


def _report(path: Path, failed: DbregressError | None, gated: bool) -> tuple[str, RunVerdicts]:
    """The run's report, written into its folder. With a gate, a folder that cannot be
    written is a warning: the gate still answers. A report that cannot be made raises
    the run's own error, which matters more, unless it is a bug (exit 3, not 2)."""
    try:
        return write_report(path, summary=True, best_effort=gated)
    except Exception as e:
        if failed is None:
            raise
        print(f"warning: no report ({type(e).__name__}: {e})", file=sys.stderr)
        if not isinstance(e, DbregressError):
            print(f"Error: {failed}", file=sys.stderr)
            raise
        raise failed from None


def outcome(code: int, failed: DbregressError | None, bug_lines: list[str]) -> int:
    """The run's exit status: the gate's `code`, the run's own error `failed` and the bugs
    in dbregress it recorded. A confirmed `slower` is 1 whatever else failed (as `report
    RUN --fail-on` says of the same folder), the run's error said on stderr; then a bug
    is 3 (a job's or a step's raises InternalError, a replay's only recorded); then the
    run's error (2) or the gate's answer. An interrupt stays 130: asked for, it ends the
    command before any verdict counts."""
    if isinstance(failed, Interrupted):
        raise failed
    if code == EXIT_SLOWER:
        if failed is not None:
            print(f"Error: {failed}", file=sys.stderr)
        return code
    if code == EXIT_CRASH or isinstance(failed, InternalError) or bug_lines:
        if failed is not None:
            print(f"Error: {failed}", file=sys.stderr)
        if code != EXIT_CRASH:  # no gate said them (a replay's are in no error raised)
            said = "".join(f"\n  {b}" for b in bug_lines)
            print(f"Error: a bug in dbregress, recorded in the run:{said}", file=sys.stderr)
        return EXIT_CRASH
    if failed is not None:  # the run's error, after the gate's summary of what it could not judge
        raise failed
    return code
