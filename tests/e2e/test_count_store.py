"""The count store with real builds: a second run of a lab counts nothing and gives the
same cost ratios; a reused build is counted anew every n runs; an A/A run whose base is
taken from the store and whose column is counted anew finds no slower/faster; --recount
counts everything again."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.e2e.conftest import dbregress

pytestmark = pytest.mark.engine

# Fixed-work steps: their windows are placed by the step's own calls, not by the time
# lane's rate, which moves 2x between runs of a 0.3 s step on a host running other tests
# (a timed step's stored window is then refused, rightly: tests/unit/test_count_store.py)
SIZES = """\
[kv]
keys = 10000
seconds = 0.3
warmup_s = 0.1
steps = ["fillseq", "overwritesome"]
"""


def _lab(tmp_path: Path, name: str, columns: list[tuple[str, str]], top: str = "") -> Path:
    head = f"""\
{top}name = "{name}"
placement = "same"
benchmark = "kv"
repeats = 1
warmup_job = false
count = true
count_replays = 2
count_replays_max = 4
"""
    blocks = "".join(f'[[column]]\nlabel = "{lb}"\nbuild = "{b}"\n' for lb, b in columns)
    path = tmp_path / f"{name}.toml"
    path.write_text(head + blocks + SIZES)
    return path


def _costs(tmp_path: Path, workdir: Path, run: Path) -> dict[str, tuple[str, float]]:
    out = dbregress("report", str(run), "--format", "json", cwd=tmp_path, workdir=workdir)
    assert out.returncode == 0, out.stderr
    found = {}
    for column in json.loads(out.stdout)["comparisons"][0]["columns"]:
        for step in column["steps"]:
            cost = step["cost"]
            found[f"{column['label']}/{step['step']}"] = (cost["verdict"], cost["ratio"])
    return found


def _runs(tmp_path: Path) -> list[Path]:
    return sorted(p for p in (tmp_path / "results").iterdir() if (p / "run.json").is_file())


def test_aa_with_the_base_taken_from_the_store_finds_no_change(
    tmp_path: Path, workdir: Path
) -> None:
    first = _lab(tmp_path, "one", [("x", "rocksdb@10.2.1"), ("y", "rocksdb@7.10.2")])
    out = dbregress("run", str(first), cwd=tmp_path, workdir=workdir)
    assert out.returncode == 0, out.stderr
    aa = _lab(tmp_path, "aa", [("a", "rocksdb@10.2.1"), ("b", "rocksdb@10.2.1")])
    out = dbregress(
        "run",
        str(aa),
        "--fail-on",
        "slower:cost",
        "--allow-undecided",
        cwd=tmp_path,
        workdir=workdir,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "cost lane: a: 2 replay(s) taken from the count store" in out.stderr
    assert "cost lane: 2 counting replay(s) of 2 column(s)" in out.stderr  # b's, anew
    run = _runs(tmp_path)[-1]
    for n in (1, 2):
        assert "reused" in json.loads((run / "cost" / "a" / f"r{n}.json").read_text())
        assert "reused" not in json.loads((run / "cost" / "b" / f"r{n}.json").read_text())
    verdicts = [v for v, _ in _costs(tmp_path, workdir, run).values()]
    assert "slower" not in verdicts and "faster" not in verdicts, verdicts


def test_the_store_serves_a_second_run_and_counts_anew_every_n_runs_and_on_recount(
    tmp_path: Path, workdir: Path
) -> None:
    """A second run counts nothing and gives the same ratios. Issue 51 item 9: a reused
    base froze one draw for every later run, so with recount_every = 2 the third run
    counts anew, and each run says how many of each side's replays it counted itself.
    --recount counts everything again where the store would have served."""
    lab = _lab(
        tmp_path,
        "nightly",
        [("base", "rocksdb@7.10.2"), ("head", "rocksdb@10.2.1")],
        top="recount_every = 2\n",
    )
    first = dbregress("run", str(lab), cwd=tmp_path, workdir=workdir)
    assert first.returncode == 0, first.stderr
    assert "counting replay(s) of 2 column(s)" in first.stderr
    second = dbregress("run", str(lab), cwd=tmp_path, workdir=workdir)
    assert second.returncode == 0, second.stderr
    assert "under valgrind" not in second.stderr  # nothing counted
    for label in ("base", "head"):
        assert f"cost lane: {label}: 2 replay(s) taken from the count store" in second.stderr
    one, two = _runs(tmp_path)
    assert _costs(tmp_path, workdir, one) == _costs(tmp_path, workdir, two)
    for path in (two / "cost").glob("*/r*.json"):
        assert json.loads(path.read_text())["reused"]["run"] == one.name
    third = dbregress("run", str(lab), cwd=tmp_path, workdir=workdir)
    assert third.returncode == 0, third.stderr
    three = _runs(tmp_path)[2]
    stores = [json.loads((r / "cost" / "lane.json").read_text())["store"] for r in _runs(tmp_path)]
    assert [s["fresh"] for s in stores] == [
        {"base": 2, "head": 2},
        {"base": 0, "head": 0},
        {"base": 2, "head": 2},
    ]
    assert stores[1]["adopted"] == {"kv": 4} and not stores[1]["recount"]
    assert stores[1]["taken"] == {"base": 2, "head": 2} and stores[1]["recount_every"] == 2
    assert "recount_every = 2" in stores[2]["refused"]["base"]
    assert "(fresh 0/0)" in (two / "report.md").read_text()
    assert "(fresh" not in (three / "report.md").read_text()
    (comp,) = json.loads((two / "verdicts.json").read_text())["comparisons"]
    head = next(c for c in comp["columns"] if c["label"] == "head")
    assert head["steps"] and all(
        s["cost"]["fresh"] == {"base": 0, "column": 0} for s in head["steps"]
    )
    # the fourth run would take the third's replays (one run since they were counted)
    fourth = dbregress("run", str(lab), "--recount", cwd=tmp_path, workdir=workdir)
    assert fourth.returncode == 0, fourth.stderr
    assert "taken from the count store" not in fourth.stderr
    assert "counting replay(s) of 2 column(s)" in fourth.stderr
