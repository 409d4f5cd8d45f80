"""RocksDB's "Simplify detection of x86 CPU features (#11419)" and its parent, each built
in the default flavor (`rel`: native, as RocksDB's developers build) and the portable
one (`rel_portable`), on the quickstart's write steps in the cost lane: the commit
moves CRC32C from a runtime-detected instruction to a compile-time choice, so a
portable build of it computes the WAL's checksums in software, while a native build
uses the instruction on both sides.

    uv run python bench/rocksdb_portable.py --tree ~/rocksdb [--commit 459969e993]
                                            [--results /var/tmp/dbregress-portable]

TREE is a RocksDB git checkout holding the commit (git clone of RocksDB's repository;
nothing of it is copied here). Builds the four with `dbregress fetch` (timed; a build
already in the cache takes a second), then runs one lab of two comparisons, the
parent against the commit in each flavor, on fillseq, overwritesome and
overwriteandwait (the kv benchmark at the quickstart's sizes, 2 interleaved repeats,
3 counting replays a column), and prints each step's cost verdict (estimated cycles
per operation, commit / parent) and time-lane verdict per flavor.

Checks: in `rel_portable` the commit spends more per operation than its parent on
every write step (a cost verdict `slower`, or `small` inside the band); in `rel` no
write step's cost verdict is `slower` or `faster`. Exits 1 when a check fails.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from bisect_src import git
from mariadb_src import ROOT, dbregress

FLAVORS = ("rel", "rel_portable")
STEPS = ("fillseq", "overwritesome", "overwriteandwait")


def build(spec: str) -> float:
    t0 = time.monotonic()
    done = dbregress("fetch", spec, cwd=ROOT)
    took = time.monotonic() - t0
    if done.returncode != 0:
        sys.exit(f"dbregress fetch {spec} failed (exit {done.returncode}):\n{done.stderr}")
    print(f"build {spec}: {took:.0f} s", flush=True)
    return took


def lab_text(tree: Path, parent: str, commit: str) -> str:
    lines = [
        'name = "rocksdb-11419"',
        'placement = "separate"',
        "repeats = 2",
        'schedule = "interleaved"',
        "count = true",
    ]
    for flavor in FLAVORS:
        lines += ["", "[[comparison]]", f'name = "{flavor}"', 'benchmark = "kv"']
        for name, ref in (("parent", parent), ("commit", commit)):
            lines += [
                "",
                "[[comparison.column]]",
                f'label = "{name}-{flavor}"',
                f'build = "rocksdb@src:{tree}#{ref}+{flavor}"',
                'config = "byrx"',
            ]
        lines += [
            "",
            "[comparison.kv]",
            "keys = 200000",
            "seconds = 1",
            "short_seconds = 1",
            "warmup_s = 0.5",
            f"steps = {json.dumps(list(STEPS))}",
        ]
    return "\n".join(lines) + "\n"


def verdicts(run: Path) -> dict[tuple[str, str], dict[str, object]]:
    data = json.loads((run / "verdicts.json").read_text())
    found = {}
    for comparison in data["comparisons"]:
        for column in comparison["columns"]:
            for step in column["steps"]:
                found[(comparison["name"], step["step"])] = step
    return found


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--tree", type=Path, required=True, help="a RocksDB git checkout")
    ap.add_argument("--commit", default="459969e993", help="#11419 (its parent is ^)")
    ap.add_argument("--results", type=Path, default=Path("/var/tmp/dbregress-portable"))
    args = ap.parse_args()
    tree = args.tree.expanduser().resolve()
    commit = git(tree, "rev-parse", f"{args.commit}^{{commit}}")
    parent = git(tree, "rev-parse", f"{commit}^")
    print(f"commit {commit[:12]} {git(tree, 'log', '-1', '--format=%s', commit)}")
    print(f"parent {parent[:12]} {git(tree, 'log', '-1', '--format=%s', parent)}", flush=True)
    for flavor in FLAVORS:
        for ref in (parent, commit):
            build(f"rocksdb@src:{tree}#{ref[:12]}+{flavor}")
    results: Path = args.results
    results.mkdir(parents=True, exist_ok=True)
    lab = results / "rocksdb-11419.toml"
    lab.write_text(lab_text(tree, parent[:12], commit[:12]))
    t0 = time.monotonic()
    done = dbregress("run", str(lab), "--results", str(results), cwd=ROOT)
    print(f"run: {time.monotonic() - t0:.0f} s (exit {done.returncode})", flush=True)
    if done.returncode not in (0, 1):
        sys.exit(f"dbregress run failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    run = max(results.glob("*-rocksdb-11419"), key=lambda p: p.name)
    found = verdicts(run)
    checks: dict[str, bool] = {}
    print(f"\n{run.name}: commit / parent, estimated cycles per operation (cost), QPS (time)")
    for flavor in FLAVORS:
        for step in STEPS:
            v = found.get((flavor, step), {})
            cost = v.get("cost") or {}
            assert isinstance(cost, dict)
            ci = cost.get("ci") or [float("nan")] * 2
            small = " small" if cost.get("small") else ""
            print(
                f"  {flavor} {step}: cost {cost.get('verdict', '-')}{small} "
                f"{cost.get('ratio', float('nan')):.4f} [{ci[0]:.4f}, {ci[1]:.4f}]; "
                f"time {v.get('verdict', '-')} {v.get('ratio', float('nan')):.3f}"
            )
            word = cost.get("verdict")
            if flavor == "rel_portable":
                checks[f"{flavor} {step}: the commit costs more"] = word == "slower" or bool(
                    cost.get("small") and float(cost.get("ratio") or 0) > 1
                )
            else:
                checks[f"{flavor} {step}: the cost is not slower or faster"] = word not in (
                    "slower",
                    "faster",
                    None,
                )
    for what, ok in checks.items():
        print(f"  {'ok  ' if ok else 'FAIL'} {what}")
    return 0 if checks and all(checks.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
