"""The site (`dbregress site`) looked at in headless Chromium, offline: a history of 8
runs of a lab with a method change (another loadgen binary from the third run) and a
change point (head 20% slower from the sixth), each run with its real report
(`dbregress report`). The index and a step page open with no console message; a point's
link leads to its run's report, which opens too; and the screenshot of the step page
shows the change point's red mark and the method boundary's purple dashed line inside
the chart."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from dbregress.site import charts
from tests import browser
from tests.unit.test_site import history


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "dbregress.cli.main", *args],
        cwd=cwd, capture_output=True, text=True, timeout=300,
    )  # fmt: skip


def test_the_site_opens_offline_and_shows_the_change_and_the_break(tmp_path: Path) -> None:
    root = tmp_path / "results"
    runs = history(root, tmp_path)
    for run in runs:
        out = _cli("report", str(run), cwd=tmp_path)
        assert out.returncode in (0, 1), out.stderr  # 1: a slower verdict, as made
        assert (run / "report.html").is_file()
    made = _cli("site", "--results", str(root), cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    site = root / "site"
    index = browser.load(site / "index.html")
    assert not index.console and "nightly" in index.dom and "Open regressions" in index.dom
    step = site / "nightly" / "step-insert-qp100.html"
    assert f'href="nightly/{step.name}"' in index.dom  # the index links the step's page
    page = browser.load(step)
    assert not page.console
    assert 'class="method-break"' in page.dom and 'class="change"' in page.dom
    # follow a point's link to its run's report, offline
    links = [h for h in re.findall(r'href="([^"]+)"', page.dom) if h.endswith("report.html")]
    assert links, "no point links to a report"
    target = (step.parent / links[-1]).resolve()
    assert target.parent.parent == root.resolve() and target.is_file()
    report = browser.load(target)
    assert not report.console and "nightly" in report.dom
    png = browser.screenshot(step, tmp_path / "step.png", width=1200, height=1000)
    seen = browser.colours(png)
    red = seen.get(browser.hex_rgb(charts.CHANGE_COLOURS["slower"]), [])
    purple = seen.get(browser.hex_rgb(charts.BREAK_COLOUR), [])
    # the explanation's words are coloured too: count only pixels inside the charts,
    # below the legend (the first chart starts lower than 230 px at this width)
    in_charts = [p for p in red if p[1] > 230]
    assert len(in_charts) > 100, f"change point not drawn ({len(in_charts)} red pixels)"
    dashes = {y for x, y in purple if y > 230}
    assert len(dashes) > 100, f"method boundary not drawn ({len(dashes)} rows)"
    xs = {x for x, y in purple if y > 230}
    assert max(xs) - min(xs) < 700  # vertical lines, not the page's text
