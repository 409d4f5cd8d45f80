"""The HTML report of a real run, looked at in headless Chromium: it opens offline with
no console message, every chart is there and drawn, and a screenshot is kept under the
test's tmp dir. Also the TSV and CSV exports of the same run.

One small RocksDB lab (three columns, three repeats, three steps) is run once for the
module; its second column is slowed on purpose so the verdict colours have something
to show."""

from __future__ import annotations

import csv
import io
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests import browser
from tests.e2e.conftest import assert_no_process_mentions, dbregress, run_record

# quiet: its charts and exports need every repeat measured, none left out as disturbed
pytestmark = [pytest.mark.engine, pytest.mark.quiet]

STEPS = ["fillseq", "readrandom", "fwdrange"]
COLUMNS = [
    ("r10", "rocksdb@10.2.1", ""),
    ("r10-slow", "rocksdb@10.2.1", "inject_slowdown = 1.0\n"),  # QPS about halves
    ("r7.10", "rocksdb@7.10.2", ""),
]
LAB = (
    'name = "html"\nplacement = "same"\nbenchmark = "kv"\nrepeats = 3\nwarmup_job = false\n'
    + "".join(f'[[column]]\nlabel = "{lb}"\nbuild = "{b}"\n{extra}' for lb, b, extra in COLUMNS)
    + "[kv]\nkeys = 20000\nseconds = 0.5\nshort_seconds = 0.5\nwarmup_s = 0.3\n"
    + "steps = ["
    + ", ".join(f'"{s}"' for s in STEPS)
    + "]\n"
)


@pytest.fixture(scope="module")
def kv_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path, Path]]:
    """(the test folder, the run folder, the engines' workdir) of one real run."""
    tmp = tmp_path_factory.mktemp("html-run")
    workdir = Path("/var/tmp") / f"dbregress-test-{os.getpid()}-{time.monotonic_ns()}"
    workdir.mkdir(mode=0o755)
    try:
        lab = tmp / "lab.toml"
        lab.write_text(LAB)
        out = dbregress("run", str(lab), cwd=tmp, workdir=workdir)
        assert out.returncode == 0, out.stderr
        run, record = run_record(tmp)
        assert record["status"] == "ok" and not record["failures"]
        yield tmp, run, workdir
    finally:
        assert_no_process_mentions(str(workdir))
        subprocess.run(["rm", "-rf", str(workdir)], check=False)


def test_the_run_writes_the_html_report(kv_run: tuple[Path, Path, Path]) -> None:
    _, run, _ = kv_run
    page = (run / "report.html").read_text()
    assert page.startswith("<!DOCTYPE html>") and "r10-slow vs r10" in page


def test_html_report_in_chromium(kv_run: tuple[Path, Path, Path]) -> None:
    tmp, run, workdir = kv_run
    out = dbregress("report", run.name, "--format", "html", cwd=tmp, workdir=workdir)
    assert out.returncode == 0, out.stderr
    path = tmp / out.stdout.strip()
    assert path == run / "report.html" and path.is_file()
    html = path.read_text()
    assert browser.offline_problems(html) == []

    page = browser.load(path)
    assert page.console == [], page.console
    every = browser.charts(page.dom)
    # three columns are a series: a chart per step with samples (docs/changepoints.md)
    series = [c for c in every if ": relative to col-1</text>" in c]
    assert 1 <= len(series) <= len(STEPS) and "Series and change points" in page.dom
    charts = [c for c in every if c not in series]
    # per comparison: a ratio chart per non-base column, then two charts per step
    assert len(charts) == 2 + 2 * len(STEPS), len(charts)
    ratio, per_step = charts[:2], charts[2:]
    for chart in ratio:
        # a dot (or an edge triangle) with its interval for every step
        assert chart.count("<g stroke=") == len(STEPS), chart[:500]
    for chart in per_step:
        # every column drew its line: throughput per interval, latency percentiles
        assert chart.count("<polyline") == len(COLUMNS), chart[:500]
        assert "no data" not in chart
    for label, _, _ in COLUMNS:
        assert f"{label} (r1)" in page.dom  # a line is named after its column and repeat
    assert "v-slower" in page.dom or "v-undecided" in page.dom  # a coloured ratio cell
    assert 'label = "r10-slow"' in page.dom  # the lab file, for reproducing the run
    for what in ("Relative QPS (vs r10)", "Per-operation metrics", "Builds", "Configs"):
        assert what in page.dom, what

    png = browser.screenshot(path, tmp / "report.png")
    assert png.stat().st_size > 20_000  # drawn, not a blank page


def test_console_errors_are_caught(tmp_path: Path) -> None:
    """The check above would see a console error (a page that logs one fails)."""
    bad = tmp_path / "bad.html"
    bad.write_text("<!DOCTYPE html><p>x</p><script>console.error('boom')</script>")
    page = browser.load(bad)
    assert any("boom" in line for line in page.console), page.console
    assert browser.offline_problems(bad.read_text())


def test_tsv_export(kv_run: tuple[Path, Path, Path]) -> None:
    tmp, run, workdir = kv_run
    out = dbregress("report", run.name, "--format", "tsv", cwd=tmp, workdir=workdir)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    _, record = run_record(tmp)
    named = {c["label"]: f"{c['label']} ({c['build']}, {c['config']})" for c in record["columns"]}
    legend = [f"col-{i} : {named[lb]}" for i, (lb, _, _) in enumerate(COLUMNS, 1)]
    assert lines[1:5] == [*legend, ""]
    relative = lines[lines.index(f"Relative to: {named['r10']}") :]
    assert relative[1:4] == [f"col-1 : {named['r10-slow']}", f"col-2 : {named['r7.10']}", ""]
    assert relative[4] == "col-1\tcol-2"
    rows = [r.split("\t") for r in relative[5 : 5 + len(STEPS)]]
    assert [r[-1] for r in rows] == STEPS
    for r in rows:
        assert len(r) == 3 and all(float(x) > 0 for x in r[:2]), r
    slow = {r[-1]: float(r[0]) for r in rows}
    assert slow["readrandom"] < 0.8  # QPS about halved on purpose


def test_csv_export(kv_run: tuple[Path, Path, Path]) -> None:
    tmp, run, workdir = kv_run
    out = dbregress("report", run.name, "--format", "csv", cwd=tmp, workdir=workdir)
    assert out.returncode == 0, out.stderr
    rows = list(csv.DictReader(io.StringIO(out.stdout)))
    assert len(rows) == len(COLUMNS) * len(STEPS)
    by_key = {(r["column"], r["step"]): r for r in rows}
    slow = by_key[("r10-slow", "readrandom")]
    assert float(slow["ci_low"]) <= float(slow["ratio"]) <= float(slow["ci_high"])
    assert slow["verdict"] in ("slower", "undecided") and slow["repeats"] == "3"
    assert float(slow["qps_median"]) > 0 and float(slow["server_cpu_us"]) > 0
    base = by_key[("r10", "readrandom")]
    assert base["ratio"] == "" and base["verdict"] == "" and float(base["qps_median"]) > 0
