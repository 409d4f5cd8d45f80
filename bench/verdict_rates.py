"""False-alarm and detection rates of dbregress's verdicts on this machine.

Runs (or reads) an A/A/slowed lab: each comparison's base column, a copy of it (A/A) and
a copy with an injected slowdown (`inject_slowdown = F`, QPS down by about F/(1+F)),
with R repeats each. Then, many times, draws n of the R repeats of every column at
random and computes the verdicts on that subset, as a lab with n repeats would have:

- false alarms: A/A steps judged `slower` or `faster` (and labs with any such verdict);
- decided `same`: A/A steps judged the same within the band;
- detection: slowed steps judged `slower`.

Subsets of one run share repeats, so the rates are estimates of what n-repeat labs on
this host would see, not independent trials; the full run's own verdicts are printed too.

    uv run python bench/verdict_rates.py labs/quickstart.toml --repeats 8 --subset 5
    uv run python bench/verdict_rates.py --run results/<run id> --subset 5
"""

from __future__ import annotations

import argparse
import dataclasses
import random
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from dbregress.analysis.calibration import AA_SUFFIX, SLOW_SUFFIX
from dbregress.analysis.compare import compare_run
from dbregress.cli.calibrate import aa_lab
from dbregress.execution.runner import Runner
from dbregress.lab.file import Repeats, load_lab
from dbregress.store.run import RunData, read_run


def subset(
    steps_by_job: dict[str, list[dict[str, Any]]], n: int, rng: random.Random
) -> dict[str, list[dict[str, Any]]]:
    """n repeats of every column, drawn at random (the warm-up job r0 is never drawn)."""
    by_label: dict[str, list[str]] = {}
    for job in steps_by_job:
        label, _, repeat = job.rpartition("/r")
        if repeat != "0":
            by_label.setdefault(label, []).append(job)
    chosen = {j for jobs in by_label.values() for j in rng.sample(jobs, min(n, len(jobs)))}
    return {j: rs for j, rs in steps_by_job.items() if j in chosen}


def without(data: RunData, suffix: str) -> RunData:
    """The run as if its columns ending in `suffix` had not been in the lab: A/A verdicts
    are judged without the slowed column (whose true changes would relax the lab-wide
    correction), and the slowed column without the A/A one."""
    others = {lb for c in data.record["comparisons"] for lb in c["labels"][1:]}
    return data.only_columns({lb for lb in others if not lb.endswith(suffix)})


def rates(data: RunData, n: int, trials: int) -> dict[str, float]:
    rng = random.Random(1)
    aa, slow = Counter[str](), Counter[str]()
    labs_with_alarm = 0
    aa_run, slow_run = without(data, SLOW_SUFFIX), without(data, AA_SUFFIX)
    for _ in range(trials):
        alarm = False
        for c in compare_run(aa_run.record, subset(aa_run.steps, n, rng)).qps.values():
            aa[c.verdict] += 1
            alarm |= c.verdict in ("slower", "faster")
        for c in compare_run(slow_run.record, subset(slow_run.steps, n, rng)).qps.values():
            slow[c.verdict] += 1
        labs_with_alarm += alarm
    aa_total, slow_total = sum(aa.values()) or 1, sum(slow.values()) or 1
    return {
        "false_alarm_per_step": (aa["slower"] + aa["faster"]) / aa_total,
        "labs_with_a_false_alarm": labs_with_alarm / trials,
        "aa_same": aa["same"] / aa_total,
        "aa_undecided": aa["undecided"] / aa_total,
        "detected": slow["slower"] / slow_total,
        "slow_wrong_way": slow["faster"] / slow_total,
    }


def full_run(data: RunData) -> None:
    found = {}
    disturbed = []
    for suffix in (SLOW_SUFFIX, AA_SUFFIX):
        kept = without(data, suffix)
        v = compare_run(kept.record, kept.steps)
        found.update(v.qps)
        disturbed += [d for d in v.disturbed if d not in disturbed]
    for (comp, column, step), c in sorted(found.items()):
        ci = f"[{c.ci[0]:.3f}, {c.ci[1]:.3f}]" if c.ci else "-"
        ratio = f"{c.ratio:.3f}" if c.ratio is not None else "-"
        print(f"  {comp:10} {column:22} {step:22} {ratio} {ci} {c.verdict}")
    if disturbed:
        print(f"  ({len(disturbed)} disturbed repeat(s) left out)")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("lab", nargs="?", type=Path, help="lab whose base columns to use")
    p.add_argument("--run", type=Path, help="reuse this A/A/slowed run instead of running")
    p.add_argument("--repeats", type=int, default=8, help="repeats per column to run (R)")
    p.add_argument("--subset", type=int, default=5, help="repeats per column per trial (n)")
    p.add_argument("--trials", type=int, default=400)
    p.add_argument("--inject", type=float, default=0.10)
    p.add_argument("--results", type=Path, default=Path("results"))
    args = p.parse_args()
    if args.run is None:
        if args.lab is None:
            p.error("give a lab file or --run")
        lab = aa_lab(load_lab(args.lab), None, args.inject)
        lab = dataclasses.replace(lab, repeats=Repeats(args.repeats, args.repeats))
        path = Runner(lab, args.results, notify=print).run()
    else:
        path = args.run
    data = read_run(path)
    print(f"run {path.name}: verdicts over all its repeats")
    full_run(data)
    r = rates(data, args.subset, args.trials)
    print(f"\n{args.trials} random subsets of {args.subset} repeats per column:")
    print(f"  A/A false alarms per step    {r['false_alarm_per_step']:.3f}")
    print(f"  A/A labs with a false alarm  {r['labs_with_a_false_alarm']:.3f}")
    print(f"  A/A steps decided same       {r['aa_same']:.3f}")
    print(f"  A/A steps undecided          {r['aa_undecided']:.3f}")
    print(f"  slowed steps found slower    {r['detected']:.3f}")
    print(f"  slowed steps judged faster   {r['slow_wrong_way']:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
