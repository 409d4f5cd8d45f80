"""How long `dbregress report --format html` takes on a large run, and how the page reads.

Builds a synthetic run of 40 columns x 40 steps (the sysbench-style microbenchmarks'
names, three repeats per column) with the store's own writer: run.json and lab.toml by
RunWriter, each step's JSON, per-second CSV and HdrHistogram log by RunWriter.write_step.
The values are made up (seeded): this measures the renderer, not an engine. Then times
the command as a user runs it (a fresh process, imports included), prints the seconds
(target: under 5) and the page's size, and saves a Chromium screenshot of the top of the
page beside it, to check that 40 columns stay readable.

    uv run python bench/report_speed.py [--out DIR] [--columns 40] [--steps 40]
"""

from __future__ import annotations

import argparse
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests import browser

from dbregress.lab.file import load_lab
from dbregress.lab.micro_names import PRE, READS, WRITES
from dbregress.store.run import RunWriter
from dbregress.store.series import encode_histogram

TARGET_S = 5.0
SECONDS = 20  # intervals per step
WARMUP_S = 3


def step_names(n: int) -> list[str]:
    names = [*(r + PRE for r in READS), *READS, *WRITES]
    return names[:n]


def lab_text(columns: int) -> str:
    text = 'name = "report-speed"\nbenchmark = "micro"\nplacement = "same"\nrepeats = 3\n'
    for i in range(columns):
        text += f'[[column]]\nlabel = "c{i:02d}"\nbuild = "mysql@8.0.{i + 11}"\n'
    return text + "[micro]\nrows = 1000\nseconds = 17\n"


def step_result(label: str, repeat: int, name: str, q: float, rng: random.Random) -> dict[str, Any]:
    """A StepResult shaped as the loadgen's (the parts the report reads)."""
    cpu = 1e6 / q * rng.uniform(0.9, 1.1)
    return {
        "kind": "step",
        "step": name,
        "status": "ok",
        "reported": True,
        "elapsed_s": float(SECONDS - WARMUP_S),
        "q": {"op": "query", "unit": "ops", "count": int(q * 17), "value": q},
        "ops": {
            "query": {
                "ops": int(q * 17),
                "rows": int(q * 17),
                "errors": 0,
                "target_rows_per_s": None,
                "latency_us": {
                    "p50": 1e6 / q,
                    "p99": 3e6 / q,
                    "p999": 8e6 / q,
                    "p9999": 2e7 / q,
                    "max": 5e7 / q,
                    "mean": 1.2e6 / q,
                },
                "rows_per_s": q,
                "ops_per_s": q,
            }
        },
        "per_op": {
            "server_cpu_us": cpu,
            "server_user_us": cpu * 0.8,
            "server_system_us": cpu * 0.2,
            "client_cpu_us": cpu * 0.3,
            "cs": rng.uniform(0.9, 1.2),
            "rkb": 0.0,
            "wkb": rng.uniform(0, 0.5),
            "ops_per_s": q,
        },
        "sla": None,
        "checks": {},
        "window": {"warmup_s": float(WARMUP_S), "measured_s": float(SECONDS - WARMUP_S)},
        "host": {"steal_frac": 0.0, "other_cpu_frac": 0.01},
        "column": label,
        "repeat": repeat,
    }


def build_run(root: Path, columns: int, steps: int) -> Path:
    lab_path = root / "lab.toml"
    lab_path.write_text(lab_text(columns))
    lab = load_lab(lab_path)
    host = {"hostname": "synthetic", "cpu_model": "synthetic", "cpu_count": 2, "kernel": "-"}
    writer = RunWriter(root / "results", lab, host)
    rng = random.Random(1)
    names = step_names(steps)
    base_q = {s: 10 ** rng.uniform(3, 5) for s in names}
    factor = {
        (c.label, s): 1.0 if i == 0 else rng.choice((1.0, 1.0, 0.97, 0.9, 1.08, 0.7))
        for i, c in enumerate(lab.columns)
        for s in names
    }
    hlogs: dict[tuple[str, str], str] = {}
    for job in lab.jobs():
        label = job.column.label
        writer.set_job(job, {"settings": {"innodb_buffer_pool_size": "1G"}, "sizes": {}})
        writer.set_build(label, {"version_string": f"mysqld {label}", "source": "synthetic"})
        for index, s in enumerate(names, 1):
            q = base_q[s] * factor[(label, s)] * rng.gauss(1, 0.01)
            series = [
                {
                    "t_s": float(t),
                    "op": "query",
                    "ops": int(q * rng.gauss(1, 0.03) * (0.6 if t <= WARMUP_S else 1)),
                    "rows": 0,
                    "max_us": 0,
                    "errors": 0,
                }
                for t in range(1, SECONDS + 1)
            ]
            if (label, s) not in hlogs:
                mean = 1e6 / q
                values = [int(rng.lognormvariate(0, 0.4) * mean) for _ in range(400)]
                hlogs[(label, s)] = f"#op,histogram\nquery,{encode_histogram(values)}\n"
            result = step_result(label, job.repeat, s, q, rng)
            writer.write_step(job, index, result, series, hlogs[(label, s)])
        writer.end_job(job, "ok")
    writer.finish("ok")
    return writer.path


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--out", type=Path, help="folder for the run and the screenshot (default: temp)")
    p.add_argument("--columns", type=int, default=40)
    p.add_argument("--steps", type=int, default=40)
    args = p.parse_args()
    out = args.out or Path(tempfile.mkdtemp(prefix="dbregress-report-speed-"))
    out.mkdir(parents=True, exist_ok=True)
    run = build_run(out, args.columns, args.steps)
    print(f"synthetic run: {run} ({args.columns} columns x {args.steps} steps x 3 repeats)")
    cmd = [sys.executable, "-m", "dbregress.cli.main", "report", str(run), "--format", "html"]
    start = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        print(done.stderr, file=sys.stderr)
        return 1
    page = run / "report.html"
    verdict = "within" if seconds < TARGET_S else "OVER"
    print(f"dbregress report --format html: {seconds:.2f} s ({verdict} the {TARGET_S:g} s target)")
    print(f"report.html: {page.stat().st_size / 1e6:.2f} MB")
    problems = browser.offline_problems(page.read_text())
    loaded = browser.load(page)
    charts = browser.charts(loaded.dom)
    print(f"in Chromium: {len(charts)} charts, {len(loaded.console)} console messages")
    shot = browser.screenshot(page, out / "report-40x40.png", 1400, 4000)
    print(f"screenshot: {shot}")
    return 1 if problems or loaded.console else 0


if __name__ == "__main__":
    raise SystemExit(main())
