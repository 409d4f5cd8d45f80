"""The quickstart's own lab, shrunk, run for real: its HTML report opens offline in headless
Chromium with no console message and every chart drawn. Not `quiet`: nothing here judges a
verdict, so it runs beside other tests (which may leave its repeats out as disturbed)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests import browser
from tests.e2e.conftest import dbregress, run_record, step_results

pytestmark = pytest.mark.engine


def quickstart_tiny() -> str:
    """labs/quickstart.toml as shipped (its comparisons, builds, configs and placement),
    with the sizes and repeats shrunk so that it runs in about a minute."""
    text = (Path(__file__).parents[2] / "labs" / "quickstart.toml").read_text()
    shrink = {
        "repeats": "1",
        "keys": "20000",
        "seconds": "0.5",
        "warmup_s": "0",
        "load_rows": "5000",
        "write_rows": "1000",
        "query_seconds": "0.5",
        "cleanup_wait_s": "0",
    }
    for key, value in shrink.items():
        text, n = re.subn(rf"(?m)^{key} = [^#\n]*", f"{key} = {value} ", text)
        assert n, key
    return text.replace('placement = "separate"', 'placement = "separate"\nwarmup_job = false')


def test_quickstart_report_in_chromium(tmp_path: Path, workdir: Path) -> None:
    """The quickstart's own lab (both comparisons, tiny sizes): its HTML report opens in
    Chromium with no console message and every chart drawn."""
    lab = tmp_path / "quickstart.toml"
    lab.write_text(quickstart_tiny())
    out = dbregress("run", str(lab), cwd=tmp_path, workdir=workdir)
    assert out.returncode in (0, 1), out.stderr  # 1: a verdict, not an error
    run, record = run_record(tmp_path)
    assert record["status"] == "ok" and not record["failures"]
    assert [c["name"] for c in record["comparisons"]] == ["rocksdb", "postgres"]
    path = run / "report.html"
    assert browser.offline_problems(path.read_text()) == []
    page = browser.load(path)
    assert page.console == [], page.console
    charts = browser.charts(page.dom)
    # per comparison one ratio chart (one non-base column) and two per reported step
    reported = {
        c: sum(r.get("reported", True) for r in step_results(run, f"{c}/r1").values())
        for c in ("rocksdb-7.10", "pg12")
    }
    assert len(charts) == 2 + 2 * sum(reported.values()), (len(charts), reported)
    # A ratio chart marks each step that has a ratio; beside other tests the host may
    # leave every repeat out as disturbed, and then it marks none (the report says why).
    verdicts = json.loads((run / "verdicts.json").read_text())
    marks = {
        f"{column['label']} vs {comp['base']}": sum(
            s["ratio"] is not None for s in column["steps"] if s["lane"] == "time"
        )
        for comp in verdicts["comparisons"]
        for column in comp["columns"]
    }
    ratio_charts = 0
    for chart in charts:
        title = re.search(r'font-weight="600"[^>]*>([^<]*)</text>', chart)
        if title is not None and title.group(1) in marks:
            ratio_charts += 1
            assert chart.count("<g stroke=") == marks[title.group(1)], title.group(1)
        else:
            assert "<polyline" in chart, chart[:300]
    assert ratio_charts == len(marks) == 2
    for what in ("Relative QPS (vs rocksdb-7.10)", "Relative QPS (vs pg12)"):
        assert what in page.dom, what
    png = browser.screenshot(path, tmp_path / "quickstart-report.png")
    assert png.stat().st_size > 20_000
