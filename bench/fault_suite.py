"""The fault suite many times over: every kind of fault at random points, one table.

    sudo uv run python bench/fault_suite.py [--per-kind 5] [--seed 1] [--kinds a,b]
        [--fuzz-cases 10000]

Each case runs a small two-column PostgreSQL lab (tests/faults.py), injects one fault at
a point drawn from the seed, and checks what must hold afterwards. Prints, per kind:
faults injected, steps finished before each fault, of those found on disk unchanged
afterwards (must be equal), orphan processes (must be 0), faults recorded with their
cause, labs that went on (or resumed), and cases with any problem. With --fuzz-cases it
also runs bench/fuzz_inputs.py and appends its outcome table. Needs root (tmpfs mounts
for the disk-full cases) and the quickstart's PostgreSQL builds in the cache.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.faults import KINDS, Outcome, run_case


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--per-kind", type=int, default=5)
    ap.add_argument("--seed", type=int, default=1, help="first seed; case i uses seed + i")
    ap.add_argument("--kinds", default=",".join(KINDS))
    ap.add_argument("--fuzz-cases", type=int, default=0)
    args = ap.parse_args()
    kinds = [k for k in args.kinds.split(",") if k]
    unknown = set(kinds) - set(KINDS)
    if unknown:
        ap.error(f"unknown kinds {sorted(unknown)}; known: {', '.join(KINDS)}")
    outcomes: list[Outcome] = []
    t0 = time.monotonic()
    for kind in kinds:
        for i in range(args.per_kind):
            seed = args.seed + i
            root = Path("/var/tmp") / f"dbregress-fault-bench-{kind}-{seed}"
            try:
                out = run_case(kind, seed, root)
            finally:
                shutil.rmtree(root, ignore_errors=True)
            outcomes.append(out)
            state = "ok" if out.ok else f"PROBLEM {out.problems}"
            print(f"{kind} seed {seed}: {out.point}: {state}", file=sys.stderr, flush=True)
    print(table(kinds, outcomes))
    print(f"\n{len(outcomes)} cases in {time.monotonic() - t0:.0f} s, seeds from {args.seed}")
    if args.fuzz_cases:
        here = Path(__file__).resolve().parent
        subprocess.run(
            [sys.executable, str(here / "fuzz_inputs.py"), "--cases", str(args.fuzz_cases)],
            check=True,
        )


def table(kinds: list[str], outcomes: list[Outcome]) -> str:
    head = [
        "fault",
        "injected",
        "steps finished before",
        "found on disk after",
        "orphan processes",
        "recorded with cause",
        "lab went on / resumed",
        "cases with a problem",
    ]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for kind in kinds:
        rows = [o for o in outcomes if o.kind == kind]
        cells = [
            kind,
            len(rows),
            sum(o.finished_before for o in rows),
            sum(o.found_after for o in rows),
            sum(len(o.orphans) for o in rows),
            sum(o.recorded for o in rows),
            sum(o.went_on for o in rows),
            sum(not o.ok for o in rows),
        ]
        lines.append("| " + " | ".join(str(c) for c in cells) + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
