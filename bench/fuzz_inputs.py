"""Fuzz every input a user writes, at volume: lab files (valid, mutated, random text and
bytes, lab-shaped line soup) and config profiles (texts and names), drawn from the
strategies of tests/unit/test_fuzz_inputs.py. Each case must load or fail with a
DbregressError naming the file and the key; anything else is listed.

    uv run python bench/fuzz_inputs.py                 # 10,000 cases, seed 0
    uv run python bench/fuzz_inputs.py --cases 50000 --seed 7

Sockets and subprocesses are disabled while it runs: loading must not fetch anything.
Exit status 1 if any case raised another exception or a message that names neither.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import seed as hypothesis_seed

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the tests package

from tests.unit.test_fuzz_inputs import Case, cases, no_network_no_processes, run_case

OUTCOMES = ("loaded", "error", "bad-error", "other")
HEADERS = ("kind", "cases", "clean loads", "clean errors", "unclear errors", "other exceptions")


def fuzz(count: int, seed: int, directory: Path) -> tuple[Counter[tuple[str, str]], list[str]]:
    """Outcomes by (kind, outcome) of `count` cases, and the offending cases shown."""
    outcomes: Counter[tuple[str, str]] = Counter()
    offenders: list[str] = []

    @hypothesis_seed(seed)
    @settings(
        max_examples=count,
        database=None,
        deadline=None,
        phases=[Phase.generate],  # every case is new; nothing fails, so nothing to shrink
        suppress_health_check=list(HealthCheck),
    )
    @given(case=cases())
    def run(case: Case) -> None:
        outcome, why = run_case(case, directory)
        outcomes[(case.kind, outcome)] += 1
        if outcome not in ("loaded", "error"):
            offenders.append(f"{outcome}: {why}\n  input: {case.show()}")

    with no_network_no_processes():
        run()
    return outcomes, offenders


def table(outcomes: Counter[tuple[str, str]]) -> str:
    kinds = sorted({kind for kind, _ in outcomes})
    rows = []
    for kind in [*kinds, "total"]:
        counts = [
            sum(n for (k, o), n in outcomes.items() if o == outcome and kind in (k, "total"))
            for outcome in OUTCOMES
        ]
        rows.append((kind, str(sum(counts)), *map(str, counts)))
    widths = [max(len(r[i]) for r in [HEADERS, *rows]) for i in range(len(HEADERS))]
    lines = [
        "  ".join(
            h.ljust(w) if i == 0 else h.rjust(w)
            for i, (h, w) in enumerate(zip(r, widths, strict=True))
        )
        for r in [HEADERS, *rows]
    ]
    lines.insert(1, "  ".join("-" * w for w in widths))
    lines.insert(len(lines) - 1, lines[1])
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=int, default=10_000, help="cases to run (10000)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the generator (0)")
    parser.add_argument("--show", type=int, default=5, help="offending inputs to print (5)")
    args = parser.parse_args()
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="dbregress-fuzz-") as tmp:
        outcomes, offenders = fuzz(args.cases, args.seed, Path(tmp))
    elapsed = time.monotonic() - started
    total = sum(outcomes.values())
    print(
        f"fuzz_inputs: {total} cases, seed {args.seed}, {elapsed:.1f} s ({total / elapsed:.0f}/s)"
    )
    print(table(outcomes))
    kinds = Counter(text.split(":", 2)[1].strip() for text in offenders)
    if kinds:
        print("\noffending outcomes: " + ", ".join(f"{k} x{n}" for k, n in kinds.most_common()))
    for text in offenders[: args.show]:
        print("\n" + text)
    if len(offenders) > args.show:
        print(f"\n... and {len(offenders) - args.show} more")
    return 1 if offenders else 0


if __name__ == "__main__":
    sys.exit(main())
