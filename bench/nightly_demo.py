"""The nightly recipe (examples/nightly.py) for three nights on a real PostgreSQL tree.

    uv run python bench/nightly_demo.py [--commits 16] [--bad-at 11] [--heads 4,8,15]
                                        [--nights 1,2,3] [--work /var/tmp/dbregress-nightly]

Makes a git history on top of Debian's PostgreSQL 15 source (`make sources` unpacks it)
with bench/bisect_src.py's `make_history`: the tree as the first commit, then commits
that change a comment, and at `--bad-at` one that adds a fixed amount of work to every
prepared query (a loop in exec_execute_message). Then three "nights", each with the
tree's HEAD moved to the next of `--heads` (a detached checkout, as a pull would move
it) and `examples/nightly.py --tree TREE --results RESULTS` run on it:

- night 1 at a commit before the bad one, against the history's first commit as the
  last release (`--base FIRST`);
- night 2 at a later commit still before the bad one, against night 1's commit;
- night 3 at a commit after the bad one, against night 2's commit.

Each night gates with `--gate slower:cost` unless told otherwise: on a 2-vCPU VM shared
with other work, the time lane leaves out the repeats that work disturbed, and the
fail-closed gate of both lanes (`--gate slower`) then says 2 (not judged) for a night
whose time lane kept too few; the cost lane's counts do not depend on the host.

Checks: nights 1 and 2 exit 0; night 3 exits 1 and its bisection's bisect.json names
the bad commit as `first_bad`; the site's "what moved" page of the lab
(RESULTS/site/LAB/moved.html) shows the regression (a `slower` line for night 3's
commit) and the bisection's answer; the state file's last good night is night 2. Prints
each night's wall time, exit status and the bisection's answer; exits 1 when a check
fails. `--nights 1` runs night 1 alone (a fresh history); `--nights 2,3` goes on from
the history and results already in `--work`.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(BENCH))

from bisect_src import git, make_history  # noqa: E402

RECIPE = ROOT / "examples" / "nightly.py"
LAB = "nightly-postgres"


def dbregress_command() -> str:
    """How the recipe calls dbregress: the one beside this Python, or through uv."""
    beside = Path(sys.executable).parent / "dbregress"
    if beside.is_file():
        return str(beside)
    found = shutil.which("dbregress")
    return found or f"uv run --project {ROOT} dbregress"


def history(work: Path, commits: int, bad_at: int, fresh: bool) -> tuple[Path, list[str]]:
    """The tree and its commits, oldest first: made anew, or read back from `work`."""
    if fresh:
        return make_history(work, commits, bad_at, range(0))
    repo = work / "postgresql"
    ids = git(repo, "rev-list", "--reverse", "main").split()
    if not ids:
        raise SystemExit(f"no history in {repo}: run night 1 first (--nights 1)")
    return repo, ids


def night(
    n: int, repo: Path, head: str, results: Path, first: str, gate: str, against: str = "last-good"
) -> tuple[int, float, str]:
    """One night at `head`: (exit status, wall seconds, the recipe's summary line); the
    first night, and every night `against` the base, is judged against `first`."""
    git(repo, "checkout", "-q", "--detach", head)
    cmd = [sys.executable, str(RECIPE), "--tree", str(repo), "--results", str(results)]
    cmd += ["--dbregress", dbregress_command(), "--gate", gate, "--against", against]
    if n == 1 or against == "base":
        cmd += ["--base", first]
    print(f"\n=== night {n}: HEAD {head[:12]}\n$ {' '.join(cmd)}", flush=True)
    t0 = time.monotonic()
    done = subprocess.run(cmd, stdout=subprocess.PIPE, text=True, cwd=ROOT)
    wall = time.monotonic() - t0
    print(done.stdout, end="", flush=True)
    return done.returncode, wall, done.stdout.strip().splitlines()[-1] if done.stdout else ""


def last_bisection(results: Path) -> dict[str, object]:
    found = sorted(results.glob("bisect-*/bisect.json"))
    return json.loads(found[-1].read_text()) if found else {}


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--commits", type=int, default=16)
    ap.add_argument("--bad-at", type=int, default=11)
    ap.add_argument("--heads", default="4,8,15", help="each night's HEAD: commit numbers")
    ap.add_argument("--nights", default="1,2,3", help="which nights to run")
    ap.add_argument(
        "--gate",
        default="slower:cost",
        help="the recipe's --gate; slower (both lanes) on a quiet host of your own",
    )
    ap.add_argument("--work", type=Path, default=Path("/var/tmp/dbregress-nightly"))
    args = ap.parse_args()
    heads = [int(h) for h in args.heads.split(",")]
    nights = [int(n) for n in args.nights.split(",")]
    if len(heads) != 3 or not heads[0] < heads[1] < args.bad_at <= heads[2] < args.commits:
        ap.error("--heads: three commit numbers, two before --bad-at and one at or after it")
    work: Path = args.work
    results = work / "results"
    work.mkdir(parents=True, exist_ok=True)
    fresh = nights[0] == 1
    if fresh:
        shutil.rmtree(results, ignore_errors=True)
    repo, ids = history(work, args.commits, args.bad_at, fresh)
    bad = ids[args.bad_at]
    print(f"tree {repo}: {len(ids)} commits; bad at {args.bad_at} ({bad[:12]})", flush=True)
    outcome: dict[int, tuple[int, float, str]] = {}
    for n in nights:
        outcome[n] = night(n, repo, ids[heads[n - 1]], results, ids[0], args.gate)
    git(repo, "checkout", "-q", "main")
    print("\n=== nights")
    for n, (code, wall, line) in outcome.items():
        print(f"night {n}: HEAD {ids[heads[n - 1]][:12]}, exit {code}, wall {wall:.0f} s")
        print(f"  {line}")
    return check(outcome, results, ids, heads, bad)


def check(
    outcome: dict[int, tuple[int, float, str]],
    results: Path,
    ids: list[str],
    heads: list[int],
    bad: str,
) -> int:
    checks: dict[str, bool] = {}
    for n, want in ((1, 0), (2, 0), (3, 1)):
        if n in outcome:
            checks[f"night {n} exits {want}"] = outcome[n][0] == want
    if 3 in outcome:
        found = last_bisection(results)
        first_bad = str(found.get("first_bad") or "")
        print(f"bisection: first_bad {first_bad or '-'} (want {bad[:12]})")
        checks[f"the bisection names {bad[:12]}"] = f"#{bad}+" in first_bad
        moved = results / "site" / LAB / "moved.html"
        page = moved.read_text() if moved.is_file() else ""
        checks[f"{moved.relative_to(results)} has night 3's slower line"] = (
            "slower" in page and ids[heads[2]][:12] in page
        )
        checks[f"{moved.relative_to(results)} has the bisection's answer"] = bad[:12] in page
        state = json.loads((results / "nightly" / "state.json").read_text())
        good = state["last_good"].get(LAB, {}).get("commit")
        checks["the last good night is night 2"] = good == ids[heads[1]]
    for what, ok in checks.items():
        print(f"  {'ok  ' if ok else 'FAIL'} {what}")
    return 0 if all(checks.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
