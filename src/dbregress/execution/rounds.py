"""The stop rule of a comparison's rounds, in one place for a local run (runner.py) and
a fleet's coordinator (fleet/coordinator.py): after the lab's minimum of rounds, more
while a step's QPS verdict is undecided and within reach of the maximum.

What runs next is decided here from the run as stored; how a round runs (one job after
another, interleaved turns, units on a fleet's hosts) is the caller's.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from dbregress.analysis.compare import compare_run
from dbregress.lab.file import Comparison, Lab
from dbregress.store.run import read_run

# Adding rounds stops early, before a lab's maximum, once no undecided step is within
# reach: that is judged from ESTIMATE_AFTER repeats on (an estimate of the repeats a step
# needs, from fewer, is too rough to act on), with REACH times the rounds left as slack.
ESTIMATE_AFTER = 5
REACH = 2


@dataclass(frozen=True)
class Next:
    """What follows a comparison's `done` rounds: `rounds` more to start now (0: the
    comparison is finished) and what to tell the user, if anything."""

    rounds: int
    message: str | None = None


def few(names: list[str], at_most: int = 6) -> str:
    return ", ".join(names[:at_most]) + (", ..." if len(names) > at_most else "")


def undecided_steps(
    lab: Lab, run: Path, comparison: Comparison, rounds_left: int
) -> tuple[list[str], list[str]]:
    """`step (column)` of every undecided QPS verdict of the comparison so far, and of
    those that the rounds left could decide: their `more_repeats` estimate
    (docs/verdicts.md) at most REACH times the rounds left, as the estimate is rough."""
    data = read_run(run)
    found = compare_run(data.record, data.steps, lab.verdict)
    undecided, reachable = [], []
    for (comp, column, step), c in found.qps.items():
        if comp != comparison.name or c.verdict != "undecided":
            continue
        undecided.append(f"{step} ({column})")
        if c.more_repeats is not None and c.more_repeats <= REACH * rounds_left:
            reachable.append(f"{step} ({column})")
    return undecided, reachable


def after(lab: Lab, comparison: Comparison, done: int, run: Path, at_once: int = 1) -> Next:
    """After `done` rounds of the comparison ended: one more up to the lab's minimum;
    none at its maximum, or once every step is decided, or once (from ESTIMATE_AFTER
    rounds on) no undecided step is within reach; else up to `at_once` more (a fleet
    runs an interleaved comparison's rounds on several hosts at once)."""
    minimum, maximum = lab.repeats.minimum, lab.repeats.maximum
    if done < minimum:
        return Next(1)
    if done >= maximum:
        return Next(0)
    undecided, reachable = undecided_steps(lab, run, comparison, maximum - done)
    name = comparison.name
    if not undecided:
        return Next(0)
    if not reachable and done >= ESTIMATE_AFTER:
        return Next(
            0,
            f"{name}: {len(undecided)} step(s) undecided after {done} rounds, none likely "
            f"to be decided within {maximum}: no more rounds",
        )
    if done < ESTIMATE_AFTER:
        which = f"{len(undecided)} undecided: {few(undecided)}"
    else:
        which = f"{len(undecided)} undecided, {len(reachable)} within reach: {few(reachable)}"
    more = max(1, min(at_once, maximum - done))
    what = f"round {done + 1}" if more == 1 else f"{more} rounds after {done}"
    return Next(more, f"{name}: adding {what} (at most {maximum}): {which}")
