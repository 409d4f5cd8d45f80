"""Rates of the change-point method on synthetic series (no engines): how often a shift
of a given size is found at the right column, and how often a change point is reported
where there is none. docs/changepoints.md quotes its output.

    uv run python bench/changepoints.py [--seeds 1000]

A series has K columns of r samples each, log-normal noise of spread sigma per sample
(5%), and at most one shift of `size` x sigma starting at column `pos`. "found" counts
series where a decided change point sits exactly at `pos`; "false" counts series with a
decided change point anywhere else.
"""

from __future__ import annotations

import argparse
import math
import random

from dbregress.analysis.changepoints import ALPHA, find_all

SIGMA = 0.05


def rates(k: int, r: int, size: float, pos: int | None, seeds: int) -> tuple[float, float]:
    found = false = 0
    for seed in range(seeds):
        rng = random.Random(seed * 7919 + k * 31 + r)
        cols = [
            [
                math.exp(
                    (size * SIGMA if pos is not None and i >= pos else 0.0) + rng.gauss(0, SIGMA)
                )
                for _ in range(r)
            ]
            for i in range(k)
        ]
        at = [c.index for c in find_all({0: cols}, better="higher")[0].decided()]
        found += pos in at
        false += any(i != pos for i in at)
    return found / seeds, false / seeds


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, default=1000)
    a = ap.parse_args()
    print(f"alpha {ALPHA}, sigma {SIGMA:.0%} per sample, {a.seeds} series per row")
    print("| K | r | shift | at | found | false |")
    print("|---|---|---|---|---|---|")
    for k, r in ((10, 5), (10, 3), (6, 3)):
        found, false = rates(k, r, 0.0, None, a.seeds)
        print(f"| {k} | {r} | none | - | - | {false:.1%} |")
        for size in (-2.0, -3.0):
            for pos in (1, k // 2, k - 1):
                found, false = rates(k, r, size, pos, a.seeds)
                print(f"| {k} | {r} | {size:g} sigma | {pos} | {found:.1%} | {false:.1%} |")


if __name__ == "__main__":
    main()
