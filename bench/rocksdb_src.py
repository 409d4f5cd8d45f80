"""RocksDB built from Debian's source package, run on the quickstart's RocksDB steps in
both lanes beside the registry's library of the same release.

    make rocksdb-source                 # Debian's RocksDB tree and its build libraries
    uv run python bench/rocksdb_src.py [--flavor rel] [--registry rocksdb@7.8.3]

Builds `rocksdb@src:TREE+FLAVOR` with `dbregress fetch` (timed: cold, or with ccache
when an earlier build left its objects), asks for it again (a cache hit: no compiler
runs) and prints its `fetch --why` key, then runs the quickstart lab's RocksDB
comparison (the kv benchmark, its sizes, both lanes) with the registry's rocksdbjni
library of the tree's release as the base and the source build beside it, and prints
the report. Prints each phase's wall time; the build's log is under the build cache's
rocksdb/logs/.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import tomllib
from pathlib import Path

# the dbregress CLI run through uv, as bench/mariadb_src.py runs it (bench/ is on
# sys.path when a script of it runs)
from mariadb_src import ROOT, dbregress

DEBIAN_SOURCES = Path(os.environ.get("DEBIAN_SOURCES", "/var/cache/dbregress/debian-src"))


def timed(what: str, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    t0 = time.monotonic()
    done = dbregress(*args, cwd=cwd)
    print(f"{what}: {time.monotonic() - t0:.1f} s (exit {done.returncode})", flush=True)
    if done.returncode not in (0, 1):
        sys.exit(f"{what} failed:\n{done.stdout}\n{done.stderr}")
    return done


def tree_release(tree: Path) -> str:
    text = (tree / "include/rocksdb/version.h").read_text()
    found = dict(re.findall(r"#define ROCKSDB_(MAJOR|MINOR|PATCH)\s+(\d+)", text))
    return f"{found['MAJOR']}.{found['MINOR']}.{found['PATCH']}"


def lab_text(registry: str, spec: str, flavor: str) -> str:
    """The quickstart's RocksDB comparison with these two columns."""
    quick = tomllib.loads((ROOT / "labs/quickstart.toml").read_text())
    (kv,) = [c for c in quick["comparison"] if c["name"] == "rocksdb"]
    sizes = "\n".join(f"{k} = {json.dumps(v)}" for k, v in kv["kv"].items())
    config = kv["column"][0]["config"]
    return f"""\
name = "rocksdb-src"
placement = "{quick["placement"]}"
repeats = {quick["repeats"]}
schedule = "{quick["schedule"]}"
benchmark = "kv"

[[column]]
label = "registry"
build = "{registry}"
config = "{config}"

[[column]]
label = "src-{flavor}"
build = "{spec}"
config = "{config}"

[kv]
{sizes}
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tree", type=Path, default=DEBIAN_SOURCES / "rocksdb")
    ap.add_argument("--flavor", default="rel")
    ap.add_argument("--registry", default=None, help="default: rocksdb@<the tree's release>")
    ap.add_argument("--results", type=Path, default=None)
    args = ap.parse_args()
    tree = args.tree.resolve()
    if not (tree / "include/rocksdb/c.h").is_file():
        sys.exit(f"no RocksDB source tree at {tree}; run `make rocksdb-source` first")
    registry = args.registry or f"rocksdb@{tree_release(tree)}"
    spec = f"rocksdb@src:{tree}+{args.flavor}"
    work = Path(tempfile.mkdtemp(prefix="dbregress-rocksdb-src-"))
    results = args.results or work / "results"
    t0 = time.monotonic()
    print(timed(f"build {spec}", "fetch", spec, cwd=work).stdout.strip())
    print(timed("the same build again (cache hit)", "fetch", spec, cwd=work).stdout.strip())
    why = json.loads(timed("fetch --why", "fetch", "--why", spec, cwd=work).stdout)[spec]
    print(f"key {why['key']}, cached {why['cached']}")
    timed(f"fetch {registry}", "fetch", registry, cwd=work)
    lab = work / "lab.toml"
    lab.write_text(lab_text(registry, spec, args.flavor))
    ran = timed(
        "the quickstart's RocksDB steps", "run", str(lab), "--results", str(results), cwd=work
    )
    print(ran.stdout)
    print(f"whole: {time.monotonic() - t0:.1f} s; lab and results under {work}")


if __name__ == "__main__":
    main()
