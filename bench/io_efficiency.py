"""IO efficiency of RocksDB readrandom against fio on this host's disk, measured.

    nice -n 10 uv run python bench/io_efficiency.py [--lab labs/rocksdb-io-bound.toml]
                                                    [--results /var/tmp/dbregress-io]
    uv run python bench/io_efficiency.py --run RUN_FOLDER   # the figures of a finished run

Runs the lab (by default labs/rocksdb-io-bound.toml: RocksDB releases with O_DIRECT reads
on a database ten times its block cache, one column with an injected CPU cost per call)
with `dbregress run`, then reads its verdicts.json and prints, per IO-bound comparison:
fio's command, version and figures before and after (reads/s, mean latency, fio's CPU per
read, the device's latency and the drift), then per column the device reads per
operation, read IOPS, IO efficiency, the model's efficiency, CPU per read and the
predicted time per operation beside the measured one. It checks what docs/metrics.md
claims of this host's figures:

- every column's IO efficiency lies between 0 and 1, with fio's JSON stored in the run;
- the model's prediction lies within 25% of the measured time per operation, for the
  columns with no injected slowdown (one that spins on a busy 2-vCPU host also waits for
  a CPU, which the model leaves out: its difference is printed, not checked);
- a column with inject_slowdown has a lower IO efficiency than the same build without,
  as the model predicts (its efficiency falls too).

Exit status 1 when a check fails.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
WITHIN = 0.25  # the model's prediction against the measured time per operation


def run_lab(lab: Path, results: Path) -> Path:
    results.mkdir(parents=True, exist_ok=True)
    before = set(results.glob("*/run.json"))
    subprocess.run(
        ["uv", "run", "dbregress", "run", str(lab), "--results", str(results)],
        cwd=ROOT,
        check=False,
    )
    new = sorted(set(results.glob("*/run.json")) - before)
    if not new:
        sys.exit(f"dbregress run made no run folder under {results}")
    return new[-1].parent


def verdicts(run: Path) -> dict[str, Any]:
    subprocess.run(
        ["uv", "run", "dbregress", "report", str(run), "--results", str(run.parent)],
        cwd=ROOT,
        check=True,
        stdout=subprocess.DEVNULL,
    )
    found: dict[str, Any] = json.loads((run / "verdicts.json").read_text())
    return found


def _fio(name: str, f: dict[str, float] | None) -> str:
    if f is None:
        return f"  fio {name}: none"
    return (
        f"  fio {name}: {f['iops']:.0f} reads/s, mean latency {f['latency_us']:.1f} us, "
        f"fio's CPU {f['user_us_per_read']:.1f} user + {f['system_us_per_read']:.1f} system "
        f"us/read, device {f['device_us']:.1f} us"
    )


def _num(value: float | None, width: int, spec: str = ".1f") -> str:
    return f"{'-':>{width}}" if value is None else f"{value:{width}{spec}}"


def report(run: Path, found: dict[str, Any]) -> list[str]:
    """Prints the figures; returns the checks that failed."""
    failed = []
    for section in found.get("io_efficiency", []):
        print(f"\n{section['comparison']} ({run.name})")
        b = section["baseline"] or {}
        if section["why_not"]:
            print(f"  absent: {section['why_not']}")
            failed.append(f"{section['comparison']}: no IO-efficiency table")
            continue
        print(f"  {b['fio_version']} on {b['device']}: {' '.join(b['command'])}")
        print(_fio("before", b["before"]))
        print(_fio("after", b["after"]))
        if b["drift"] is not None:
            print(f"  drift of fio's reads/s: {100 * b['drift']:+.1f}%")
        for f in b["files"]:
            if not (run / f).is_file():
                failed.append(f"fio's JSON {f} is not in the run folder")
        print(
            "  column         step        reads/op  read IOPS  fio IOPS  eff    model  "
            "user/rd  sys/rd  predicted  measured  diff"
        )
        by_label = {}
        for r in section["rows"]:
            if r["io_efficiency"] is None:  # not device work alike: said, never a figure
                print(f"  {r['column']:<14} {r['step']:<11} no efficiency: {r['no_efficiency']}")
                failed.append(f"{r['column']}: no IO efficiency ({r['no_efficiency']})")
                continue
            by_label[r["column"]] = r
            print(
                f"  {r['column']:<14} {r['step']:<11} {r['reads_per_op']:8.3f}  "
                f"{r['read_iops']:9.0f}  {r['fio_iops']:8.0f}  {r['io_efficiency']:.3f}  "
                f"{_num(r['predicted_io_efficiency'], 5, '.3f')}  {r['user_us_per_read']:7.1f}  "
                f"{r['system_us_per_read']:6.1f}  {_num(r['predicted_us_per_op'], 9)}  "
                f"{r['measured_us_per_op']:8.1f}  {_num(r['difference_pct'], 5, '+.1f')}%"
            )
            if not 0 < r["io_efficiency"] < 1:
                failed.append(f"{r['column']}: IO efficiency {r['io_efficiency']:.3f}")
            injected = r["column"].endswith("-cpu")
            if r["difference_pct"] is None:  # a flagged device time: no prediction
                failed.append(f"{r['column']}: the model gave no prediction")
            elif not injected and abs(r["difference_pct"]) > 100 * WITHIN:
                failed.append(f"{r['column']}: model off by {r['difference_pct']:+.1f}%")
        for a in section["absent"]:
            print(f"  absent: {a['step']} ({a['column'] or 'every column'}): {a['why']}")
        for label, r in by_label.items():
            plain = by_label.get(label.removesuffix("-cpu"))
            if label.endswith("-cpu") and plain is not None and r["predicted_io_efficiency"]:
                moved = r["io_efficiency"] / plain["io_efficiency"] - 1
                model = r["predicted_io_efficiency"] / plain["predicted_io_efficiency"] - 1
                print(
                    f"  {label} vs {plain['column']}: IO efficiency {100 * moved:+.1f}%, "
                    f"the model's {100 * model:+.1f}%"
                )
                if not (moved < 0 and model < 0):
                    failed.append(f"{label}: the injected CPU did not lower IO efficiency")
    return failed


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--lab", type=Path, default=ROOT / "labs" / "rocksdb-io-bound.toml")
    default = Path(os.environ.get("DBREGRESS_WORKDIR", "/var/tmp")) / "dbregress-io"
    p.add_argument("--results", type=Path, default=default)
    p.add_argument("--run", type=Path, help="a finished run's folder: print its figures only")
    args = p.parse_args()
    run = args.run or run_lab(args.lab, args.results)
    failed = report(run, verdicts(run))
    for f in failed:
        print(f"FAILED: {f}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
