"""`dbregress compare` of two interleaved runs (cli/compare.py): a repeat's paired ratio
is against its own run's base, so the two runs are judged on their repeats, unpaired,
with each copied result's `paired` base relabelled with its side; and what makes the two
runs unlike (method, host, placement) is said, a host of another class failing a gate
closed unless --across-hosts."""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path
from typing import Any

import pytest

from dbregress.cli import compare
from dbregress.cli.exits import EXIT_SLOWER, EXIT_UNJUDGED
from dbregress.lab.file import load_lab
from dbregress.store.files import write_json
from dbregress.store.run import RunWriter, read_record, read_run
from tests.step_records import native
from tests.unit.test_report import step

LAB = """\
name = "inter"
benchmark = "insert"
schedule = "interleaved"
repeats = 5
warmup_job = false
count = false
[[column]]
label = "main"
build = "postgres@17.2.0"
[[column]]
label = "pr"
build = "postgres@17.2.0"
[insert]
load_rows = 1000
write_rows = 100
query_seconds = 1
"""
HOST = {"hostname": "h1", "machine": "x86_64", "cpu_model": "EPYC", "cpu_count": 2}


def interleaved_run(root: Path, level: float, seed: int, host: dict[str, Any] = HOST) -> Path:
    """An interleaved run of l.i0: `pr` at `level` times `main`, each repeat paired with
    the base's repeat of the same round (as the interleaved schedule stores it)."""
    root.mkdir(parents=True)
    path = root / "lab.toml"
    path.write_text(LAB)
    lab = load_lab(path)
    writer = RunWriter(root / "results", lab, dict(host))
    rng = random.Random(seed)
    for job in lab.jobs():
        if job.warmup:
            continue
        writer.set_job(job, {})
        factor = level if job.column.label == "pr" else 1.0
        q = 100_000.0 * factor * (1 + rng.gauss(0, 0.005))
        result = step(job.column.label, "l.i0", q, "rows", 5.0, repeat=job.repeat)
        if job.column.label == "pr":
            result["paired"] = {"base": f"main/r{job.repeat}", "ratio": level, "pairs": 10}
        writer.write_step(job, 1, native(result), [], "")
    writer.finish("ok")
    return writer.path


def _args(a: Path, b: Path, **over: Any) -> argparse.Namespace:
    values = {
        "run_a": str(a),
        "run_b": str(b),
        "results": a.parent,
        "format": "json",
        "fail_on": None,
        "allow_undecided": False,
        "across_hosts": False,
    }
    return argparse.Namespace(**(values | over))


def test_two_interleaved_runs_are_judged_on_their_repeats_unpaired(tmp_path: Path) -> None:
    a = interleaved_run(tmp_path / "a", 1.0, 1)
    b = interleaved_run(tmp_path / "b", 0.8, 2)
    record, steps = compare.merge(read_run(a), read_run(b))
    # the copied results name their own side's base: nothing points out of the merged run
    pairs = [r["paired"]["base"] for rs in steps.values() for r in rs if r.get("paired")]
    assert sorted(pairs) == [f"B:main/r{n}" for n in (1, 2, 3, 4, 5)]
    alike = compare.likeness(read_run(a), read_run(b))
    text, verdicts = compare.render(record, steps, "A", "B", alike)
    assert not verdicts.paired
    pr = verdicts.qps[("insert", "B:pr", "l.i0")]
    assert pr.verdict == "slower" and pr.ratio == pytest.approx(0.8, rel=0.02)
    assert (pr.n_base, pr.n_other) == (5, 5)
    main = verdicts.qps[("insert", "B:main", "l.i0")]
    assert main.verdict != "undecided" or "no paired repeats" not in main.reason
    assert "no paired repeats" not in text
    assert alike.unpaired is not None and "judged on the repeats' QPS unpaired" in text


def test_compare_says_when_the_methods_and_hosts_differ(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a = interleaved_run(tmp_path / "a", 1.0, 1)
    other = HOST | {"hostname": "h2", "cpu_model": "Xeon"}
    b = interleaved_run(tmp_path / "b", 0.8, 2, host=other)
    found = read_record(b)
    found["method_identity"] = {**(found.get("method_identity") or {}), "loadgen_sha256": "ff"}
    write_json(b / "run.json", found)
    alike = compare.likeness(read_run(a), read_run(b))
    assert alike.host_class == ["cpu_model EPYC -> Xeon"]
    assert alike.host == ["hostname h1 -> h2"]
    assert any(d.startswith("loadgen binary") and d.endswith("-> ff") for d in alike.method)
    code = compare.run(_args(a, b))
    out, err = capsys.readouterr()
    said = json.loads(out)["compare"]
    assert said["host_class_differs"] == ["cpu_model EPYC -> Xeon"]
    assert said["method_differs"] == alike.method
    assert "note: The two runs were measured on hosts of another class" in err
    assert code == 0
    # a gate across hosts of another class is not judged, unless asked for
    assert compare.run(_args(a, b, fail_on="slower:time")) == EXIT_UNJUDGED
    err = capsys.readouterr().err
    assert "NOT JUDGED, the runs were measured on hosts of another class" in err
    across = compare.run(_args(a, b, fail_on="slower:time", across_hosts=True))
    assert across == EXIT_SLOWER


def test_two_runs_alike_say_nothing_of_method_or_host(tmp_path: Path) -> None:
    a = interleaved_run(tmp_path / "a", 1.0, 1)
    b = interleaved_run(tmp_path / "b", 1.0, 2)
    alike = compare.likeness(read_run(a), read_run(b))
    assert alike.method == [] and alike.host_class == [] and alike.host == []
    assert alike.placement == [] and alike.unknown == []
    assert alike.lines() == [alike.unpaired]


def test_compare_prints_tsv_and_csv_not_markdown_in_their_place(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a = interleaved_run(tmp_path / "a", 1.0, 1)
    b = interleaved_run(tmp_path / "b", 0.8, 2)
    compare.run(_args(a, b, format="csv"))
    out = capsys.readouterr().out
    assert out.startswith("comparison,benchmark,column,") and "B:pr" in out
    compare.run(_args(a, b, format="tsv"))
    assert "insert: relative QPS" in capsys.readouterr().out


def test_a_run_without_host_facts_is_not_the_same_host(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An import records no host: its QPS is not known to come from the other run's host
    class, so a gate of the time lane does not pass on it without --across-hosts."""
    a = interleaved_run(tmp_path / "a", 1.0, 1)
    b = interleaved_run(tmp_path / "b", 0.8, 2, host={})
    alike = compare.likeness(read_run(a), read_run(b))
    assert alike.host_class == [] and alike.host_unknown == ["B"]
    assert compare.run(_args(a, b, fail_on="slower:time")) == EXIT_UNJUDGED
    out, err = capsys.readouterr()
    assert json.loads(out)["compare"]["host_unknown"] == ["B"]
    assert "NOT JUDGED, B's host is not recorded (an import)" in err
    assert compare.run(_args(b, a, fail_on="slower")) == EXIT_UNJUDGED  # either side
    assert compare.run(_args(a, b, fail_on="slower:time", across_hosts=True)) == EXIT_SLOWER
