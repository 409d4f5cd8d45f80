"""Are explain's counts stable? Runs `dbregress explain` on a run twice (or reads two
explain.json files) and prints, per step and column, the instructions per operation of
both and how far apart they are. The goal: within 1% on every step.

    uv run python bench/explain_stability.py results/<run id> [--step S ...]
    uv run python bench/explain_stability.py --files first.json second.json

Exit status 1 when a step's two counts differ by 1% or more.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

LIMIT = 0.01


def explain_twice(run: Path, steps: list[str], keep: Path) -> tuple[Path, Path]:
    out = []
    for i in (1, 2):
        args = ["uv", "run", "dbregress", "explain", str(run), "--no-profile"]
        args += [a for s in steps for a in ("--step", s)]
        subprocess.run(args, check=True)
        copy = keep / f"explain-{i}.json"
        shutil.copy(run / "explain" / "explain.json", copy)
        out.append(copy)
    return out[0], out[1]


def counts(path: Path) -> dict[tuple[str, str, str], dict[str, Any]]:
    data = json.loads(path.read_text())
    return {(e["comparison"], e["step"], e["column"]): e["count"] for e in data["results"]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run", type=Path, nargs="?")
    ap.add_argument("--step", action="append", default=[])
    ap.add_argument("--files", type=Path, nargs=2)
    args = ap.parse_args()
    if args.files:
        first, second = args.files
    elif args.run:
        keep = Path(tempfile.mkdtemp(prefix="explain-stability-"))
        first, second = explain_twice(args.run, args.step, keep)
        print(f"explain.json of both runs kept in {keep}")
    else:
        ap.error("give a run, or --files A B")
    a, b = counts(first), counts(second)
    print("| comparison | step | column | window | instr/op 1 | instr/op 2 | difference |")
    print("|---|---|---|---|---|---|---|")
    worst = 0.0
    for key in sorted(a, key=lambda k: (k[0], a[k].get("index", 0), k[2])):
        if key not in b:
            continue
        x, y = a[key]["per_op"]["instructions"], b[key]["per_op"]["instructions"]
        diff = y / x - 1
        worst = max(worst, abs(diff))
        window = f"{a[key]['ops']} after {a[key]['skip_ops']}"
        print(f"| {key[0]} | {key[1]} | {key[2]} | {window} | {x:,.0f} | {y:,.0f} | {diff:+.3%} |")
    print(f"\nlargest difference: {worst:.3%} (goal: under {LIMIT:.0%})")
    return 0 if worst < LIMIT else 1


if __name__ == "__main__":
    sys.exit(main())
