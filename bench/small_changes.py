"""A series of small changes on a real engine, sized and named by the ledger.

    uv run python bench/small_changes.py [--work DIR] [--target 0.004] [--replays 3]

PostgreSQL 17.2 and two "user builds" of it whose server runs with an LD_PRELOAD'ed
library that adds a fixed loop to every send() (tests/fixtures/sendcost.c): one sized
to about +0.4% estimated cycles per qp100 query, the other to twice that, so the two
increments (base to +0.4%, +0.4% to +0.8%) are the same added work each. First a probe
run (the base against a 2,000-iteration library, qp100 only) measures what one
iteration adds to a query; then one Insert Benchmark lab of three columns runs in both
lanes, and the bench prints:

- `dbregress ledger RUN --step qp100` (and l.i1): both increments must be `small` and
  equal within ±0.1 points;
- `dbregress report RUN --fail-on slower:cost`: must pass (exit 0: small is `same`);
- `dbregress report RUN --fail-on drift:0.5%` and `dbregress ledger RUN --fail-on
  drift:0.5%`: must fail (exit 1) on the +0.8% column.

Exits 1 when a check fails. Wall time on a 2-vCPU VM is printed per stage.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]
PROBE_ITERS = 2000


def fixture() -> ModuleType:
    spec = importlib.util.spec_from_file_location("userbuild", ROOT / "tests/fixtures/userbuild.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def dbregress(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    cmd = [str(ROOT / ".venv/bin/dbregress"), *args]
    print("$ dbregress " + " ".join(args), flush=True)
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)


def lab(
    path: Path, name: str, columns: list[tuple[str, str]], steps: list[str], replays: int
) -> Path:
    body = [
        f'name = "{name}"',
        'placement = "same"',
        "repeats = 2",
        "warmup_job = false",
        'schedule = "interleaved"',
        'benchmark = "insert"',
        "count = true",
        f"count_replays = {replays}",
        f"count_replays_max = {replays + 2}",
        f"count_steps = {json.dumps(steps)}",
    ]
    for label, build in columns:
        body += ["[[column]]", f'label = "{label}"', f'build = "postgres@{build}"', 'config = "ci"']
    body += [
        "[insert]",
        "load_rows = 20000",
        "write_rows = 4000",
        "query_seconds = 1",
        "warmup_s = 0.5",
        "cleanup_wait_s = 0",
        'steps = ["l.i0", "l.x", "l.i1", "qp100"]',
    ]
    path.write_text("\n".join(body) + "\n")
    return path


def newest_run(results: Path) -> Path:
    runs = [p.parent for p in results.glob("*/run.json")]
    return max(runs, key=lambda p: p.stat().st_mtime)


def qp100_cost(run: Path, column: str) -> dict[str, object]:
    verdicts = json.loads((run / "verdicts.json").read_text())
    for col in verdicts["comparisons"][0]["columns"]:
        if col["label"] == column:
            for s in col["steps"]:
                if s["step"] == "qp100":
                    return dict(s["cost"])
    raise SystemExit(f"no qp100 cost verdict for {column} in {run}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--work", type=Path, default=Path("/tmp/dbregress-small-changes"))
    ap.add_argument("--target", type=float, default=0.004, help="each increment (0.004: +0.4%%)")
    ap.add_argument("--replays", type=int, default=3)
    ap.add_argument(
        "--iters", type=int, default=0, help="skip the probe: iterations for one increment"
    )
    ap.add_argument("--run", type=Path, help="check this series run again instead of running")
    args = ap.parse_args()
    ub = fixture()
    work = args.work.absolute()
    work.mkdir(parents=True, exist_ok=True)
    work.chmod(0o755)
    results = work / "results"
    base = ub.postgres_basedir("17.2.0")
    t0 = time.monotonic()
    iters = args.iters
    if args.run is not None:
        return check(args.run.absolute(), work, t0)
    if not iters:
        probe_lib = ub.build_library(work / "lib", PROBE_ITERS)
        probe = ub.wrap_postgres(base, work / "pg-probe", probe_lib)
        path = lab(
            work / "probe.toml",
            "small-probe",
            [("pg17", "17.2.0"), ("probe", str(probe))],
            ["qp100"],
            2,
        )
        done = dbregress("run", str(path), "--results", str(results), cwd=work)
        if done.returncode not in (0, 1):
            print(done.stderr[-3000:])
            return 1
        c = qp100_cost(newest_run(results), "probe")
        per_iter = (float(c["ratio"]) - 1) / PROBE_ITERS
        iters = round(args.target / per_iter)
        added = float(c["ratio"]) - 1
        took = time.monotonic() - t0
        print(f"probe: {PROBE_ITERS} iterations add {added:.4%} to qp100; {iters} iterations")
        print(f"  for {args.target:.2%} ({took:.0f} s)")
    one = ub.wrap_postgres(base, work / "pg-plus1", ub.build_library(work / "lib", iters))
    two = ub.wrap_postgres(base, work / "pg-plus2", ub.build_library(work / "lib", 2 * iters))
    cols = [("pg17", "17.2.0"), ("plus1", str(one)), ("plus2", str(two))]
    path = lab(work / "series.toml", "small-series", cols, ["l.i1", "qp100"], args.replays)
    t1 = time.monotonic()
    done = dbregress("run", str(path), "--results", str(results), cwd=work)
    run = newest_run(results)
    print(f"series run {run.name}: exit {done.returncode}, {time.monotonic() - t1:.0f} s")
    return check(run, work, t0)


def check(run: Path, work: Path, t0: float) -> int:
    failed = []
    for step in ("qp100", "l.i1"):
        out = dbregress("ledger", str(run), "--step", step, "--lane", "cost", cwd=work)
        print(out.stdout)
        js = dbregress(
            "ledger", str(run), "--step", step, "--lane", "cost", "--format", "json", cwd=work
        )
        row = json.loads(js.stdout)["steps"][0]
        incs = [p["increment"] for p in row["points"][1:]]
        words = [i["class"] for i in incs]
        sizes = [100 * (i["ratio"] - 1) for i in incs]
        print(f"{step}: increments {', '.join(f'{s:+.3f}%' for s in sizes)} ({', '.join(words)}); "
              f"difference {abs(sizes[0] - sizes[1]):.3f} points")  # fmt: skip
        if step == "qp100":
            if words != ["small", "small"]:
                failed.append(f"qp100 increments are {words}, not small, small")
            if abs(sizes[0] - sizes[1]) > 0.1:
                failed.append(f"qp100 increments differ by {abs(sizes[0] - sizes[1]):.3f} points")
    gate = dbregress("report", str(run), "--fail-on", "slower:cost", cwd=work)
    print(f"report --fail-on slower:cost: exit {gate.returncode}")
    if gate.returncode != 0:
        failed.append(f"--fail-on slower:cost exited {gate.returncode}: {gate.stderr[-500:]}")
    for verb in ("report", "ledger"):
        drift = dbregress(verb, str(run), "--fail-on", "drift:0.5%", cwd=work)
        named = [ln for ln in drift.stderr.splitlines() if "drift" in ln]
        print(f"{verb} --fail-on drift:0.5%: exit {drift.returncode}; " + " | ".join(named))
        if drift.returncode != 1 or "plus2" not in drift.stderr + drift.stdout:
            failed.append(f"{verb} --fail-on drift:0.5% exited {drift.returncode}")
    print(f"total {time.monotonic() - t0:.0f} s")
    for f in failed:
        print(f"FAILED: {f}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
