"""Do two runs of one lab agree on their verdicts? (Two `make demo` runs, say.)

For every (comparison, column, step) both runs judged, prints both verdicts with their
ratios and counts:

- contradictions: both decided (slower, faster or same) and differ; must be 0;
- agreements among the decided pairs;
- one-sided: decided in one run, undecided in the other (more repeats would tell).

    uv run python bench/verdict_agreement.py results/<run A> results/<run B>

Exit status 1 when any pair contradicts.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from dbregress.analysis.compare import compare_run
from dbregress.store.run import read_run

DECIDED = {"slower", "faster", "same"}


def verdicts(path: Path) -> dict[tuple[str, str, str], tuple[str, float | None]]:
    data = read_run(path)
    v = compare_run(data.record, data.steps)
    return {k: (c.verdict, c.ratio) for k, c in v.qps.items()}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run_a", type=Path)
    ap.add_argument("run_b", type=Path)
    args = ap.parse_args()
    a, b = verdicts(args.run_a), verdicts(args.run_b)
    keys = [k for k in a if k in b]
    contradictions = agreements = one_sided = undecided = 0
    print("| comparison | column | step | A | ratio A | B | ratio B | |")
    print("|---|---|---|---|---|---|---|---|")
    for k in keys:
        (va, ra), (vb, rb) = a[k], b[k]
        if va in DECIDED and vb in DECIDED:
            same = va == vb
            agreements += same
            contradictions += not same
            mark = "agree" if same else "CONTRADICT"
        elif va in DECIDED or vb in DECIDED:
            one_sided += 1
            mark = "one-sided"
        else:
            undecided += 1
            mark = ""
        fa = f"{ra:.2f}" if ra else "-"
        fb = f"{rb:.2f}" if rb else "-"
        print(f"| {k[0]} | {k[1]} | {k[2]} | {va} | {fa} | {vb} | {fb} | {mark} |")
    print()
    print(
        f"{len(keys)} verdicts in both runs: {agreements + contradictions} decided in both "
        f"({agreements} agree, {contradictions} contradict), {one_sided} decided in one "
        f"run only, {undecided} undecided in both"
    )
    return 1 if contradictions else 0


if __name__ == "__main__":
    sys.exit(main())
