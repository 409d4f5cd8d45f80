"""The HTML report and the TSV/CSV exports on a synthetic run (no engine, no browser;
tests/e2e/test_html_report.py opens a real run's page in Chromium), the SVG charts'
helpers, and reading the per-interval series and histograms back."""

from __future__ import annotations

import csv
import io
import math
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from dbregress.analysis.compare import RunVerdicts, compare_run
from dbregress.analysis.summary import Matrix, matrices
from dbregress.analysis.verdict import StepVerdict
from dbregress.cli.report import write_report
from dbregress.lab.file import VerdictPolicy
from dbregress.report import exports, html, ratio_svg, svg
from dbregress.store.run import read_run
from dbregress.store.series import (
    PERCENTILES,
    encode_histogram,
    interval_rates,
    percentile_curve,
    read_histograms,
    step_files,
)
from tests import browser
from tests.unit.test_report import fixture_run

SVG_NS = "{http://www.w3.org/2000/svg}"


def with_series(path: Path) -> Path:
    """Give the fixture's qp100 steps a per-interval series and a histogram, as the
    loadgen writes them (the fixture's other steps have none)."""
    for f in path.glob("*/r*/steps/03-qp100.json"):
        stem = f.parent / "03-qp100"
        rows = ["t_s,op,ops,rows,max_us,errors"]
        for t in (1.0, 2.0, 3.0, 4.0):
            rows.append(f"{t},insert,10,100,900,0")
            rows.append(f"{t},point_query,{int(18000 + 100 * t)},{int(180000 + 1000 * t)},800,0")
        rows.append("4.0001,point_query,0,0,0,0")  # the short tail the loadgen leaves
        (stem.parent / "03-qp100.csv").write_text("\n".join(rows) + "\n")
        values = [100 + i % 50 for i in range(2000)]
        (stem.parent / "03-qp100.hlog").write_text(
            "#op,histogram\n"
            f"insert,{encode_histogram([900] * 10)}\n"
            f"point_query,{encode_histogram(values)}\n"
        )
    return path


def render(path: Path) -> str:
    data = read_run(path)
    v = compare_run(data.record, data.steps)
    return html.render(data, matrices(data.record, data.steps), v)


def test_the_page_is_self_contained_and_escapes_the_lab_file(tmp_path: Path) -> None:
    path = with_series(fixture_run(tmp_path))
    lab = path / "lab.toml"
    lab.write_text(lab.read_text() + '# </pre><script>alert("x")</script> <img src=x>\n')
    page = render(path)
    assert browser.offline_problems(page) == []
    assert "&lt;/pre&gt;&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;" in page


def test_ratio_cells_are_coloured_by_verdict(tmp_path: Path) -> None:
    page = render(fixture_run(tmp_path))
    # the same verdicts as the Markdown report (test_report.py)
    assert 'class="v-slower" title="slower: ' in page and ">0.90 (-)<small>[0.89, 0.91]" in page
    assert 'class="v-same"' in page and ">1.00 =<small>[0.99, 1.01]" in page
    assert 'class="v-faster"' in page and ">1.11 (+)<small>[1.10, 1.12]" in page
    assert "20,020 †" in page  # pg17's qp100 failed its SLA
    assert "server crashed" in page  # the failure, first line only
    assert "log tail" not in page


def test_every_chart_is_drawn(tmp_path: Path) -> None:
    page = render(with_series(fixture_run(tmp_path)))
    charts = browser.charts(page)
    assert len(charts) == 1 + 2 * 3  # a ratio chart (one non-base column), 2 per step
    for chart in charts:
        ET.fromstring(f'<svg xmlns="http://www.w3.org/2000/svg">{chart}</svg>')  # well-formed
    ratio, steps = charts[0], charts[1:]
    assert ratio.count("<g stroke=") == 3 and svg.VERDICT_COLOURS["slower"] in ratio
    qp100_throughput, qp100_latency = steps[4], steps[5]
    assert qp100_throughput.count("<polyline") == 2  # pg12 and pg17
    assert qp100_latency.count("<polyline") == 2
    assert "pg12 (r1)" in qp100_throughput and "no data" not in qp100_throughput
    assert "no data" in steps[0]  # l.i0 has no stored series in the fixture (qp100 has)


def test_write_report_writes_the_page_and_html_prints_its_path(tmp_path: Path) -> None:
    path = fixture_run(tmp_path)
    text, _ = write_report(path, fmt="html")
    assert text == str(path / "report.html")
    assert (path / "report.html").read_text().startswith("<!DOCTYPE html>")
    (path / "report.html").unlink()
    text, _ = write_report(path)  # every format writes it beside report.md
    assert (path / "report.html").is_file() and "(HTML: " in text
    (path / "report.html").unlink()
    text, _ = write_report(path, fmt="html", columns="pg17")  # picked: printed, not written
    assert text.startswith("<!DOCTYPE html>") and not (path / "report.html").exists()


def test_tsv_is_laid_out_as_the_seed_tables(tmp_path: Path) -> None:
    text, _ = write_report(fixture_run(tmp_path), fmt="tsv")
    assert text.splitlines() == [
        "insert: QPS, median over repeats",
        "col-1 : pg12 (postgres@12.20.0, default)",
        "col-2 : pg17 (postgres@17.2.0, default)",
        "",
        "col-1\tcol-2",
        "100100\t90090\tl.i0",
        "30030\t30030\tl.i1",
        "18018\t20020\tqp100",
        "",
        "insert: relative QPS",
        "Relative to: pg12 (postgres@12.20.0, default)",
        "col-1 : pg17 (postgres@17.2.0, default)",
        "",
        "col-1",
        "0.90\tl.i0",
        "1.00\tl.i1",
        "1.11\tqp100",
    ]


def test_csv_has_a_row_per_comparison_column_and_step(tmp_path: Path) -> None:
    text, _ = write_report(fixture_run(tmp_path), fmt="csv")
    rows = list(csv.DictReader(io.StringIO(text)))
    assert list(rows[0]) == exports.CSV_HEADER
    assert [(r["column"], r["step"]) for r in rows] == [
        (c, s) for c in ("pg12", "pg17") for s in ("l.i0", "l.i1", "qp100")
    ]
    slower = rows[3]
    assert slower["verdict"] == "slower" and slower["repeats"] == "6"
    assert float(slower["ci_low"]) < float(slower["ratio"]) < float(slower["ci_high"]) < 1
    assert float(slower["qps_median"]) == pytest.approx(90000, rel=0.02)
    assert float(slower["server_cpu_us"]) == pytest.approx(11.0, rel=0.02)
    assert slower["server_cpu_us_verdict"] == "higher"
    assert rows[0]["ratio"] == rows[0]["verdict"] == ""  # the base's own rows


def test_ticks() -> None:
    assert svg.nice_ticks(0, 1000, 4) == [0, 250, 500, 750, 1000]
    assert svg.nice_ticks(0.83, 1.21, 5) == pytest.approx([0.9, 1.0, 1.1, 1.2])
    assert svg.log_ticks(3, 4000) == [10, 100, 1000]
    assert svg.log_ticks(15, 300) == [20, 50, 100, 200]
    assert [svg.si(v) for v in (950, 15000, 2.5e6, 0.05)] == ["950", "15k", "2.5M", "0.05"]
    assert svg.nines(99.9) == pytest.approx(3)


def test_many_columns_get_distinct_colours() -> None:
    labels = [f"c{i}" for i in range(40)]
    colours = svg.column_colours(labels)
    assert colours["c0"] == svg.BASE_COLOUR and len(set(colours.values())) == 40


def test_ratio_chart_shows_values_off_the_axis_at_its_edge() -> None:
    points = [
        ratio_svg.RatioPoint("a", 1.0, (0.98, 1.02), "same"),
        ratio_svg.RatioPoint("b", math.inf, None, "faster"),
        ratio_svg.RatioPoint("c", None, None, "undecided"),
    ]
    chart = ratio_svg.ratio_chart(points, "x vs base", 0.05)
    root = ET.fromstring(chart)
    assert root.tag == f"{SVG_NS}svg"
    assert len(root.findall(f"{SVG_NS}g")) == 2  # no mark for the missing ratio
    assert "<circle" in chart and 'stroke="none"' in chart  # a dot, and a triangle


def test_interval_rates_leave_out_the_short_tail(tmp_path: Path) -> None:
    f = tmp_path / "01-s.csv"
    f.write_text(
        "t_s,op,ops,rows,max_us,errors\n"
        "1.0,get,100,100,5,0\n1.0,put,7,7,5,0\n2.0,get,300,300,5,0\n"
        "2.5,get,100,1000,5,0\n2.5002,get,0,0,0,0\n"
    )
    assert interval_rates(f, "get") == [(0.0, 1.0, 100.0), (1.0, 2.0, 300.0), (2.0, 2.5, 200.0)]
    assert interval_rates(f, "get", "rows")[-1] == (2.0, 2.5, 2000.0)
    assert interval_rates(tmp_path / "missing.csv", "get") == []


def test_histograms_decode_to_percentiles(tmp_path: Path) -> None:
    f = tmp_path / "01-s.hlog"
    f.write_text(f"#op,histogram\nget,{encode_histogram(list(range(1, 1001)))}\nput,\n")
    found = read_histograms(f)
    assert list(found) == ["get"]
    curve = dict(percentile_curve(found["get"]) or [])
    assert curve[50.0] == pytest.approx(500, rel=0.01)
    assert curve[99.0] == pytest.approx(990, rel=0.01)
    assert percentile_curve("not a histogram") is None


def test_step_files_find_a_step_with_dots_in_its_name(tmp_path: Path) -> None:
    steps = tmp_path / "steps"
    steps.mkdir()
    for name in ("01-l.i0.json", "01-l.i0.spec.json", "02-l.i1.json"):
        (steps / name).write_text("{}")
    found = step_files(tmp_path, "l.i0")
    assert found is not None and found.csv == steps / "01-l.i0.csv"
    assert step_files(tmp_path, "qp100") is None


def test_percentiles_are_the_librarys() -> None:
    """The numpy search gives what hdrhistogram's own percentile walk gives."""
    from hdrh.histogram import HdrHistogram

    values = [int(50 * 1.01**i) for i in range(900)] + [7, 7, 7, 123456]
    encoded = encode_histogram(values)
    h = HdrHistogram.decode(encoded)
    theirs = h.get_percentile_to_value_dict(list(PERCENTILES))
    assert percentile_curve(encoded) == [(p, float(theirs[p])) for p in PERCENTILES]


def test_many_columns_get_one_heat_map() -> None:
    labels = [f"c{i}" for i in range(9)]
    steps = ["a", "b"]
    qps = {
        ("x", lb, s): StepVerdict(0.8, (0.7, 0.9), 0.95, 0.01, "slower", 3, 3, None, "r")
        for lb in labels[1:]
        for s in steps
    }
    v = RunVerdicts(VerdictPolicy(), qps, {})
    few = html.ratio_charts(Matrix("x", "kv", labels[:3], steps, {}), v)
    assert len(few) == 2 and all("heatmap" not in c for c in few)
    (heat,) = html.ratio_charts(Matrix("x", "kv", labels, steps, {}), v)
    root = ET.fromstring(str(heat))
    cells = [r for r in root.iter(f"{SVG_NS}rect") if r.find(f"{SVG_NS}title") is not None]
    assert len(cells) == 8 * 2
    assert all(r.get("stroke") == "#111" for r in cells)  # decided: outlined
    assert "c8" in heat and "a, c1: 0.800 [0.70, 0.90] slower" in heat


def test_a_run_without_series_gets_a_note_not_empty_charts(tmp_path: Path) -> None:
    page = render(fixture_run(tmp_path))  # no step of the fixture stored a series
    assert len(browser.charts(page)) == 1  # the ratio chart only
    assert "stores no per-interval series" in page
