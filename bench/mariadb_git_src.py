"""A MariaDB git checkout laid out as upstream's, with its submodules as real git
submodules, built at a tag and run on the micro lab's point-query step.

    make mariadb-source                 # Debian's MariaDB 10.11 tree and its build tools
    uv run python bench/mariadb_git_src.py [--flavors rel,rel_myrocks] [--work DIR]

Debian's MariaDB source package is an unpacked tarball. This makes a git history of
it where, as in github.com/MariaDB/server, libmariadb, storage/rocksdb/rocksdb and
wsrep-lib (with its own submodule wsrep-API/v26) are submodules, each a repository of
its own added with `git submodule add` and tagged `mariadb-<version>`. Then:

1. a clone made without `--recurse-submodules` is asked for a build at the tag: the
   build must stop at once with the error naming the missing submodule and the command
   that fetches it;
2. each flavor is built at the tag (`mariadb@src:REPO#mariadb-X.Y.Z+FLAVOR`, timed),
   asked for again (a cache hit), and its `fetch --why` inputs are printed;
3. each build runs the micro lab's point-query step beside Debian's own MariaDB
   (`mariadb@system`), both lanes; `rel_myrocks` runs it on the `myrocks` config (the
   RocksDB engine built from the submodule, loaded as the registry MyRocks is).

Prints each phase's wall time and the report of each lab.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

# the dbregress CLI run through uv, as bench/mariadb_src.py runs it (bench/ is on
# sys.path when a script of it runs)
from mariadb_src import dbregress

DEBIAN_SOURCES = Path(os.environ.get("DEBIAN_SOURCES", "/var/cache/dbregress/debian-src"))
# Upstream's submodules that Debian's tarball carries as plain directories, innermost
# first (a path inside another is that one's submodule).
SUBMODULES = ("wsrep-lib/wsrep-API/v26", "wsrep-lib", "libmariadb", "storage/rocksdb/rocksdb")
GIT_ENV = {
    "GIT_AUTHOR_NAME": "bench",
    "GIT_AUTHOR_EMAIL": "bench@dbregress",
    "GIT_COMMITTER_NAME": "bench",
    "GIT_COMMITTER_EMAIL": "bench@dbregress",
}


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-c", "protocol.file.allow=always", "-C", str(repo), *args],
        env={**os.environ, **GIT_ENV},
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        sys.exit(f"git {' '.join(args)} in {repo} failed: {done.stderr.strip()}")
    return done.stdout.strip()


def version_of(tree: Path) -> str:
    text = (tree / "VERSION").read_text()
    parts = dict(re.findall(r"MYSQL_VERSION_(MAJOR|MINOR|PATCH)=(\d+)", text))
    return f"{parts['MAJOR']}.{parts['MINOR']}.{parts['PATCH']}"


def make_repo(files: Path, repo: Path, subs: dict[str, Path], tag: str) -> None:
    """A repository of `files` whose paths in `subs` are submodules (their repositories
    at `subs[path]`), one commit, tagged."""
    shutil.copytree(files, repo, symlinks=True)
    for path in subs:
        shutil.rmtree(repo / path)
    git(repo, "init", "-q", "-b", "main")
    # every file of the tarball, those its .gitignore names too (upstream tracks some,
    # such as dbug/user.r, that its .gitignore lists)
    git(repo, "add", "-A", "--force")
    git(repo, "commit", "-qm", f"{repo.name} as Debian ships it")
    for path, url in sorted(subs.items()):
        git(repo, "submodule", "add", "-q", f"file://{url}", path)
    if subs:
        git(repo, "commit", "-qm", "submodules")
    git(repo, "tag", tag)


def make_checkout(tree: Path, work: Path) -> tuple[Path, str]:
    """The superproject and its submodules' repositories under `work`."""
    tag = f"mariadb-{version_of(tree)}"
    repos = work / "repos"
    repos.mkdir(parents=True)
    made: dict[str, Path] = {}
    present = [p for p in SUBMODULES if (tree / p).is_dir()]
    for path in present:  # innermost first: a submodule's own submodules exist before it
        inner = {sub[len(path) + 1 :]: made[sub] for sub in made if sub.startswith(path + "/")}
        repo = repos / path.replace("/", "_")
        make_repo(tree / path, repo, inner, tag)
        made[path] = repo
    top = {p: made[p] for p in present if not any(p.startswith(q + "/") for q in present)}
    superproject = work / "server"
    make_repo(tree, superproject, top, tag)
    git(superproject, "submodule", "update", "-q", "--init", "--recursive")
    return superproject, tag


def timed(what: str, *args: str, cwd: Path, ok: bool = True) -> subprocess.CompletedProcess[str]:
    t0 = time.monotonic()
    done = dbregress(*args, cwd=cwd)
    print(f"{what}: {time.monotonic() - t0:.1f} s (exit {done.returncode})", flush=True)
    if ok and done.returncode != 0:
        sys.exit(f"{what} failed:\n{done.stdout}\n{done.stderr}")
    return done


def lab_text(spec: str, flavor: str, seconds: float) -> str:
    config = "myrocks" if flavor == "rel_myrocks" else "default"
    return f"""\
name = "mariadb-git-{flavor}"
benchmark = "micro"
repeats = 2

[[column]]
label = "debian"
build = "mariadb@system"
config = "{config}"

[[column]]
label = "src-{flavor}"
build = "{spec}"
config = "{config}"

[micro]
tables = 1
rows = 10000
clients = 1
seconds = {seconds}
warmup_s = 1
reads_before_writes = false
only = ["point-query"]
"""


def missing_submodule(superproject: Path, tag: str, work: Path) -> None:
    clone = work / "clone-without-submodules"
    shutil.rmtree(clone, ignore_errors=True)
    git(work, "clone", "-q", str(superproject), str(clone))
    done = timed(
        "a build from a clone without its submodules",
        "fetch",
        f"mariadb@src:{clone}#{tag}+rel",
        cwd=work,
        ok=False,
    )
    print(done.stderr.strip())
    if done.returncode == 0 or "submodule update --init" not in done.stderr:
        sys.exit("the missing submodule was not named with its fix")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tree", type=Path, default=DEBIAN_SOURCES / "mariadb")
    ap.add_argument("--flavors", default="rel,rel_myrocks")
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--work", type=Path, default=Path("/var/tmp/dbregress-mariadb-git"))
    ap.add_argument("--only-checkout", action="store_true", help="make the checkout and stop")
    args = ap.parse_args()
    tree = args.tree.resolve()
    if not (tree / "CMakeLists.txt").is_file():
        sys.exit(f"no MariaDB source tree at {tree}; run `make mariadb-source` first")
    work = args.work
    t0 = time.monotonic()
    if (work / "server" / ".git").exists():
        superproject, tag = work / "server", f"mariadb-{version_of(tree)}"
    else:
        shutil.rmtree(work, ignore_errors=True)
        superproject, tag = make_checkout(tree, work)
    print(f"checkout {superproject} at {tag}: {time.monotonic() - t0:.1f} s", flush=True)
    print(git(superproject, "submodule", "status", "--recursive"))
    if args.only_checkout:
        return
    missing_submodule(superproject, tag, work)
    for flavor in args.flavors.split(","):
        spec = f"mariadb@src:{superproject}#{tag}+{flavor}"
        built = timed(f"build {spec}", "fetch", spec, cwd=work)
        print(built.stdout.strip())
        again = timed("the same build again", "fetch", spec, cwd=work)
        print(again.stdout.strip())
        why = json.loads(timed("fetch --why", "fetch", "--why", spec, cwd=work).stdout)
        print(json.dumps(why[spec]["inputs"]["tree"], indent=2))
        lab = work / f"lab-{flavor}.toml"
        lab.write_text(lab_text(spec, flavor, args.seconds))
        ran = timed(
            f"the point-query lab ({flavor})",
            "run",
            str(lab),
            "--results",
            str(work / "results"),
            cwd=work,
            ok=False,
        )
        print(ran.stdout[-6000:])
        print(ran.stderr[-3000:])
    print(f"whole: {time.monotonic() - t0:.1f} s")


if __name__ == "__main__":
    main()
