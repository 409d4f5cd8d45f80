"""Bisection to the commit on a real PostgreSQL tree, measured.

    uv run python bench/bisect_src.py [--case plain|unbuildable|flavor|patched] [--commits 32]
                                      [--bad-at 21] [--kill-after 30]
                                      [--work /var/tmp/dbregress-bisect-src]

Makes a git history on top of Debian's PostgreSQL 15 source (`make sources` unpacks it):
the tree as the first commit, then `--commits` - 1 commits. Most of them change a comment
in a file every build compiles (so each commit is a new build, and ccache keeps it to
the files that changed); the one at `--bad-at` adds a fixed amount of work to every
query's path (a loop of volatile stores in exec_execute_message, which every prepared
query of the Insert Benchmark's q-steps runs). Then runs

    dbregress bisect --src TREE FIRST LAST --step qp100 --lane cost

at small sizes and checks what it printed, per case:

- plain: the first bad commit is the one at `--bad-at`, named in at most log2(commits)
  + 2 points, with a progress line per build (each "building" line before its build's
  end); the bisection is killed (SIGKILL, the whole process group) `--kill-after`
  seconds into its first build and resumed with `bisect --resume`.
- unbuildable: the commit at `--bad-at` also leaves a line that does not compile, which
  the next two keep and the one after repairs: the answer is "could be any of" those
  three commits and the next, never a single commit.
- flavor: a flavor whose configure fails on every commit (--with-blocksize=3, in a
  --flavors file): the bisection stops with configure's error after its good end,
  exit 2, having built nothing else.
- patched: the history's first commits are PostgreSQL 15.18 with a line that today's
  compiler refuses; the commit `--bad-at` - 4 says 15.19 (configure's PACKAGE_VERSION)
  and repairs it. A lab file's flavor carries a patch for versions "<15.19" that
  removes the line, and the bisection takes it with `--lab LAB --flavor fixold`: every
  15.18 build applies the patch, no 15.19 build does, and the first bad commit is named.

Prints the progress lines, the path taken, each build's time and the whole wall time;
exits 1 when a check fails.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEBIAN_SOURCES = Path(os.environ.get("DEBIAN_SOURCES", "/var/cache/dbregress/debian-src"))
CACHE = Path(os.environ.get("DBREGRESS_CACHE", "/var/cache/dbregress"))
# Compiled by every build, on no benchmark's path: where the harmless commits write.
HARMLESS = "src/backend/utils/adt/misc.c"
BROKEN = "this does not compile;\n"
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
UNBUILDABLE = 3  # the unbuildable case's run of commits that do not compile
BUMP_BEFORE_BAD = 4  # patched: the version bump (and repair) this many commits before the bad one
PATCHED_LAB = """# a lab whose flavor makes old commits build (bench/bisect_src.py, case patched)
name = "patched"
benchmark = "insert"

[[column]]
label = "tree"
build = "postgres@src:{repo}+fixold"

[flavors.postgres.fixold]
cflags = "-O2 -g1"
patches = [{{ file = "fix-old.patch", versions = "<15.19" }}]
"""


def fix_patch(repo: Path) -> str:
    """A patch that removes the line that does not compile from the top of HARMLESS."""
    lines = (repo / HARMLESS).read_text().splitlines(keepends=True)
    assert lines[0] == BROKEN
    context = "".join(" " + ln for ln in lines[1:4])
    return f"--- a/{HARMLESS}\n+++ b/{HARMLESS}\n@@ -1,4 +1,3 @@\n-{BROKEN}{context}"


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(repo), *args],
        env={**os.environ, **ENV},
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip()


def debian_tree(work: Path) -> Path:
    """A fresh copy of Debian's PostgreSQL 15 source at WORK/postgresql."""
    trees = sorted(DEBIAN_SOURCES.glob("postgresql-15-*/configure"))
    if not trees:
        raise SystemExit(f"no PostgreSQL source under {DEBIAN_SOURCES}: run `make sources`")
    repo = work / "postgresql"
    shutil.rmtree(repo, ignore_errors=True)
    shutil.copytree(trees[-1].parent, repo, symlinks=True)
    return repo


def make_history(
    work: Path, commits: int, bad_at: int, broken: range, bump: int = 0
) -> tuple[Path, list[str]]:
    """The history; the commits in `broken` have a line that does not compile at the
    top of the harmless file (the compiler's first error names the same line in each);
    the commit `bump`, if any, changes configure's version to 15.19."""
    repo = debian_tree(work)
    if 0 in broken:  # the first commit too: an old tree today's compiler refuses
        (repo / HARMLESS).write_text(BROKEN + (repo / HARMLESS).read_text())
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "PostgreSQL 15 as Debian ships it")
    ids = [git(repo, "rev-parse", "HEAD")]
    harmless = repo / HARMLESS
    for i in range(1, commits):
        subject = f"misc.c: comment {i}"
        if i == bump:
            configure = repo / "configure"
            text = configure.read_text()
            configure.write_text(
                re.sub(r"PACKAGE_VERSION='15\.\d+'", "PACKAGE_VERSION='15.19'", text)
            )
            subject = "PostgreSQL 15.19, which builds with today's compiler"
        if i == bad_at:
            hot = repo / HOT
            code = hot.read_text()
            assert HOT_ANCHOR in code, f"{HOT} has no {HOT_ANCHOR!r}"
            hot.write_text(code.replace(HOT_ANCHOR, HOT_ANCHOR + EXTRA_WORK, 1))
            subject = "exec_execute_message: more work per query"
        text = harmless.read_text().removeprefix(BROKEN)
        if i in broken:
            text = BROKEN + text
            subject += " (does not compile)"
        harmless.write_text(text + f"\n/* bench commit {i} */\n")
        git(repo, "commit", "-qam", subject)
        ids.append(git(repo, "rev-parse", "HEAD"))
    return repo, ids


def bisect_cmd(repo: Path, ids: list[str], results: Path, extra: list[str]) -> list[str]:
    cmd = ["uv", "run", "dbregress", "bisect", "--src", str(repo), ids[0], ids[-1]]
    cmd += ["--step", "qp100", "--lane", "cost", "--replays", "2", "--results", str(results)]
    for size in SIZES:
        cmd += ["--size", size]
    return cmd + extra


def run(cmd: list[str], kill_after: float | None, log: Path) -> tuple[int, str, str, bool]:
    """The command (its stderr teed to the terminal and `log`), killed with its whole
    process group `kill_after` seconds after its first build began, if given."""
    print("$ " + " ".join(cmd), flush=True)
    with open(log, "w") as err:
        proc = subprocess.Popen(
            cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=err, text=True, start_new_session=True
        )
        killed, began = False, None
        while proc.poll() is None:
            time.sleep(1)
            if kill_after is None or killed:
                continue
            if began is None and " building " in log.read_text():
                began = time.monotonic()
            if began is not None and time.monotonic() - began >= kill_after:
                os.killpg(proc.pid, signal.SIGKILL)
                killed = True
        out = proc.stdout.read() if proc.stdout else ""
        proc.wait()
    text = log.read_text()
    sys.stderr.write(text)
    return proc.returncode, out, text, killed


def build_times(repo: Path) -> list[str]:
    lines = []
    for spec_file in sorted((CACHE / "postgres").glob("src-*/dbregress-build.json")):
        spec = json.loads(spec_file.read_text())
        if str(repo) in spec.get("spec", ""):
            ref = re.search(r"#([0-9a-f]{12})", spec["spec"])
            lines.append(f"  build {ref.group(1) if ref else spec['spec']}: {spec['build_s']} s")
    return lines


def patch_use(repo: Path) -> dict[str, str]:
    """Each build of the tree (its full commit id) and the patches it applied."""
    out = {}
    for spec_file in sorted((CACHE / "postgres").glob("src-*/dbregress-build.json")):
        spec = json.loads(spec_file.read_text())
        found = re.search(r"#([0-9a-f]{40})", spec.get("spec", ""))
        if str(repo) in spec.get("spec", "") and found:
            out[found.group(1)] = spec.get("patches", "")
    return out


def progress_ok(err: str, killed: bool) -> bool:
    """One "building" line per build, its end (built, skipping, or an end's error) said
    before the next build begins; only a killed bisection's last build has no end."""
    pending = None
    for line in err.splitlines():
        begun = re.search(r" building (?:the \w+ end )?\d+/\d+ ([0-9a-f]{12}) ", line)
        if begun:
            if pending is not None:
                return False
            pending = begun.group(1)
        elif pending and re.search(rf"( built | skipping |^Error: the \w+ end .*){pending}", line):
            pending = None
    return pending is None or killed


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument(
        "--case", choices=("plain", "unbuildable", "flavor", "patched"), default="plain"
    )
    ap.add_argument("--commits", type=int, default=32)
    ap.add_argument("--bad-at", type=int, default=21)
    ap.add_argument(
        "--kill-after",
        type=float,
        default=30.0,
        help="plain: seconds into the first build to kill the bisection (0: never)",
    )
    ap.add_argument("--work", type=Path, default=Path("/var/tmp/dbregress-bisect-src"))
    args = ap.parse_args()
    work = args.work / args.case
    work.mkdir(parents=True, exist_ok=True)
    broken = (
        range(args.bad_at, args.bad_at + UNBUILDABLE) if args.case == "unbuildable" else range(0)
    )
    bump = args.bad_at - BUMP_BEFORE_BAD if args.case == "patched" else 0
    if bump:
        broken = range(0, bump)
    repo, ids = make_history(work, args.commits, args.bad_at, broken, bump)
    print(
        f"tree {repo}: {len(ids)} commits; bad at {args.bad_at} ({ids[args.bad_at][:12]})"
        + (f"; not building: {broken.start}..{broken.stop - 1}" if broken else ""),
        flush=True,
    )
    results = work / "results"
    shutil.rmtree(results, ignore_errors=True)
    extra: list[str] = []
    if args.case == "patched":
        git(repo, "checkout", "-q", ids[0])
        (work / "fix-old.patch").write_text(fix_patch(repo))
        git(repo, "checkout", "-q", "main")
        lab = work / "lab.toml"
        lab.write_text(PATCHED_LAB.format(repo=repo))
        extra = ["--flavor", "fixold", "--lab", str(lab)]
    if args.case == "flavor":
        flavors = work / "flavors.toml"
        flavors.write_text('[flavors.postgres.badblocks]\nconfigure = ["--with-blocksize=3"]\n')
        extra = ["--flavor", "badblocks", "--flavors", str(flavors)]
    t0 = time.monotonic()
    kill = args.kill_after if args.case == "plain" and args.kill_after > 0 else None
    code, out, err, killed = run(bisect_cmd(repo, ids, results, extra), kill, work / "stderr-1.log")
    progress = progress_ok(err, killed)
    if killed:
        print(
            f"killed (SIGKILL) {args.kill_after:.0f} s into the first build; resuming", flush=True
        )
        (root,) = results.glob("bisect-*")
        resume = ["uv", "run", "dbregress", "bisect", "--resume", str(root)]
        code, out, err2, _ = run(resume, None, work / "stderr-2.log")
        progress = progress and progress_ok(err2, False)
        err += err2
    wall = time.monotonic() - t0
    print(out)
    print(f"wall time {wall:.0f} s, exit {code}")
    print("\n".join(build_times(repo)))
    building = len(re.findall(r" building ", err))
    (root,) = results.glob("bisect-*")
    state = json.loads((root / "bisect.json").read_text())
    points = len(state["points"])
    point_lines = len(re.findall(r" point \d+: (?:measuring |.*reusing run)", err))
    checks = {
        "a progress line per build": progress,
        f"a progress line per point ({point_lines})": point_lines >= points,
    }
    if args.case == "plain":
        limit = math.ceil(math.log2(args.commits)) + 2
        checks[f"named {ids[args.bad_at][:12]}"] = (
            code == 0 and f"first bad commit: {ids[args.bad_at][:12]}" in out
        )
        checks[f"{points} points <= log2({args.commits}) + 2 = {limit}"] = points <= limit
        if kill is not None:
            checks["killed in its first build, then resumed"] = killed
    elif args.case == "unbuildable":
        want = [ids[i] for i in range(broken.start, broken.stop + 1)]
        checks["exit 0"] = code == 0
        checks["never a single commit"] = "first bad commit:" not in out
        checks["could be any of the 3 and the next"] = "could be any of these 4" in out and all(
            f"  {c[:12]} " in out for c in want
        )
        checks["bisect.json: candidates"] = [
            s.split("#")[1].split("+")[0] for s in state["candidates"]
        ] == want
    elif args.case == "patched":
        patched = patch_use(repo)
        checks[f"named {ids[args.bad_at][:12]}"] = (
            code == 0 and f"first bad commit: {ids[args.bad_at][:12]}" in out
        )
        checks["every 15.18 build patched, no 15.19 build"] = bool(patched) and all(
            (ids.index(c) < bump) == bool(p) for c, p in patched.items()
        )
        print(f"builds and their patches: {patched}")
    else:
        checks["exit 2"] = code == 2
        checks["stopped at the good end with configure's error"] = (
            "the good end 1/" in err and "Invalid block size" in err
        )
        checks["no other build"] = building == 1 and points == 0
    print(f"builds begun: {building}; points: {points}")
    for what, ok in checks.items():
        print(f"  {'ok  ' if ok else 'FAIL'} {what}")
    return 0 if all(checks.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
