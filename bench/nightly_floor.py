"""Consecutive nights of the nightly recipe against one fixed base, with the count store:
how many counts each night made afresh and took from the store, and the noise floor each
cost verdict used.

    uv run python bench/nightly_floor.py [--nights 6] [--work /var/tmp/dbregress-floor]

Makes a history of comment-only commits on top of Debian's PostgreSQL 15 source
(bench/bisect_src.py's `make_history`; `make sources` unpacks it), then runs
examples/nightly.py once a "night", HEAD moved one commit each night, every night
against the history's first commit (`--base FIRST --against base`, the way a user keeps
a release as the base) and with `--gate slower:cost`. No commit changes the code, so
every cost verdict is an A/A of two builds of the same code.

The base is counted on night 1 and taken from the count store on the next
`recount_every - 1` nights (4 with the default 5); the night after, it is counted anew. A
reused base must not be floored by its own replays (docs/count-store.md), so each cost
verdict's floor must come from counts independent of the ones it pools.

Prints a table per night (exit, wall, fresh and taken replays per column) and per step
(the cost verdict, its ratio and interval, the floor's sd and where it came from, and
the runs the history floor read). Checks: every night exits 0; every step has a cost
verdict and none is `slower` or `faster`; the base is counted afresh (none taken) on
night 1 and again on the first night after `recount_every - 1` nights took it, and taken
(none counted) on the others; exits 1 when a check fails.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

from bisect_src import git, make_history  # noqa: E402
from nightly_demo import night  # noqa: E402

LAB = "nightly-postgres"
RECOUNT_EVERY = 5  # cost/reuse.py RECOUNT_EVERY, the lab's default


def newest_run(results: Path, seen: set[str]) -> Path | None:
    runs = [p for p in results.glob(f"*-{LAB}") if p.name not in seen]
    return max(runs, key=lambda p: p.name) if runs else None


def summary(run: Path) -> tuple[dict[str, object], list[tuple[str, dict[str, object]]]]:
    lane = json.loads((run / "cost" / "lane.json").read_text())
    verdicts = json.loads((run / "verdicts.json").read_text())
    steps = []
    for comparison in verdicts["comparisons"]:
        for column in comparison["columns"]:
            for step in column["steps"]:
                steps.append((step["step"], step.get("cost") or {}))
    return lane.get("store") or {}, steps


def floor_text(cost: dict[str, object]) -> str:
    noise = cost.get("noise") or {}
    assert isinstance(noise, dict)
    sd = noise.get("sd")
    where = noise.get("from") or "-"
    history = noise.get("history") or {}
    runs = history.get("runs") or [] if isinstance(history, dict) else []
    shown = f"{100 * sd:.3f}%" if isinstance(sd, float) else "-"
    return f"sd {shown} from {where}; history floor read {len(runs)} run(s)"


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--nights", type=int, default=RECOUNT_EVERY + 1)
    ap.add_argument("--work", type=Path, default=Path("/var/tmp/dbregress-floor"))
    args = ap.parse_args()
    work: Path = args.work
    results = work / "results"
    shutil.rmtree(results, ignore_errors=True)
    work.mkdir(parents=True, exist_ok=True)
    repo, ids = make_history(work, args.nights + 1, args.nights + 10, range(0))
    print(f"tree {repo}: {len(ids)} commits, none changes the code", flush=True)
    seen: set[str] = set()
    checks: dict[str, bool] = {}
    rows = []
    for n in range(1, args.nights + 1):
        code, wall, _ = night(n, repo, ids[n], results, ids[0], "slower:cost", "base")
        run = newest_run(results, seen)
        if run is None:
            checks[f"night {n} wrote a run"] = False
            continue
        seen.add(run.name)
        store, steps = summary(run)
        rows.append((n, code, wall, run.name, store, steps))
        checks[f"night {n} exits 0"] = code == 0
        words = [c.get("verdict") for _, c in steps]
        checks[f"night {n}: every step has a cost verdict"] = bool(words) and None not in words
        moved = [s for s, c in steps if c.get("verdict") in ("slower", "faster")]
        checks[f"night {n}: no cost verdict slower or faster (A/A)"] = not moved
        fresh = (store.get("fresh") or {}).get("base", 0)
        taken = (store.get("taken") or {}).get("base", 0)
        due = n == 1 or (n - 1) % RECOUNT_EVERY == 0
        want = "counted afresh, none taken" if due else "taken from the store, none counted"
        checks[f"night {n}: the base is {want}"] = (
            (fresh > 0 and taken == 0) if due else (taken > 0 and fresh == 0)
        )
    git(repo, "checkout", "-q", "main")
    print("\n=== nights (base: the history's first commit; HEAD one commit further each night)")
    for n, code, wall, name, store, steps in rows:
        print(
            f"night {n}: {name}, exit {code}, wall {wall:.0f} s; "
            f"fresh {store.get('fresh')}, taken {store.get('taken')}"
        )
        for step, cost in steps:
            ratio, ci = cost.get("ratio"), cost.get("ci") or [None, None]
            small = " small" if cost.get("small") else ""
            print(
                f"  {step}: {cost.get('verdict', '-')}{small} {ratio} [{ci[0]}, {ci[1]}]; "
                f"{floor_text(cost)}"
            )
    for what, ok in checks.items():
        print(f"  {'ok  ' if ok else 'FAIL'} {what}")
    return 0 if checks and all(checks.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
