"""The one stop rule of a comparison's rounds (rounds.py), as a local run and a fleet's
coordinator ask it after each round: from the run as stored."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from dbregress.execution import rounds
from dbregress.lab.file import Repeats
from tests.unit.test_compare import SyntheticRunner


def test_after_the_minimum_rounds_are_added_while_undecided_and_in_reach(tmp_path: Path) -> None:
    runner = SyntheticRunner(tmp_path, "3", shift=1.0, fillseq=0.02)
    runner.run()  # three rounds: fillseq's 2% spread is still undecided
    lab = dataclasses.replace(runner.lab, repeats=Repeats(3, 8))
    comp = lab.comparisons[0]
    assert rounds.after(lab, comp, 2, runner.path) == rounds.Next(1)  # below the minimum
    one = rounds.after(lab, comp, 3, runner.path)
    assert one.rounds == 1 and one.message is not None
    assert (
        one.message.startswith("kv: adding round 4 (at most 8): ") and "fillseq (b)" in one.message
    )
    # a fleet runs an interleaved comparison's rounds on its hosts at once
    three = rounds.after(lab, comp, 3, runner.path, at_once=3)
    assert three.rounds == 3 and three.message is not None
    assert three.message.startswith("kv: adding 3 rounds after 3 (at most 8)")
    assert rounds.after(lab, comp, 3, runner.path, at_once=9).rounds == 5  # up to the maximum
    at_max = dataclasses.replace(lab, repeats=Repeats(3, 3))
    assert rounds.after(at_max, comp, 3, runner.path) == rounds.Next(0)


def test_a_decided_comparison_gets_no_more_rounds(tmp_path: Path) -> None:
    runner = SyntheticRunner(tmp_path, "3", shift=1.0, fillseq=0.001)
    runner.run()
    lab = dataclasses.replace(runner.lab, repeats=Repeats(3, 8))
    assert rounds.after(lab, lab.comparisons[0], 3, runner.path) == rounds.Next(0)
