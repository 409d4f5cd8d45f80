"""The count store, measured: what a run, a new column and a bisection count with it
and without it.

    uv run python bench/count_store.py demo   [--lab labs/quickstart.toml] [--work DIR]
    uv run python bench/count_store.py aa     [--lab labs/quickstart.toml] [--work DIR]
    uv run python bench/count_store.py column [--work DIR]
    uv run python bench/count_store.py bisect [--commits 16] [--bad-at 11] [--work DIR]

- demo: runs the lab twice into one results folder (the second as a second `make demo`
  would) and prints, per run, the cost lane's time (cost/lane.json took_s), the replays
  it counted and took from the store, and whether every cost verdict and ratio of the
  second run's Markdown report equals the first's to the last digit printed.
- aa: after demo, into its results folder: the lab with each comparison's base against
  a copy of itself; the bases take their replays from the store, the copies are counted
  anew, and no cost verdict may be slower or faster.
- column: a RocksDB lab of two columns, then the same lab with a third column: the
  replays counted and the lane's time of each.
- bisect: a PostgreSQL git history (bench/bisect_src.py's, Debian's source with
  `--commits` commits, the one at `--bad-at` adding work to every query), bisected in the
  cost lane three times: with --recount (its builds made, the store not used), with
  --recount again (builds cached: the bisection without the store), with the store
  (fresh), and that last one once more (a repeated bisection). Prints each one's wall
  time, replays counted and taken, the answer, and the most replays any build was
  counted in one bisection against its replays plus extensions.

Exits 1 when a check fails.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import re
import shutil
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def dbregress(*args: str, results: Path) -> tuple[int, str, str, float]:
    cmd = ["uv", "run", "dbregress", *args]
    print("$ " + " ".join(cmd), flush=True)
    t0 = time.monotonic()
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    return done.returncode, done.stdout, done.stderr, time.monotonic() - t0


def runs_of(results: Path) -> list[Path]:
    found = results.glob("**/run.json")
    return sorted(p.parent for p in found if "count-store" not in p.relative_to(results).parts)


def lane_facts(run: Path) -> dict[str, object]:
    """A run's cost lane: its time, the replays counted and taken."""
    lane = json.loads((run / "cost" / "lane.json").read_text())
    replays = [json.loads(p.read_text()) for p in sorted((run / "cost").glob("*/r*.json"))]
    taken = sum(1 for r in replays if "reused" in r)
    return {"took_s": lane["took_s"], "counted": len(replays) - taken, "taken": taken}


def cost_cells(report: str) -> list[str]:
    """The cost columns of the Markdown report's both-lanes tables: step, column, cost
    ratio and interval, instructions ratio and interval, replays."""
    cells = []
    for line in report.splitlines():
        parts = [p.strip() for p in line.split("|")]
        if len(parts) > 7 and re.fullmatch(r"\d+/\d+", parts[6]):
            cells.append(" | ".join([parts[1], parts[2], parts[4], parts[5], parts[6]]))
    return cells


def verdict_cells(report: str) -> list[str]:
    """The cost verdicts and ratios alone (the interval may take the history's floor)."""
    out = []
    for cell in cost_cells(report):
        step, column, cost, instr, _replays = cell.split(" | ")
        out.append(f"{step} {column} {cost.split('[')[0].strip()} {instr.split('[')[0].strip()}")
    return out


def demo(args: argparse.Namespace) -> bool:
    results = args.work / "demo-results"
    shutil.rmtree(results, ignore_errors=True)
    facts, reports = [], []
    for n in (1, 2):
        code, _out, err, wall = dbregress(
            "run", str(args.lab), "--results", str(results), results=results
        )
        run = runs_of(results)[-1]
        f = lane_facts(run)
        facts.append(f)
        reports.append((run / "report.md").read_text())
        print(
            f"run {n}: exit {code}, wall {wall:.0f} s, cost lane {f['took_s']} s, "
            f"{f['counted']} replays counted, {f['taken']} taken from the store"
        )
        for line in err.splitlines():
            if "count store" in line or "taken from" in line:
                print("  " + line)
    same = verdict_cells(reports[0]) == verdict_cells(reports[1])
    print(f"cost verdicts and ratios of run 2 equal run 1's: {same}")
    for a, b in zip(cost_cells(reports[0]), cost_cells(reports[1]), strict=False):
        print(f"  run 1: {a}\n  run 2: {b}")
    ok = same and facts[1]["counted"] == 0 and float(str(facts[1]["took_s"])) <= 30
    print(f"checks: second run counted nothing, lane <= 30 s, same verdicts: {ok}")
    return ok


COLUMNS = """\
name = "store-column"
placement = "same"
benchmark = "kv"
repeats = 2
count = true
[[column]]
label = "old"
build = "rocksdb@7.10.2"
config = "byrx"
[[column]]
label = "new"
build = "rocksdb@10.2.1"
config = "byrx"
{extra}[kv]
keys = 200000
seconds = 1
short_seconds = 1
warmup_s = 0.5
"""
THIRD = '[[column]]\nlabel = "mid"\nbuild = "rocksdb@8.11.4"\nconfig = "byrx"\n'


def column(args: argparse.Namespace) -> bool:
    results = args.work / "column-results"
    shutil.rmtree(results, ignore_errors=True)
    ok = True
    for n, extra in ((1, ""), (2, THIRD)):
        lab = args.work / f"column-{n}.toml"
        lab.write_text(COLUMNS.format(extra=extra))
        code, _, _err, wall = dbregress("run", str(lab), "--results", str(results), results=results)
        run = runs_of(results)[-1]
        f = lane_facts(run)
        per = Counter(
            json.loads(p.read_text())["column"]
            for p in (run / "cost").glob("*/r*.json")
            if "reused" not in json.loads(p.read_text())
        )
        print(
            f"lab {n}: exit {code}, wall {wall:.0f} s, cost lane {f['took_s']} s, counted "
            f"{dict(per)}, taken {f['taken']}"
        )
        if n == 2:
            ok = set(per) == {"mid"} and code == 0
    print(f"checks: the second lab counted only its new column: {ok}")
    return ok


def aa(args: argparse.Namespace) -> bool:
    """The lab with each comparison's base against a copy of itself, run into the demo's
    results folder after `demo`: the bases take their replays from the store, the
    copies are counted anew; no cost verdict may be slower or faster."""
    results = args.work / "demo-results"
    text = args.lab.read_text()
    lab = args.work / "aa.toml"
    out, seen = [], 0
    lines = text.splitlines()
    for i, line in enumerate(lines):
        out.append(line)
        if line.strip() == "[[comparison.column]]":
            seen += 1
        # the second column of each comparison becomes a copy of the first
        for field in ("label = ", "build = "):
            if seen and seen % 2 == 0 and line.startswith(field):
                first = [ln for ln in lines[:i] if ln.startswith(field)][-1]
                out[-1] = first[:-1] + '-aa"' if field == "label = " else first
    lab.write_text("\n".join(out).replace('name = "quickstart"', 'name = "quickstart-aa"') + "\n")
    code, _, err, wall = dbregress(
        "run",
        str(lab),
        "--results",
        str(results),
        "--fail-on",
        "slower:cost",
        "--allow-undecided",
        results=results,
    )
    run = runs_of(results)[-1]
    f = lane_facts(run)
    report = (run / "report.md").read_text()
    words = [c.split(" | ")[2] for c in cost_cells(report)]
    moved = [w for w in words if "(-)" in w or "(+)" in w]
    print(
        f"A/A: exit {code}, wall {wall:.0f} s, cost lane {f['took_s']} s, {f['counted']} "
        f"counted, {f['taken']} taken; cost verdicts: {len(words)}, slower/faster: {len(moved)}"
    )
    for line in err.splitlines():
        if "taken from" in line:
            print("  " + line)
    return code == 0 and not moved and int(str(f["taken"])) > 0


def _bisect_src() -> object:
    spec = importlib.util.spec_from_file_location("bisect_src", ROOT / "bench" / "bisect_src.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def bisect(args: argparse.Namespace) -> bool:
    src = _bisect_src()
    work = args.work / "bisect"
    work.mkdir(parents=True, exist_ok=True)
    repo, ids = src.make_history(work, args.commits, args.bad_at, range(0))  # type: ignore[attr-defined]
    ok = True
    cases = [
        ("recount, builds made", True, "r1"),
        ("recount", True, "r2"),
        ("store", False, "r3"),
        ("store, repeated", False, "r3"),
    ]
    for name, recount, folder in cases:
        results = work / folder
        if name != "store, repeated":
            shutil.rmtree(results, ignore_errors=True)
        cmd = src.bisect_cmd(repo, ids, results, ["--recount"] if recount else [])  # type: ignore[attr-defined]
        t0 = time.monotonic()
        done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
        wall = time.monotonic() - t0
        root = sorted(results.glob("bisect-*"))[-1]
        state = json.loads((root / "bisect.json").read_text())
        counted, taken, per_build = 0, 0, Counter()
        for run in sorted((root / "runs").iterdir()):
            if not (run / "run.json").is_file():
                continue
            record = json.loads((run / "run.json").read_text())
            builds = {c["label"]: c["build"] for c in record["columns"]}
            for p in (run / "cost").glob("*/r*.json"):
                r = json.loads(p.read_text())
                if "reused" in r:
                    taken += 1
                else:
                    counted += 1
                    per_build[builds[r["column"]]] += 1
        most = max(per_build.values(), default=0)
        answer = next((ln for ln in done.stdout.splitlines() if "first bad" in ln), "no answer")
        print(
            f"{name}: exit {done.returncode}, wall {wall:.0f} s, {len(state['points'])} "
            f"points, {counted} replays counted, {taken} taken; most counts of one build "
            f"{most}; {answer}"
        )
        if not recount:
            # a build's replays at a point's first attempt plus the lane's extensions
            ok = ok and most <= 5 and done.returncode == 0
        if name == "store, repeated":
            ok = ok and counted == 0
    print(
        f"checks: no build counted more than its replays plus extensions, the repeated "
        f"bisection counted nothing: {ok}"
    )
    return ok


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("what", choices=("demo", "aa", "column", "bisect"))
    ap.add_argument("--lab", type=Path, default=ROOT / "labs" / "quickstart.toml")
    ap.add_argument("--commits", type=int, default=16)
    ap.add_argument("--bad-at", type=int, default=11)
    ap.add_argument("--work", type=Path, default=Path("/var/tmp/dbregress-count-store"))
    args = ap.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    ok = {"demo": demo, "aa": aa, "column": column, "bisect": bisect}[args.what](args)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
