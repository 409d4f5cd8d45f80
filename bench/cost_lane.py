"""The cost lane, measured: the replay spread of A/A labs and the lane's wall time.

    uv run python bench/cost_lane.py aa [--engines postgres,rocksdb,innodb,myrocks]
    uv run python bench/cost_lane.py quickstart
    uv run python bench/cost_lane.py show RUN

`aa` runs one build against itself per engine family (PostgreSQL 17.2 on the Insert
Benchmark at the quickstart's sizes, RocksDB 10.2 on the kv steps, MariaDB (Debian's)
with InnoDB and with MyRocks on some point queries, range queries and writes), one repeat
of the time lane and the default three counting replays per column, then prints per
step the spread of each side's replays (max/min - 1 of estimated cycles per operation),
the ratio and its verdict. The goal: no `slower` or `faster`, and at least 90% `same`.

`quickstart` runs labs/quickstart.toml with one repeat per column (the lane does not
depend on the time lane's repeats, only on its sizes) and prints the cost lane's wall
time, both comparisons, every step, default replays: the goal is at most 4 minutes on 2
vCPUs. `show RUN` prints both tables of a finished run.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]

AA = {
    "postgres": """
[[comparison]]
name = "postgres"
benchmark = "insert"
[[comparison.column]]
label = "pg17-a"
build = "postgres@17.2.0"
[[comparison.column]]
label = "pg17-b"
build = "postgres@17.2.0"
[comparison.insert]
clients = 1
load_rows = 200000
write_rows = 40000
query_seconds = 2
warmup_s = 1
cleanup_wait_s = 2
""",
    "rocksdb": """
[[comparison]]
name = "rocksdb"
benchmark = "kv"
[[comparison.column]]
label = "rocksdb-a"
build = "rocksdb@10.2.1"
config = "byrx"
[[comparison.column]]
label = "rocksdb-b"
build = "rocksdb@10.2.1"
config = "byrx"
[comparison.kv]
keys = 300000
seconds = 2
short_seconds = 1
warmup_s = 1
""",
}
MICRO = """
[[comparison]]
name = "{name}"
benchmark = "micro"
[[comparison.column]]
label = "{name}-a"
build = "mariadb@system"
config = "{config}"
[[comparison.column]]
label = "{name}-b"
build = "mariadb@system"
config = "{config}"
[comparison.micro]
tables = 1
rows = 20000
clients = 1
seconds = 2
warmup_s = 1
cleanup_wait_s = 2
only = ["point-query", "random-points", "range-covered-pk", "read-only-range100",
        "update-index", "update-nonindex", "insert"]
"""
AA["innodb"] = MICRO.format(name="innodb", config="default")
AA["myrocks"] = MICRO.format(name="myrocks", config="myrocks")


def run_lab(text: str, results: Path) -> Path:
    with tempfile.TemporaryDirectory() as tmp:
        lab = Path(tmp) / "lab.toml"
        lab.write_text(text)
        args = ["uv", "run", "dbregress", "run", str(lab), "--results", str(results)]
        done = subprocess.run(args, cwd=ROOT, stderr=subprocess.PIPE, text=True, check=False)
    sys.stderr.write(done.stderr)
    runs = sorted(p for p in results.glob("*") if (p / "run.json").is_file())
    if not runs:
        raise SystemExit(f"no run in {results} (exit status {done.returncode})")
    return runs[-1].resolve()


def verdicts(run: Path) -> dict[str, Any]:
    out = subprocess.run(
        ["uv", "run", "dbregress", "report", str(run), "--format", "json"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    return dict(json.loads(out.stdout))


def show(run: Path) -> int:
    v = verdicts(run)
    lane = json.loads((run / "cost" / "lane.json").read_text())
    print(f"run {run.name}: cost lane {lane['took_s']:.0f} s on {lane['workers']} workers")
    print()
    print("| comparison | step | column | spread base | spread column | ratio [CI] | verdict |")
    print("|---|---|---|---|---|---|---|")
    tally: dict[str, int] = {}
    per_comp: dict[str, list[str]] = {}
    for comp in v["comparisons"]:
        for col in comp["columns"]:
            for s in col["steps"]:
                c = s.get("cost")
                if c is None:
                    continue
                spreads = _spreads(run, comp["base"], col["label"], s["step"])
                ci = f"[{c['ci'][0]:.4f}, {c['ci'][1]:.4f}]" if c["ci"] else ""
                print(
                    f"| {comp['name']} | {s['step']} | {col['label']} | {spreads[0]:.3%} | "
                    f"{spreads[1]:.3%} | {c['ratio']:.4f} {ci} | {c['verdict']} |"
                )
                tally[c["verdict"]] = tally.get(c["verdict"], 0) + 1
                per_comp.setdefault(comp["name"], []).append(c["verdict"])
    total = sum(tally.values()) or 1
    print()
    print(
        "cost verdicts: "
        + ", ".join(f"{n} {k}" for k, n in sorted(tally.items()))
        + f"; same {tally.get('same', 0) / total:.0%}"
    )
    for name, found in per_comp.items():
        print(
            f"  {name}: {found.count('same')}/{len(found)} same, "
            f"{sum(x in ('slower', 'faster') for x in found)} slower or faster"
        )
    times = [json.loads(p.read_text())["took_s"] for p in sorted((run / "cost").glob("*/r*.json"))]
    if times:
        print(
            f"replays: {len(times)}, each {min(times):.0f}-{max(times):.0f} s; "
            f"lane wall time {lane['took_s']:.0f} s"
        )
    return 0


def _spreads(run: Path, base: str, label: str, step: str) -> tuple[float, float]:
    out = []
    for who in (base, label):
        values = []
        for p in sorted((run / "cost" / who).glob("r*.json")):
            r = json.loads(p.read_text())
            if r["status"] == "ok" and step in r["steps"]:
                values.append(r["steps"][step]["per_op"]["estimated_cycles"])
        out.append(max(values) / min(values) - 1 if len(values) >= 2 else 0.0)
    return out[0], out[1]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="what", required=True)
    aa = sub.add_parser("aa")
    aa.add_argument("--engines", default="postgres,rocksdb,innodb,myrocks")
    aa.add_argument("--results", type=Path, default=ROOT / "results" / "bench-cost-aa")
    qs = sub.add_parser("quickstart")
    qs.add_argument("--results", type=Path, default=ROOT / "results" / "bench-cost-quickstart")
    sh = sub.add_parser("show")
    sh.add_argument("run", type=Path)
    args = ap.parse_args()
    if args.what == "show":
        return show(args.run)
    if args.what == "aa":
        head = 'name = "cost-aa"\nplacement = "separate"\nrepeats = 1\nwarmup_job = false\n'
        head += "count = true\n"
        body = "".join(AA[e.strip()] for e in args.engines.split(","))
        return show(run_lab(head + body, args.results))
    text = (ROOT / "labs" / "quickstart.toml").read_text()
    text = re.sub(r"(?m)^repeats = .*$", "repeats = 1\nwarmup_job = false\ncount = true", text)
    return show(run_lab(text, args.results))


if __name__ == "__main__":
    sys.exit(main())
