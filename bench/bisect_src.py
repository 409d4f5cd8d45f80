"""Bisection to the commit on a real PostgreSQL tree, measured.

    uv run python bench/bisect_src.py [--commits 32] [--bad-at 21] [--broken-at 24]
                                      [--work /var/tmp/dbregress-bisect-src]

Makes a git history on top of Debian's PostgreSQL 15 source (`make sources` unpacks it):
the tree as the first commit, then `--commits` - 1 commits. Most of them change a comment
in a file every build compiles (so each commit is a new build, and ccache keeps it to
the files that changed); the one at `--bad-at` adds a fixed amount of work to every
query's path (a loop of volatile stores in exec_execute_message, which every prepared
query of the Insert Benchmark's q-steps runs); the one at `--broken-at` leaves a syntax
error that the next commit repairs. Then runs

    dbregress bisect --src TREE FIRST LAST --step qp100 --lane cost

at small sizes and checks what it printed: the first bad commit is the one at
`--bad-at`, the broken commit was skipped and reported, and no more than about
log2(commits) + 2 points were measured. Prints the path taken, each build's time (cold,
then with ccache) and the whole wall time.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEBIAN_SOURCES = Path(os.environ.get("DEBIAN_SOURCES", "/var/cache/dbregress/debian-src"))
# Compiled by every build, on no benchmark's path: where the harmless commits write.
HARMLESS = "src/backend/utils/adt/misc.c"
# Every execution of a prepared statement passes here once (the loadgen prepares the
# Insert Benchmark's queries, so each is a Bind and an Execute message).
HOT = "src/backend/tcop/postgres.c"
HOT_ANCHOR = "exec_execute_message(const char *portal_name, long max_rows)\n{"
EXTRA_WORK = """
\t/* added work per query (bench/bisect_src.py) */
\t{
\t\tvolatile int dbregress_sink = 0;

\t\tfor (int dbregress_i = 0; dbregress_i < 20000; dbregress_i++)
\t\t\tdbregress_sink += dbregress_i;
\t}
"""
SIZES = ["load_rows=20000", "write_rows=4000", "query_seconds=0.5", "warmup_s=0.2"]
ENV = {
    "GIT_AUTHOR_NAME": "bench",
    "GIT_AUTHOR_EMAIL": "bench@dbregress",
    "GIT_COMMITTER_NAME": "bench",
    "GIT_COMMITTER_EMAIL": "bench@dbregress",
}


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(repo), *args],
        env={**os.environ, **ENV},
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip()


def make_history(work: Path, commits: int, bad_at: int, broken_at: int) -> tuple[Path, list[str]]:
    trees = sorted(DEBIAN_SOURCES.glob("postgresql-15-*/configure"))
    if not trees:
        raise SystemExit(f"no PostgreSQL source under {DEBIAN_SOURCES}: run `make sources`")
    repo = work / "postgresql"
    shutil.rmtree(repo, ignore_errors=True)
    shutil.copytree(trees[-1].parent, repo, symlinks=True)
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "PostgreSQL 15 as Debian ships it")
    ids = [git(repo, "rev-parse", "HEAD")]
    for i in range(1, commits):
        if i == bad_at:
            hot = repo / HOT
            text = hot.read_text()
            assert HOT_ANCHOR in text, f"{HOT} has no {HOT_ANCHOR!r}"
            hot.write_text(text.replace(HOT_ANCHOR, HOT_ANCHOR + EXTRA_WORK, 1))
            subject = "exec_execute_message: more work per query"
        elif i == broken_at:
            with open(repo / HARMLESS, "a") as f:
                f.write("\nthis does not compile\n")
            subject = "misc.c: a change that does not compile"
        else:
            text = (repo / HARMLESS).read_text().replace("\nthis does not compile\n", "")
            (repo / HARMLESS).write_text(text + f"\n/* bench commit {i} */\n")
            subject = f"misc.c: comment {i}"
        git(repo, "commit", "-qam", subject)
        ids.append(git(repo, "rev-parse", "HEAD"))
    return repo, ids


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--commits", type=int, default=32)
    ap.add_argument("--bad-at", type=int, default=21)
    # On the search's path (with 32 commits and the change at 21 the bisection measures
    # 16, 24, 20, 22, 21): commit 24 does not build, so it must be skipped and another
    # commit between 16 and 31 measured instead.
    ap.add_argument("--broken-at", type=int, default=24)
    ap.add_argument("--work", type=Path, default=Path("/var/tmp/dbregress-bisect-src"))
    args = ap.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    repo, ids = make_history(args.work, args.commits, args.bad_at, args.broken_at)
    print(
        f"tree {repo}: {len(ids)} commits; bad at {args.bad_at} ({ids[args.bad_at][:12]}), "
        f"broken at {args.broken_at} ({ids[args.broken_at][:12]})",
        flush=True,
    )
    results = args.work / "results"
    cmd = [
        "uv",
        "run",
        "dbregress",
        "bisect",
        "--src",
        str(repo),
        ids[0],
        ids[-1],
        "--step",
        "qp100",
        "--lane",
        "cost",
        "--replays",
        "2",
        "--results",
        str(results),
    ]
    for size in SIZES:
        cmd += ["--size", size]
    print("$ " + " ".join(cmd), flush=True)
    t0 = time.monotonic()
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=False)
    wall = time.monotonic() - t0
    sys.stderr.write(done.stderr[-4000:])
    print(done.stdout)
    print(f"wall time {wall:.0f} s, exit {done.returncode}")
    builds = sorted(
        p
        for p in (
            Path(os.environ.get("DBREGRESS_CACHE", "/var/cache/dbregress")) / "postgres"
        ).glob("src-*/dbregress-build.json")
    )
    for spec_file in builds:
        spec = json.loads(spec_file.read_text())
        if str(repo) in spec.get("spec", ""):
            ref = re.search(r"#([0-9a-f]{12})", spec["spec"])
            print(f"  build {ref.group(1) if ref else spec['spec']}: {spec['build_s']} s")
    points = len(re.findall(r"^\| \S+ \| ", done.stdout, flags=re.M)) - 1
    want = f"first bad commit: {ids[args.bad_at][:12]}"
    ok = want in done.stdout and ids[args.broken_at] in done.stdout
    limit = math.ceil(math.log2(args.commits)) + 2
    print(
        f"points measured: {points} (at most about {limit}); named the commit: "
        f"{want in done.stdout}; broken commit skipped and reported: "
        f"{ids[args.broken_at] in done.stdout}"
    )
    return 0 if ok and points <= limit + 1 else 1


if __name__ == "__main__":
    sys.exit(main())
