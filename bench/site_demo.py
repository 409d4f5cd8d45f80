"""A real history for the site, and the README's screenshot of a step page.

    uv run python bench/site_demo.py [--runs 8] [--work /var/tmp/dbregress-site-demo]
                                     [--screenshot docs/site-screenshot.png]

Runs one small RocksDB lab `--runs` times into one results folder, as a nightly job
would: the base column is always rocksdb@7.10.2; the head column is 7.10.2 in the first
half of the runs and 10.2.1 from then on (a new release picked up), so its steps move
in both lanes where 10.2 differs; from the third run the loadgen is another binary (the
same one with bytes appended: another method, so the history draws a boundary there).
Then `dbregress site`, checks the step page shows a change point and the boundary, and
takes a Chromium screenshot of it. Prints each run's wall time and the site's line.
Exits 1 when a check fails. A run already in the folder is kept (re-running the script
adds none): delete the folder to start again."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

STEP = "revrange"
LAB = """\
name = "site-demo"
placement = "same"
benchmark = "kv"
repeats = 3
warmup_job = false
count_replays = 2
[[column]]
label = "base"
build = "rocksdb@7.10.2"
[[column]]
label = "head"
build = "{head}"
[kv]
keys = 20000
seconds = 0.5
short_seconds = 0.5
warmup_s = 0.2
steps = ["fillseq", "revrange", "readrandom"]
"""


def cli(*args: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "dbregress.cli.main", *args],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=3600, check=False,
    )  # fmt: skip


def other_loadgen(work: Path) -> Path:
    from dbregress.loadgen.client import find_binary

    # the same file name: the cost lane tells the loadgen's code from the engine's by it
    other = work / "loadgen-b" / "dbregress-loadgen"
    if not other.is_file():
        other.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(find_binary(), other)
        with other.open("ab") as f:
            f.write(b"\0another build of the loadgen (bench/site_demo.py)\0")
    return other


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=8)
    ap.add_argument("--work", type=Path, default=Path("/var/tmp/dbregress-site-demo"))
    ap.add_argument("--screenshot", type=Path, default=None)
    args = ap.parse_args()
    work: Path = args.work
    results = work / "results"
    work.mkdir(parents=True, exist_ok=True)
    done = len(list(results.glob("*/run.json"))) if results.is_dir() else 0
    base_env = {**os.environ, "DBREGRESS_WORKDIR": str(work / "engines")}
    for i in range(done, args.runs):
        head = "rocksdb@7.10.2" if i < args.runs // 2 else "rocksdb@10.2.1"
        lab = work / f"lab-{i}.toml"
        lab.write_text(LAB.format(head=head))
        env = dict(base_env)
        if i >= 2:
            env["DBREGRESS_LOADGEN"] = str(other_loadgen(work))
        t0 = time.monotonic()
        out = cli("run", str(lab), "--results", str(results), env=env, cwd=work)
        print(f"run {i + 1}/{args.runs} head={head}: exit {out.returncode}, "
              f"{time.monotonic() - t0:.0f} s", flush=True)  # fmt: skip
        if out.returncode not in (0, 1):
            print(out.stderr[-3000:], file=sys.stderr)
            return 1
    made = cli("site", "--results", str(results), env=base_env, cwd=work)
    print(made.stdout.strip())
    if made.returncode != 0:
        print(made.stderr, file=sys.stderr)
        return 1
    page = results / "site" / "site-demo" / f"step-kv-{STEP}.html"
    data = json.loads((page.parent / "data" / f"step-kv-{STEP}.json").read_text())
    changes = [m for c in data["charts"] for m in c["changes"]]
    breaks = [b for c in data["charts"] for b in c["breaks"]]
    for c in data["charts"]:
        found = [(m["column"], m["run_id"], m["word"], round(m["ratio"], 3)) for m in c["changes"]]
        print(f"{c['lane']} lane: change points {found}, "
              f"method breaks before runs {[b['run'] for b in c['breaks']]}")  # fmt: skip
    if args.screenshot is not None:
        from tests import browser

        browser.screenshot(page, args.screenshot.resolve(), width=1100, height=900)
        print(f"screenshot: {args.screenshot}")
    ok = bool(changes) and bool(breaks)
    print("checks:", "ok" if ok else "FAILED: no change point or no method break on the page")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
