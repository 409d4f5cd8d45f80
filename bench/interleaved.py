"""The interleaved schedule against the jobs schedule, side by side on this host.

    uv run python bench/interleaved.py [--repeats 8] [--only rocksdb,postgres]
    uv run python bench/interleaved.py show JOBS_RUN INTERLEAVED_RUN

Runs one lab under both schedules, in an order drawn from --seed: the quickstart's two
comparisons, each as one build three times (the base, an A/A copy, and a copy with
`inject_slowdown` making it 10% slower), time lane only. Then prints per step:

- the between-repeat spread of the A/A column's QPS ratio (the standard deviation of the
  repeats' log ratios; jobs: the base's and the copy's jobs of the same round;
  interleaved: the paired ratio of each repeat) under each schedule, and their quotient;
- the A/A verdicts (any `slower`/`faster` is a false alarm);
- whether the 10% slowdown is `slower` using the first 3, 5 and 8 repeats, under each.
"""

from __future__ import annotations

import argparse
import math
import random
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from dbregress.analysis.compare import compare_run, usable  # noqa: E402
from dbregress.analysis.paired import paired_all  # noqa: E402
from dbregress.analysis.verdict import Policy, compare_all  # noqa: E402
from dbregress.store.run import read_run  # noqa: E402

SLOW = 1 / 9  # busy-wait 1/9 of each call: QPS x 0.9

COMPARISONS = {
    "rocksdb": """
[[comparison]]
name = "rocksdb"
benchmark = "kv"
{columns}
[comparison.kv]
keys = 200000
seconds = 1
short_seconds = 1
warmup_s = 0.5
""",
    "postgres": """
[[comparison]]
name = "postgres"
benchmark = "insert"
{columns}
[comparison.insert]
clients = 1
load_rows = 100000
write_rows = 20000
query_seconds = 1
warmup_s = 0.5
cleanup_wait_s = 1
""",
}
BUILDS = {
    "rocksdb": ("rocksdb@10.2.1", "byrx"),
    "postgres": ("postgres@17.2.0", "default"),
}


def lab_text(schedule: str, repeats: int, only: list[str]) -> str:
    head = (
        f'name = "interleave-{schedule}"\nplacement = "separate"\nrepeats = {repeats}\n'
        f'schedule = "{schedule}"\ncount = false\n'
    )
    body = ""
    for name in only:
        build, config = BUILDS[name]
        cols = ""
        for label, slow in (("base", 0.0), ("aa", 0.0), ("slow", SLOW)):
            cols += (
                f'[[comparison.column]]\nlabel = "{name}-{label}"\nbuild = "{build}"\n'
                f'config = "{config}"\n'
            )
            if slow:
                cols += f"inject_slowdown = {slow:.6f}\n"
        body += COMPARISONS[name].format(columns=cols)
    return head + body


def run_lab(text: str, results: Path) -> Path:
    with tempfile.TemporaryDirectory() as tmp:
        lab = Path(tmp) / "lab.toml"
        lab.write_text(text)
        before = set(results.glob("*")) if results.exists() else set()
        args = ["uv", "run", "dbregress", "run", str(lab), "--results", str(results)]
        subprocess.run(args, cwd=ROOT, check=False)
    new = sorted(p for p in set(results.glob("*")) - before if (p / "run.json").is_file())
    if not new:
        raise SystemExit(f"no run in {results}")
    return new[-1]


def _by(results: list[dict[str, Any]]) -> dict[tuple[str, int, str], dict[str, Any]]:
    return {(r["column"], r["repeat"], r["step"]): r for r in results}


def ratios(run: Path, comp: str, label: str) -> dict[str, list[float]]:
    """Per step, each repeat's QPS ratio label / base (in repeat order)."""
    data = read_run(run)
    results = usable([r for rs in data.steps.values() for r in rs])
    got = _by(results)
    interleaved = data.record.get("schedule") == "interleaved"
    base = f"{comp}-base"
    out: dict[str, list[float]] = {}
    repeats = sorted({k[1] for k in got})
    steps = list(dict.fromkeys(k[2] for k in got if k[0] == base))
    for step in steps:
        for rep in repeats:
            b, c = got.get((base, rep, step)), got.get((label, rep, step))
            if b is None or c is None:
                continue
            if interleaved:
                value = (c.get("paired") or {}).get("ratio")
            else:
                value = c["q"]["value"] / b["q"]["value"] if b["q"]["value"] else None
            if value:
                out.setdefault(step, []).append(value)
    return out


def spread(values: list[float]) -> float | None:
    if len(values) < 2:
        return None
    return statistics.stdev(math.log(v) for v in values)


def detect(run: Path, comp: str, n: int) -> dict[str, str]:
    """Verdicts of the slowed column from the first n repeats of the run."""
    data = read_run(run)
    policy = Policy(alpha=0.05, band=0.05)
    results = [r for r in usable([r for rs in data.steps.values() for r in rs]) if r["repeat"] <= n]
    base, slow = f"{comp}-base", f"{comp}-slow"
    if data.record.get("schedule") == "interleaved":
        paired = {s: v[:n] for s, v in ratios(run, comp, slow).items()}
        return {s: c.verdict for s, c in paired_all(paired, policy).items()}
    got: dict[str, tuple[list[float], list[float]]] = {}
    for r in results:
        if r["column"] in (base, slow):
            pair = got.setdefault(r["step"], ([], []))
            pair[r["column"] == slow].append(r["q"]["value"])
    return {s: c.verdict for s, c in compare_all(got, policy, "higher").items()}


def show(jobs: Path, inter: Path) -> int:
    runs = {"jobs": jobs, "interleaved": inter}
    comps = [c["name"] for c in read_run(jobs).record["comparisons"]]
    print(f"jobs run {jobs.name}, interleaved run {inter.name}")
    print()
    print("| comparison | step | A/A spread jobs | A/A spread interleaved | jobs / interleaved |")
    print("|---|---|---|---|---|")
    factors = []
    for comp in comps:
        sj = ratios(jobs, comp, f"{comp}-aa")
        si = ratios(inter, comp, f"{comp}-aa")
        for step in sj:
            a, b = spread(sj[step]), spread(si.get(step, []))
            f = a / b if a and b else None
            if f:
                factors.append(f)
            cells = [f"{x:.2%}" if x is not None else "-" for x in (a, b)]
            print(
                f"| {comp} | {step} | {cells[0]} | {cells[1]} | {f:.1f}x |"
                if f
                else f"| {comp} | {step} | {cells[0]} | {cells[1]} | - |"
            )
    if factors:
        wins = sum(f >= 3 for f in factors)
        print(
            f"\nspread at least 3x smaller interleaved: {wins} of {len(factors)} steps; "
            f"median quotient {statistics.median(factors):.1f}x"
        )
    print()
    for schedule, run in runs.items():
        data = read_run(run)
        found = compare_run(data.record, data.steps)
        aa = [c.verdict for (comp, col, _s), c in found.qps.items() if col.endswith("-aa")]
        tally = {v: aa.count(v) for v in sorted(set(aa))}
        print(f"A/A verdicts, {schedule}: {tally}")
    print()
    print("| schedule | comparison | slower at 3 | at 5 | at 8 |")
    print("|---|---|---|---|---|")
    for schedule, run in runs.items():
        most = max(r["round"] for r in read_run(run).record["rounds"])
        for comp in comps:
            cells = []
            for n in (3, 5, 8):
                if n > most:
                    cells.append("-")
                    continue
                v = detect(run, comp, n)
                cells.append(f"{sum(x == 'slower' for x in v.values())}/{len(v)}")
            print(f"| {schedule} | {comp} | " + " | ".join(cells) + " |")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("what", nargs="*", help="show JOBS_RUN INTERLEAVED_RUN")
    ap.add_argument("--repeats", type=int, default=8)
    ap.add_argument("--only", default="rocksdb,postgres")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--results", type=Path, default=ROOT / "results" / "bench-interleaved")
    args = ap.parse_args()
    if args.what:
        if args.what[0] != "show" or len(args.what) != 3:
            ap.error("usage: show JOBS_RUN INTERLEAVED_RUN")
        return show(Path(args.what[1]), Path(args.what[2]))
    only = [x.strip() for x in args.only.split(",") if x.strip()]
    order = ["jobs", "interleaved"]
    random.Random(args.seed).shuffle(order)
    runs = {}
    for schedule in order:
        print(f"running the {schedule} schedule", file=sys.stderr)
        runs[schedule] = run_lab(lab_text(schedule, args.repeats, only), args.results)
    return show(runs["jobs"], runs["interleaved"])


if __name__ == "__main__":
    sys.exit(main())
