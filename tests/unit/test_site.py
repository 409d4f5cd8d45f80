"""`dbregress site` (site/): a static site from a results folder's history, on run
folders written as the runner and the cost lane write them (no engines): the change
point and the method boundary on a step's page and in its data, what moved, version
series, bisections, and incremental writing."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from dbregress.cli.main import main
from dbregress.model.errors import DbregressError
from dbregress.site import charts, pages
from dbregress.site.gather import RunFolder, verdict_cells
from dbregress.site.moved import version_series
from dbregress.site.write import build_site
from dbregress.store.files import write_json
from dbregress.store.history import RunInfo, reindex
from dbregress.store.replays import save_replay
from dbregress.store.run import read_record
from tests.unit.test_history import make_run, replay

CHANGE_AT = 5  # head's QPS and count move by 20% from this run on
METHOD_AT = 2  # another loadgen binary from this run on


def verdicts(head: float) -> dict[str, Any]:
    """A verdicts.json of the lab's one comparison: head against base in both lanes."""
    word = "slower" if head < 1 else "same"
    step = {
        "step": "qp100",
        "ratio": head,
        "ci": [head * 0.98, head * 1.02],
        "verdict": word,
        "reason": "test",
        "cost": {"ratio": 1 / head, "ci": [0.99 / head, 1.01 / head], "verdict": word,
                 "reading": "more work per operation"},
    }  # fmt: skip
    return {
        "comparisons": [
            {"name": "insert", "base": "base", "columns": [{"label": "head", "steps": [step]}]}
        ]
    }


def history(root: Path, tmp: Path, runs: int = 8, lab_change: int = CHANGE_AT) -> list[Path]:
    """`runs` runs of test_history's lab: head slows by 20% (QPS and count) from run
    `lab_change` on; the loadgen binary changes at METHOD_AT."""
    out = []
    for i in range(runs):
        head = 1000.0 if i < lab_change else 800.0
        run = make_run(
            root, tmp, f"run-{i}", f"2026-01-{i + 1:02d}T03:00:00+0000",
            {"base": 1000.0, "head": head}, seed=i,
        )  # fmt: skip
        record = read_record(run)
        record["method_identity"] = {
            **record["method_identity"],
            "loadgen_sha256": "aaaa" if i < METHOD_AT else "bbbb",
        }
        record["builds"] = {
            "base": {"spec": "postgres@12.20.0"},
            "head": {"spec": "postgres@src:/x#abc", "commit": f"{i:02d}" + "c" * 38,
                     "subject": f"commit {i}"},
        }  # fmt: skip
        write_json(run / "run.json", record)
        for n in (1, 2, 3):
            cycles = 1e5 * (1 + 0.0003 * n)
            save_replay(run, "base", n, replay("base", n, {"qp100": cycles}))
            slow = 1.25 if i >= lab_change else 1.0
            save_replay(run, "head", n, replay("head", n, {"qp100": cycles * slow}))
        write_json(run / "verdicts.json", verdicts(head / 1000.0))
        out.append(run)
    assert reindex(root) == []
    return out


def test_a_step_page_marks_the_change_point_and_draws_the_method_break(tmp_path: Path) -> None:
    root = tmp_path / "results"
    history(root, tmp_path)
    done = build_site(root, root / "site")
    assert done.labs_read == ["nightly"] and not done.problems
    site = root / "site"
    page = (site / "nightly" / "step-insert-qp100.html").read_text()
    assert 'class="method-break"' in page and "loadgen binary aaaa -&gt; bbbb" in page
    assert 'class="change"' in page and "from run run-5" in page
    assert "commit 05cccccccccc commit 5" in page  # the hover of a source build's point
    data = json.loads((site / "nightly" / "data" / "step-insert-qp100.json").read_text())
    time = [c for c in data["charts"] if c["lane"] == "time"]
    head = [m for c in time for m in c["changes"] if m["column"] == "head"]
    assert [(m["run_id"], m["word"]) for m in head] == [("run-5", "slower")]
    assert {b["run"] for c in time for b in c["breaks"]} == {METHOD_AT}
    for c in time:  # no line joins across the boundary
        for line in c["lines"]:
            for piece in line["pieces"]:
                runs = [p["run"] for p in piece]
                assert all(r < METHOD_AT for r in runs) or all(r >= METHOD_AT for r in runs)
    cost = [c for c in data["charts"] if c["lane"] == "cost"]
    assert cost and any(m["run_id"] == "run-5" for c in cost for m in c["changes"])
    moved = (site / "nightly" / "moved.html").read_text()
    assert "change point" in moved and "run-5" in moved
    index = (site / "index.html").read_text()
    assert "Open regressions" in index and "step-insert-qp100.html" in index


def test_what_moved_collapses_a_verdict_held_run_after_run(tmp_path: Path) -> None:
    root = tmp_path / "results"
    history(root, tmp_path)
    build_site(root, root / "site")
    lab = json.loads((root / "site" / "nightly" / "data" / "lab.json").read_text())
    verdict = [m for m in lab["moved"] if m["kind"] == "verdict" and m["lane"] == "time"]
    # run-5 to run-7 say head is slower against the same base: one line, newest run,
    # naming the run and commit where it began
    assert len(verdict) == 1 and verdict[0]["run_id"] == "run-7"
    assert verdict[0]["cause"].startswith("in 3 consecutive runs, run-5 (05cccccccccc) to run-7")
    assert lab["open_regressions"]


def test_only_what_changed_is_written_again(tmp_path: Path) -> None:
    root = tmp_path / "results"
    history(root, tmp_path, runs=6)
    site = root / "site"
    first = build_site(root, site)
    assert first.written and not first.unchanged
    again = build_site(root, site)
    assert again.labs_kept == ["nightly"] and again.written == []
    moved = site / "nightly" / "moved.html"
    before = (moved.read_bytes(), moved.stat().st_mtime_ns)
    make_run(root, tmp_path, "run-6", "2026-01-07T03:00:00+0000", {"base": 1000.0, "head": 800.0})
    assert reindex(root) == []
    third = build_site(root, site)
    assert third.labs_read == ["nightly"]
    assert "nightly/step-insert-qp100.html" in third.written
    # run-6 has no verdicts.json and continues run-5's level: nothing new moved, so the
    # page is the same bytes and is not written again (issue 51 item 26: the assertion
    # was "unchanged or written", always true)
    assert "nightly/moved.html" in third.unchanged and "nightly/moved.html" not in third.written
    assert (moved.read_bytes(), moved.stat().st_mtime_ns) == before
    (site / "nightly" / "moved.html").unlink()  # a file gone: the lab is read again
    assert build_site(root, site).labs_read == ["nightly"]


def test_a_removed_step_page_is_removed(tmp_path: Path) -> None:
    root = tmp_path / "results"
    history(root, tmp_path, runs=3)
    site = root / "site"
    build_site(root, site)
    stale = site / "nightly" / "step-insert-gone.html"
    manifest = json.loads((site / "site.json").read_text())
    manifest["files"].append("nightly/step-insert-gone.html")
    manifest["labs"]["nightly"]["inputs"] = "other"
    stale.write_text("old")
    write_json(site / "site.json", manifest)
    done = build_site(root, site)
    assert "nightly/step-insert-gone.html" in done.removed and not stale.exists()


def test_no_history_names_what_to_do(tmp_path: Path) -> None:
    with pytest.raises(DbregressError, match=r"no run history at .*--reindex"):
        build_site(tmp_path, tmp_path / "site")


def test_the_command_prints_what_it_wrote(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "results"
    history(root, tmp_path, runs=3)
    assert main(["site", "--results", str(root), "--out", str(tmp_path / "out")]) == 0
    out = capsys.readouterr().out
    assert "site: 1 lab(s) (1 read, 0 unchanged)" in out and (tmp_path / "out/index.html").is_file()


def test_a_point_links_to_its_runs_report_relative_to_the_page(tmp_path: Path) -> None:
    root = tmp_path / "results"
    runs = history(root, tmp_path, runs=3)
    (runs[1] / "report.html").write_text("<html>report</html>")
    build_site(root, root / "site")
    page = root / "site" / "nightly" / "step-insert-qp100.html"
    hrefs = {h for h in _hrefs(page.read_text()) if h.endswith("report.html")}
    assert hrefs and all((page.parent / h).resolve() == (runs[1] / "report.html") for h in hrefs)


def _hrefs(html: str) -> list[str]:
    import re

    return re.findall(r'href="([^"#]+)"', html)


def test_a_version_series_is_relative_to_the_first_column(tmp_path: Path) -> None:
    cells = {
        "comparisons": [{"name": "kv", "columns": [
            {"label": "v2", "steps": [{"step": "readrandom", "ratio": 0.9, "ci": [0.8, 0.95],
                                       "verdict": "slower"}]},
            {"label": "v3", "steps": [{"step": "readrandom", "ratio": 1.2, "ci": [1.1, 1.3],
                                       "verdict": "faster"}]},
        ]}]
    }  # fmt: skip
    info = RunInfo("r1", "lab", "2026-01-01T00:00:00Z", None, "ok", "native", None, "h", "r1", {})
    rf = RunFolder(info, 0, tmp_path, None)
    rf.columns = [
        {"label": lb, "comparison": "kv", "build": f"rocksdb@{lb}"} for lb in ("v1", "v2", "v3")
    ]
    rf.verdicts, _ = verdict_cells(cells)
    (series,) = version_series("lab", [rf])
    (row,) = series.rows
    assert series.columns == ("v1", "v2", "v3") and row.time == (1.0, 0.9, 1.2)
    assert row.time_words == ("base", "slower", "faster") and row.cost == (1.0, None, None)
    page = pages.series_page("lab", series)
    assert 'class="swatch"' in page and ">readrandom</span>" in page


def test_a_bisection_that_could_not_isolate_says_could_be_any_of(tmp_path: Path) -> None:
    root = tmp_path / "results"
    history(root, tmp_path, runs=3)
    spec = "postgres@src:/t#{}+rel"
    write_json(
        root / "bisect-1-qp100" / "bisect.json",
        {
            "request": {"step": "qp100", "lane": "cost", "builds": [spec.format("a" * 40)]},
            "builds": [spec.format(c * 40) for c in "abcd"],
            "first_bad": None,
            "candidates": [spec.format("b" * 40), spec.format("c" * 40)],
            "points": [{"lo": spec.format("a" * 40), "mid": spec.format("b" * 40),
                        "mid_vs_lo": {"word": "slower"}}],
            "took_s": 12.0,
        },
    )  # fmt: skip
    build_site(root, root / "site")
    moved = (root / "site" / "nightly" / "moved.html").read_text()
    assert "could be any of these 2" in moved and "bbbbbbbbbbbb+rel" in moved
    assert "first bad build:" not in moved


def test_hover_names_the_verdict_and_the_base() -> None:
    from dbregress.site.model import Point, Verdict

    p = Point(0, "r", None, 1234.5, 3, 1, "b", "default", "h", None, "ab" * 20, "fix", base=True)
    text = charts.hover(p, "time")
    assert "the run's base column" in text and "1 repeat(s) left out" in text
    other = Point(0, "r", None, 1.0, 3, 0, "b", "c", "h", None)
    assert "no verdict against the run's base" in charts.hover(other, "time")
    q = Point(
        0, "r", None, 1.0, 3, 0, "b", "c", "h", None, verdict=Verdict("slower", 0.8, (0.7, 0.9))
    )
    assert "against the run's base: slower 0.800 [0.700, 0.900]" in charts.hover(q, "cost")


def test_site_paths_are_relative(tmp_path: Path) -> None:
    root = tmp_path / "results"
    history(root, tmp_path, runs=2)
    build_site(root, root / "site")
    for page in (root / "site").rglob("*.html"):
        for href in _hrefs(page.read_text()):
            assert not href.startswith(("/", "file:", "http")), (page, href)
            assert (page.parent / href).exists(), (page, href)
    assert str(tmp_path) not in (root / "site" / "site.json").read_text()
    assert os.sep not in json.loads((root / "site" / "site.json").read_text())["results"]


def test_a_run_without_a_level_breaks_the_line_and_is_said(tmp_path: Path) -> None:
    """Review: a run whose head repeats were all disturbed vanished and the line was
    drawn across it; a run without verdicts.json was silent and its head point's hover
    called it the base."""
    root = tmp_path / "results"
    runs = history(root, tmp_path, runs=6, lab_change=99)
    for step in (runs[3] / "head").rglob("steps/*-qp100.json"):
        r = json.loads(step.read_text())
        r["host"] = {**r["host"], "other_cpu_frac": 0.5, "other_cpu_s": 10.0}
        write_json(step, r)
    (runs[5] / "verdicts.json").unlink()
    assert reindex(root) == []
    done = build_site(root, root / "site")
    data = json.loads((root / "site/nightly/data/step-insert-qp100.json").read_text())
    (time,) = [c for c in data["charts"] if c["lane"] == "time"]
    head = next(line for line in time["lines"] if line["column"] == "head")
    after_break = [[p["run"] for p in piece] for piece in head["pieces"] if piece[0]["run"] >= 2]
    assert after_break == [[2], [4, 5]]  # no line through run 3
    assert {b["run"] for b in time["breaks"]} == {METHOD_AT}  # a gap is not a method break
    assert any("run-5: no verdicts.json" in p for p in done.problems)
    page = (root / "site/nightly/step-insert-qp100.html").read_text()
    assert (
        "no verdict against the run&#x27;s base" in page
        or "no verdict against the run's base" in page
    )
    index = (root / "site/index.html").read_text()
    assert "Open regressions unknown" in index


def test_a_slowdown_before_a_method_boundary_is_not_open(tmp_path: Path) -> None:
    root = tmp_path / "results"
    runs = history(root, tmp_path, runs=8, lab_change=3)  # slower from run 3 on
    for run in runs[6:]:  # fixed at run 6, when the loadgen changed again
        record = read_record(run)
        record["method_identity"] = {**record["method_identity"], "loadgen_sha256": "cccc"}
        write_json(run / "run.json", record)
        write_json(run / "verdicts.json", verdicts(1.0))
    assert reindex(root) == []
    build_site(root, root / "site")
    lab = json.loads((root / "site/nightly/data/lab.json").read_text())
    assert [m for m in lab["open_regressions"] if m["kind"] == "change point"] == []


def test_samples_indexed_again_rebuild_the_lab(tmp_path: Path) -> None:
    root = tmp_path / "results"
    runs = history(root, tmp_path, runs=3)
    build_site(root, root / "site")
    for step in (runs[1] / "head").rglob("steps/*-qp100.json"):
        r = json.loads(step.read_text())
        r["host"] = {**r["host"], "other_cpu_frac": 0.5, "other_cpu_s": 10.0}
        write_json(step, r)
    assert reindex(root) == []
    assert build_site(root, root / "site").labs_read == ["nightly"]


def test_the_index_says_what_the_last_run_left_undecided(tmp_path: Path) -> None:
    """Review: a last run whose steps were undecided read as 'no open regression' and
    nothing more; a slowdown stopped being open when the last run had no level."""
    root = tmp_path / "results"
    runs = history(root, tmp_path, runs=8, lab_change=4)
    last = verdicts(0.8)
    step = last["comparisons"][0]["columns"][0]["steps"][0]
    step["verdict"] = step["cost"]["verdict"] = "undecided"
    write_json(runs[-1] / "verdicts.json", last)
    for f in (runs[-1] / "head").rglob("steps/*-qp100.json"):
        r = json.loads(f.read_text())
        r["host"] = {**r["host"], "other_cpu_frac": 0.5, "other_cpu_s": 10.0}
        write_json(f, r)
    assert reindex(root) == []
    build_site(root, root / "site")
    index = (root / "site/index.html").read_text()
    assert "2 verdict(s) of the last run are undecided or withheld" in index
    lab = json.loads((root / "site/nightly/data/lab.json").read_text())
    opened = {(m["lane"], m["run_id"]) for m in lab["open_regressions"]}
    assert ("time", "run-4") in opened  # no level at run-7: not a recovery


def test_a_version_series_line_breaks_where_a_column_has_no_value() -> None:
    chart = charts.series_chart("t", ["a", "b", "c", "d"], [("s", (1.0, None, 0.9, 0.8))], "r")
    assert chart.count("<polyline") == 2


def _step_of(verdicts_json: dict[str, Any]) -> dict[str, Any]:
    step: dict[str, Any] = verdicts_json["comparisons"][0]["columns"][0]["steps"][0]
    return step


def test_a_lane_the_last_run_did_not_judge_is_not_green(tmp_path: Path) -> None:
    """Issue 51 item 24: a last run without a cost lane, or whose steps have no verdict,
    said "No open regression: the last run confirmed no step slower"."""
    root = tmp_path / "results"
    runs = history(root, tmp_path, runs=3, lab_change=99)
    last = verdicts(1.0)
    del _step_of(last)["cost"]
    last["lanes"] = {"judged": ["time"], "not_judged": {"cost": "not run, valgrind is missing"}}
    write_json(runs[-1] / "verdicts.json", last)
    build_site(root, root / "site")
    index = (root / "site/index.html").read_text()
    assert "No open regression" not in index and "Not all judged" in index
    assert "the cost lane (not run, valgrind is missing)" in index
    empty = {"comparisons": [{"name": "insert", "columns": [{"label": "head", "steps": []}]}]}
    write_json(runs[-1] / "verdicts.json", empty)  # no `lanes`, no verdict at all
    build_site(root, root / "site2")
    index = (root / "site2/index.html").read_text()
    assert "No open regression" not in index
    assert index.count("no step has a decided verdict in this lane") == 2
    write_json(runs[-1] / "verdicts.json", verdicts(1.0))  # both lanes judged: green
    build_site(root, root / "site3")
    assert "No open regression" in (root / "site3/index.html").read_text()


def test_a_slowdown_stays_open_until_a_judged_run_closes_it(tmp_path: Path) -> None:
    """Issue 51 item 24: a slowdown confirmed on night N left "Open regressions" when
    night N+1 was merely undecided."""
    root = tmp_path / "results"
    runs = history(root, tmp_path, runs=6, lab_change=99)  # no change point: verdicts only
    write_json(runs[3] / "verdicts.json", verdicts(0.8))
    undecided = verdicts(1.0)
    _step_of(undecided)["verdict"] = _step_of(undecided)["cost"]["verdict"] = "undecided"
    write_json(runs[4] / "verdicts.json", undecided)
    cost_only = verdicts(1.0)  # the cost lane closes its own, the time lane is absent
    cost_only["comparisons"][0]["columns"][0]["steps"][0]["verdict"] = "undecided"
    write_json(runs[5] / "verdicts.json", cost_only)
    build_site(root, root / "site")
    lab = json.loads((root / "site/nightly/data/lab.json").read_text())
    opened = [(m["lane"], m["run_id"], m["still"]) for m in lab["open_regressions"]]
    assert opened == [("time", "run-3", "not judged in the 2 run(s) since")]
    index = (root / "site/index.html").read_text()
    assert "Open regressions (1)" in index and "not judged in the 2 run(s) since" in index
    write_json(runs[5] / "verdicts.json", verdicts(1.0))  # judged same in both lanes
    build_site(root, root / "site2")
    lab = json.loads((root / "site2/nightly/data/lab.json").read_text())
    assert lab["open_regressions"] == []


def test_the_site_s_digest_holds_the_code_docs_site_md_names() -> None:
    """Issue 51 item 25: the digest held site/*.py, its templates and report/svg.py
    only, while docs/site.md said the change points' code too."""
    from dbregress.site import write

    package = Path(write.__file__).resolve().parents[1]
    names = {str(f.relative_to(package)) for f in write.code_files()}
    assert names >= {
        "site/write.py", "site/templates/index.html.j2", "report/svg.py",
        "analysis/changepoints.py", "report/history_moves.py", "store/history.py",
        "store/history_index.py", "store/history_rows.py", "report/ledger.py",
        "analysis/ledger.py",
    }  # fmt: skip
    assert write._own_code() == write._own_code(write.code_files())
    docs = (Path(__file__).resolve().parents[2] / "docs" / "site.md").read_text()
    for name in ("analysis/changepoints.py", "report/history_moves.py", "store/history*.py"):
        assert name in docs


def _state(root: Path, *nights: dict[str, Any]) -> None:
    write_json(root / "nightly" / "state.json", {"format": 1, "nights": list(nights)})


def test_a_night_that_failed_to_build_shows_on_the_index(tmp_path: Path) -> None:
    """Issue 51 item 27: a night whose HEAD did not build made no run, and the site,
    which showed runs only, did not show it."""
    root = tmp_path / "results"
    history(root, tmp_path, runs=2)
    night = {"lab": "nightly", "commit": "f" * 40, "subject": "breaks the build",
             "outcome": "failed", "status": 3, "run": None}  # fmt: skip
    _state(
        root,
        {**night, "night": "20260103T010000Z-ffffffffffff", "why": "the head build failed"},
        {**night, "night": "20260102T010000Z-eeeeeeeeeeee", "outcome": "green", "status": 0,
         "run": "run-1", "why": ""},
        {**night, "lab": "other", "night": "20260103T020000Z-ffffffffffff", "why": "no base"},
    )  # fmt: skip
    build_site(root, root / "site")
    index = (root / "site/index.html").read_text()
    assert "the last night 20260103T010000Z-ffffffffffff was <b" in index
    assert "failed</b> (exit 3)" in index and "the head build failed" in index
    assert "<h2>other</h2>" in index and "no base" in index  # a lab with no run yet
    empty = tmp_path / "fresh"  # the first night failed: no history at all, a site still
    _state(empty, {**night, "night": "20260101T010000Z-ffffffffffff", "why": "no base"})
    assert build_site(empty, empty / "site").labs_read == []
    assert "breaks the build" in (empty / "site/index.html").read_text()
    with pytest.raises(DbregressError, match="no run history"):
        build_site(tmp_path / "nothing", tmp_path / "nothing" / "site")


def test_the_ledger_since_the_nightly_reference_has_its_page(tmp_path: Path) -> None:
    """Issue 50 item 2: the site shows the ledger, from the nightly recipe's fixed
    reference (state.json `reference`): head's count 25% higher from run-5 on."""
    root = tmp_path / "results"
    for i, run in enumerate(history(root, tmp_path, runs=7)):
        run.rename(root / f"run-{i}")  # named by their run ids, as a night's run is
    (root / "history.sqlite").unlink()
    assert reindex(root) == []
    first = build_site(root, root / "site")  # no state file: no ledger
    assert not (root / "site/nightly/ledger.html").exists()
    write_json(root / "nightly/state.json", {"reference": {"nightly": {"run": "run-0"}}})
    done = build_site(root, root / "site")
    assert done.labs_read == ["nightly"] and first.labs_read == ["nightly"]  # read again
    page = (root / "site/nightly/ledger.html").read_text()
    assert "run run-0, column base (postgres@12.20.0)" in page
    rows = [r for r in page.split("<tr>") if r.startswith("<td>run-5</td><td>head")]
    assert len(rows) == 1 and "+25.00% [" in rows[0] and "slower" in rows[0]
    data = json.loads((root / "site/nightly/data/ledger.json").read_text())
    assert data["reference"]["run"] == "run-0" and data["steps"][0]["step"] == "qp100"
    assert 'href="nightly/ledger.html"' in (root / "site/index.html").read_text()
    assert 'href="ledger.html"' in (root / "site/nightly/index.html").read_text()
    write_json(root / "nightly/state.json", {"reference": {"nightly": {"run": "run-99"}}})
    done = build_site(root, root / "site")
    assert any("the ledger since run-99 could not be made" in p for p in done.problems)
    assert not (root / "site/nightly/ledger.html").exists()  # removed: no longer made
