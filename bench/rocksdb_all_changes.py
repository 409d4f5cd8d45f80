"""Every change in a real commit history: `bisect --all-changes` over RocksDB's git history.

    uv run python bench/rocksdb_all_changes.py --tree ~/rocksdb
        [--good MERGE_BASE] [--bad v8.1.1] [--step revrange] [--min 0.25]
        [--flavor rel] [--replays 8] [--results /var/tmp/dbregress-rocksdb-all-changes]
        [--dry-run]

TREE is a git checkout of RocksDB with its tags (`git clone` of the project; dbregress
never ships its code). GOOD defaults to the merge base of v7.10.2 and BAD: the registry's
releases put revrange's first rise at 8.1.1 (docs/bisect.md), and from that merge base to
v8.1.1 the first-parent line is 122 commits. Runs

    dbregress bisect --src TREE GOOD BAD --engine rocksdb --flavor rel --step revrange
        --all-changes --min 0.25% --replays 8 (the ledger lab's kv sizes)

in the cost lane, each commit built once in `rel` (`make DEBUG_LEVEL=0`'s flags, ccache)
and counted once (the count store). A stopped run is resumed by running the same command
again: the bench passes `--resume` when its results folder holds a bisection of the same
request (ends, flavor, step, minimum, replays, sizes), so no build or count is repeated;
the progress of every invocation goes to RESULTS/stderr.log too. Prints the table of
changes by commit (id, subject, increment, share), the points, where each point's time
went (its build, timed run and cost lane) and the wall time; exits as the bisection
exits.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

from all_changes import point_times  # noqa: E402
from bisect_src import git  # noqa: E402

# the ledger lab's kv sizes (labs/ledger-rocksdb.toml): what the releases' ledger counted
SIZES = ["keys=200000", "seconds=1", "short_seconds=1", "warmup_s=0.5"]


def earlier(results: Path, builds: list[str], args: argparse.Namespace) -> Path | None:
    """The newest bisection in `results` of exactly this request (the same first and
    last build with their flavor, step, minimum, replays and sizes), to resume."""
    sizes = dict(size.split("=", 1) for size in SIZES)
    for folder in sorted(results.glob("bisect-*"), reverse=True):
        state_file = folder / "bisect.json"
        if not state_file.is_file():
            continue
        request = json.loads(state_file.read_text()).get("request", {})
        same = (
            request.get("builds", [None])[0] == builds[0]
            and request.get("builds", [None])[-1] == builds[-1]
            and request.get("step") == args.step
            and request.get("all_changes") is True
            and abs(float(request.get("minimum") or 0) - args.min / 100) < 1e-9
            and request.get("replays") == args.replays
            and {k: str(v) for k, v in (request.get("sizes") or {}).items()} == sizes
        )
        if same:
            return folder
    return None


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--tree", type=Path, required=True, help="RocksDB git checkout with tags")
    ap.add_argument("--good", help="default: the merge base of v7.10.2 and --bad")
    ap.add_argument("--bad", default="v8.1.1")
    ap.add_argument("--step", default="revrange")
    ap.add_argument("--min", type=float, default=0.25, help="percent")
    ap.add_argument("--flavor", default="rel")
    # revrange's counts spread 0.05-0.28% between replays of one build: four replays a
    # build left a +0.6% change inside an undecided half; eight named it (docs/ledger.md)
    ap.add_argument("--replays", type=int, default=8)
    ap.add_argument("--results", type=Path, default=Path("/var/tmp/dbregress-rocksdb-all-changes"))
    ap.add_argument("--dry-run", action="store_true")
    args = ap.parse_args()
    tree = args.tree.resolve()
    bad = git(tree, "rev-parse", f"{args.bad}^{{commit}}")
    if args.good:
        good = git(tree, "rev-parse", args.good)
    else:
        good = git(tree, "merge-base", "v7.10.2", bad)
    n = int(git(tree, "rev-list", "--count", "--first-parent", f"{good}..{bad}"))
    print(f"{tree}: {good[:12]}..{bad[:12]} ({args.bad}), {n} first-parent commits")
    args.results.mkdir(parents=True, exist_ok=True)
    ends = [f"rocksdb@src:{tree}#{good}+{args.flavor}", f"rocksdb@src:{tree}#{bad}+{args.flavor}"]
    previous = earlier(args.results, ends, args)
    cmd = ["uv", "run", "dbregress", "bisect"]
    if previous:
        cmd += ["--resume", str(previous)]
    else:
        cmd += ["--src", str(tree), good, bad, "--engine", "rocksdb", "--flavor", args.flavor]
        cmd += ["--step", args.step, "--all-changes", "--min", f"{args.min}%"]
        cmd += ["--replays", str(args.replays), "--results", str(args.results)]
        for size in SIZES:
            cmd += ["--size", size]
    print("$ " + " ".join(cmd), flush=True)
    if args.dry_run:
        return 0
    t0 = time.monotonic()
    log = args.results / "stderr.log"  # every invocation's progress, resumed ones too
    with open(log, "a") as out:
        proc = subprocess.Popen(cmd, cwd=ROOT, stderr=subprocess.PIPE, text=True)
        assert proc.stderr is not None
        for line in proc.stderr:
            sys.stderr.write(line)
            out.write(line)
            out.flush()
        code = proc.wait()
    print(f"exit {code}, wall time of this invocation {time.monotonic() - t0:.0f} s")
    folder = previous or earlier(args.results, ends, args)
    if folder and (folder / "bisect.json").is_file():
        state = json.loads((folder / "bisect.json").read_text())
        print(
            f"points (builds counted): {state.get('counted')}; "
            f"runs: {len(state.get('points', []))}; "
            f"skipped: {len(state.get('skipped', []))}; explained: {state.get('explained')}"
        )
        for change in state.get("changes", []):
            print(f"  {json.dumps(change)}")
        print("where each point's time went:")
        lines, _ = point_times(folder, log)
        print("\n".join(f"  {line}" for line in lines))
    return code


if __name__ == "__main__":
    sys.exit(main())
