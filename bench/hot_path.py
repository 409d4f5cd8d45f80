"""The loadgen's own cost per operation: its hot loop against the null driver.

The null driver at `latency_us = 0` sleeps nothing and keeps its tables as counters or
in-memory sets, so a step on it measures the loop itself: drawing the values, the call
through the driver traits, the timing, the counters and the histogram. Steps, each with
one client (one thread) unless --clients says otherwise:

- micro `point-query` (`SELECT c FROM sbtest1 WHERE id = ?`, 1 table of 100,000 rows);
- Insert Benchmark `qp` on an empty pi1, no background writes: the live-ids handshake
  and the point-query call, without the id drawing (the null driver of older loadgens
  cannot start a table with rows);
- `qp` on a pi1 of 1,000,000 rows (`insert.expected_rows`): 10 live ids drawn per query
  (loadgens whose null driver cannot do this show "-");
- kv `readrandom` (1,000,000 keys of 20 bytes).

ops/s per core = operations of the measured window / the loadgen's CPU seconds (user +
system, getrusage) over that window, both from its summary (`phases.measured`). Rounds
interleave the two binaries, the one going first alternating; medians are printed.

    cargo build --release --locked
    uv run python bench/hot_path.py --base HEAD [--seconds 5] [--rounds 3] [--cpu 1]
    uv run python bench/hot_path.py --base-binary /path/to/old/dbregress-loadgen

`--base REF` builds REF in a git worktree under the temporary directory (kept, and
reused while REF names the same commit) with its own target directory.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
NULL = {"driver": "null", "latency_us": 0}


@dataclass(frozen=True)
class Bench:
    name: str
    workload: str
    step: str
    section: dict[str, Any]


def benches(seconds: float, clients: int) -> list[Bench]:
    return [
        Bench(
            "micro point-query",
            "micro",
            "point-query",
            {"tables": 1, "rows": 100_000, "range_size": 100, "duration_s": seconds},
        ),
        Bench("insert qp, empty table", "insert", "qp", {"duration_s": seconds, "insert_rate": 0}),
        Bench(
            "insert qp, 1M live rows",
            "insert",
            "qp",
            {"duration_s": seconds, "insert_rate": 0, "expected_rows": [1_000_000] * clients},
        ),
        Bench(
            "kv readrandom",
            "kv",
            "readrandom",
            {"keys": 1_000_000, "key_size": 20, "value_size": 400, "duration_s": seconds},
        ),
    ]


def spec(b: Bench, clients: int) -> dict[str, Any]:
    return {
        "spec_version": 3,
        "engine": NULL,
        "workload": {"kind": b.workload, "step": b.step, **b.section},
        "clients": clients,
        "seed": 1,
        "report_interval_ms": 1000,
    }


@dataclass(frozen=True)
class Result:
    ops: int
    cpu_s: float
    wall_s: float

    @property
    def per_core(self) -> float:
        return self.ops / self.cpu_s

    @property
    def per_s(self) -> float:
        return self.ops / self.wall_s


def run(binary: Path, b: Bench, clients: int, cpu: int | None) -> Result | None:
    """One step; None when this loadgen cannot run it (a fatal event, no summary)."""
    cmd = [str(binary), "-"]
    if cpu is not None:
        cmd = ["taskset", "-c", str(cpu), *cmd]
    out = subprocess.run(
        cmd, input=json.dumps(spec(b, clients)), capture_output=True, text=True, timeout=600
    )
    events = [json.loads(line) for line in out.stdout.splitlines() if line.strip()]
    last = events[-1] if events else {}
    if last.get("type") != "summary":
        return None
    checks = last["checks"]
    if checks["point_rows_expected"] != checks["point_rows_found"]:
        raise SystemExit(f"{binary}: {b.name}: point-query check failed: {checks}")
    measured = last["phases"]["measured"]
    usage = measured["process"]
    return Result(
        ops=last["ops"][last["q_op"]]["ops"],
        cpu_s=usage["user_s"] + usage["system_s"],
        wall_s=measured["wall_s"],
    )


def build_base(ref: str) -> Path:
    """The loadgen binary of git ref `ref`, built in its own worktree and target dir."""
    sha = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--short=12", ref],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    tree = Path(tempfile.gettempdir()) / f"dbregress-hot-path-{sha}"
    target = tree.with_name(tree.name + "-target")
    binary = target / "release" / "dbregress-loadgen"
    if binary.exists():
        return binary
    if not tree.exists():
        subprocess.run(
            ["git", "-C", str(ROOT), "worktree", "add", "--detach", str(tree), sha], check=True
        )
    build = ["cargo", "build", "--release", "--locked", "--target-dir", str(target)]
    if shutil.which("nice"):
        build = ["nice", *build]
    subprocess.run(build, cwd=tree, check=True)
    return binary


def fmt(x: float | None) -> str:
    return "-" if x is None else f"{x:,.0f}"


def median(results: list[Result | None], key: str) -> float | None:
    values: list[float] = [getattr(r, key) for r in results if r is not None]
    if len(values) < len(results) or not values:
        return None
    return statistics.median(values)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base", default="HEAD", help="git ref to compare with (built here)")
    ap.add_argument("--base-binary", type=Path, help="an already built loadgen to compare with")
    ap.add_argument(
        "--binary",
        type=Path,
        default=ROOT / "target" / "release" / "dbregress-loadgen",
        help="the loadgen under test (default: this checkout's release build)",
    )
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--clients", type=int, default=1)
    ap.add_argument("--cpu", type=int, help="pin the loadgen to this CPU (taskset)")
    args = ap.parse_args()

    base = args.base_binary or build_base(args.base)
    sides = {"before": base, "after": args.binary}
    print(f"before: {base}\nafter:  {args.binary}")
    results: dict[tuple[str, str], list[Result | None]] = {}
    for rnd in range(args.rounds):
        order = ["before", "after"] if rnd % 2 == 0 else ["after", "before"]
        for b in benches(args.seconds, args.clients):
            for side in order:
                r = run(sides[side], b, args.clients, args.cpu)
                results.setdefault((b.name, side), []).append(r)
                shown = "cannot run it" if r is None else f"{r.per_core:,.0f} ops/s per core"
                print(f"round {rnd + 1} {b.name:26} {side:6} {shown}", flush=True)

    print()
    print(
        f"clients {args.clients}, {args.seconds:g} s per run, median of {args.rounds} rounds"
        + (f", pinned to CPU {args.cpu}" if args.cpu is not None else "")
    )
    print()
    print(
        "| step | before ops/s per core | after ops/s per core | after/before "
        "| before ns CPU/op | after ns CPU/op |"
    )
    print("|---|---|---|---|---|---|")
    for b in benches(args.seconds, args.clients):
        before = median(results[(b.name, "before")], "per_core")
        after = median(results[(b.name, "after")], "per_core")
        ratio = f"{after / before:.2f}" if before and after else "-"
        ns = " | ".join(fmt(None if x is None else 1e9 / x) for x in (before, after))
        print(f"| {b.name} | {fmt(before)} | {fmt(after)} | **{ratio}** | {ns} |")


if __name__ == "__main__":
    main()
