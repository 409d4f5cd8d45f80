"""dbregress calibrate LAB: measure this host's noise with an A/A run of the lab's base
columns, per placement, and optionally check that an injected slowdown is found."""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path
from typing import Any, cast

from dbregress.analysis.calibration import (
    AA_SUFFIX,
    SLOW_SUFFIX,
    StepNoise,
    median_cv,
    step_noise,
)
from dbregress.analysis.compare import compare_run
from dbregress.cli import progress
from dbregress.collect.hostprobe import describe, probe_host
from dbregress.lab.file import PLACEMENT_MODES, Lab, load_lab, placement_for
from dbregress.model import interrupts
from dbregress.model.errors import DbregressError
from dbregress.report.verdict_tables import table
from dbregress.shapes.calibration import (
    Calibration,
    CalibrationPlacement,
    CalibrationStep,
    HostProbe,
)
from dbregress.store.calibration import save_calibration
from dbregress.store.run import read_run
from dbregress.workflow.lab_run import run_lab, runner_for


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "calibrate",
        help="measure this host's noise (A/A) and the lab's power",
        description="Run each comparison's base column against itself (A/A) with the "
        "lab's repeats; print per step the between-repeat variation, the smallest change "
        "the repeats can detect, and the repeats a chosen change needs. With several "
        "placements, say which gives the steadier figures. The result is stored and "
        "shown in later reports on this host.",
    )
    p.add_argument("lab", type=Path, help="lab file (TOML)")
    p.add_argument("--results", type=Path, default=Path("results"))
    p.add_argument(
        "--placements",
        default=None,
        help="comma-separated placements to compare (same, separate, unpinned); "
        "default: the lab's own",
    )
    p.add_argument(
        "--inject",
        type=float,
        default=None,
        metavar="F",
        help="add a third column with inject_slowdown = F (e.g. 0.10) and report "
        "whether the verdicts find it",
    )
    p.add_argument(
        "--change",
        type=float,
        default=0.05,
        help="the change to size the repeats for (default 0.05)",
    )
    p.add_argument(
        "--probe-s",
        type=float,
        default=20.0,
        help="seconds of host probes (CPU loop, random reads in a cache-sized buffer) "
        "before and after the A/A runs, with no engine running (0: none; default 20)",
    )
    p.set_defaults(func=run)


def aa_lab(lab: Lab, placement: str | None, inject: float | None) -> Lab:
    """The lab with each comparison's base against a copy of itself (and a slowed copy)."""
    comparisons = []
    for comp in lab.comparisons:
        base = comp.base
        columns = [base, dataclasses.replace(base, label=base.label + AA_SUFFIX)]
        if inject:
            columns.append(
                dataclasses.replace(base, label=base.label + SLOW_SUFFIX, inject_slowdown=inject)
            )
        comparisons.append(dataclasses.replace(comp, columns=tuple(columns)))
    where = placement_for(placement) if placement else lab.placement
    return dataclasses.replace(
        lab,
        name=f"{lab.name}-calibrate-{where.mode}",
        comparisons=tuple(comparisons),
        placement=where,
        # the A/A pair's spread is what it measures: replays counted anew, none taken
        # from the count store (an earlier run's replays would measure that run's)
        recount=True,
    )


def _placements(arg: str | None) -> list[str | None]:
    if arg is None:
        return [None]
    names = [p.strip() for p in arg.split(",") if p.strip()]
    for name in names:
        if name not in PLACEMENT_MODES:
            raise DbregressError(
                f"--placements: unknown placement {name!r}; use {', '.join(PLACEMENT_MODES)}"
            )
    return list(names)


def _fmt(value: float | None, pct: bool = False) -> str:
    if value is None:
        return "-"
    return f"{value:.1%}" if pct else f"{value}"


def noise_table(noise: list[StepNoise], repeats: int, change: float) -> list[str]:
    rows = [
        [
            n.comparison,
            n.step,
            str(n.repeats),
            _fmt(n.cv, pct=True),
            _fmt(n.min_change, pct=True),
            _fmt(n.repeats_for_change),
            n.aa_verdict or "-",
            n.injected_verdict or "-",
        ]
        for n in noise
    ]
    header = [
        "comparison",
        "step",
        "samples",
        "CV",
        f"detectable at {repeats}/side",
        f"repeats for {change:.0%}",
        "A/A verdict",
        "injected verdict",
    ]
    return table(header, rows)


def run(args: argparse.Namespace) -> int:
    interrupts.install()
    lab = load_lab(args.lab)
    if args.inject is not None and not 0 < args.inject <= 10:
        raise DbregressError(f"--inject: must be a fraction in (0, 10], got {args.inject}")
    if not 0 <= args.probe_s <= 3600:
        raise DbregressError(f"--probe-s: must be 0-3600 seconds, got {args.probe_s}")
    if not 0 < args.change < 1:
        raise DbregressError(f"--change: must be a fraction in (0, 1), got {args.change}")
    summary: Calibration = {
        "lab": lab.name,
        "change": args.change,
        "placements": {},
        "host_probe": {"before": _probe("before", args.probe_s)},
    }
    for placement in _placements(args.placements):
        derived = aa_lab(lab, placement, args.inject)
        display = progress.for_stderr()
        runner = runner_for(derived, args.results, display.line, progress=display.update)
        print(f"calibrate {runner.path.name}: {derived.placement.mode}", file=sys.stderr)
        # both lanes where the lab counts: the time lane's repeats give the host's noise,
        # the cost lane's replays the A/A floor of later cost verdicts (store/calibration.py)
        run_lab(runner, derived, display.line, live=display)
        data = read_run(runner.path)
        verdicts = compare_run(data.record, data.steps)
        noise = step_noise(data.record, data.steps, verdicts, lab.repeats.minimum, args.change)
        mode = derived.placement.mode
        print(f"## Placement {mode} ({runner.path.name})\n")
        print("\n".join(noise_table(noise, lab.repeats.minimum, args.change)))
        summary["placements"][mode] = {
            "run_id": runner.path.name,
            "median_cv": median_cv(noise),
            "steps": [cast(CalibrationStep, dataclasses.asdict(n)) for n in noise],
        }
    summary["host_probe"]["after"] = _probe("after", args.probe_s)
    steadiest = _steadiest(summary["placements"])
    summary["steadiest"] = steadiest
    if len(summary["placements"]) > 1 and steadiest:
        cvs = ", ".join(
            f"{m} {p['median_cv']:.1%}" for m, p in summary["placements"].items() if p["median_cv"]
        )
        print(f"Steadiest placement here: {steadiest} (median CV over steps: {cvs})")
    path = save_calibration(args.results, summary)
    print(f"Calibration stored in {path}; later reports on this host show it.")
    return 0


def _probe(when: str, seconds: float) -> HostProbe | None:
    """The host probes (collect/hostprobe.py), with no engine running."""
    if seconds <= 0:
        return None
    result = probe_host(seconds)
    print(f"Host probe {when} the A/A runs ({seconds:g} s): {describe(result)}", flush=True)
    print(flush=True)
    return result


def _steadiest(placements: dict[str, CalibrationPlacement]) -> str | None:
    known = {m: p["median_cv"] for m, p in placements.items() if p["median_cv"] is not None}
    return min(known, key=lambda m: known[m]) if known else None
