"""`dbregress compare` on two real interleaved runs (the null driver: the scheduler, the
slices and the paired ratios are real, the engine is not): the pair is judged on the
repeats, unpaired, and the output says so; no step is left at "no paired repeats"."""

from __future__ import annotations

import json
from pathlib import Path

from tests.e2e.conftest import dbregress

LAB = """\
name = "inter"
benchmark = "kv"
placement = "unpinned"
schedule = "interleaved"
repeats = 2
warmup_job = false
count = false
[[column]]
label = "na"
build = "null@0"
[[column]]
label = "nb"
build = "null@0"
[kv]
keys = 1000
seconds = 0.5
warmup_s = 0
steps = ["fillseq", "readrandom"]
"""


def test_compare_judges_two_interleaved_runs(tmp_path: Path, workdir: Path) -> None:
    (tmp_path / "lab.toml").write_text(LAB)
    runs = []
    for _ in range(2):
        out = dbregress("run", "lab.toml", cwd=tmp_path, workdir=workdir)
        assert out.returncode == 0, out.stderr[-3000:]
        found = {p.parent for p in (tmp_path / "results").glob("*/run.json")}
        (new,) = found - set(runs)
        runs.append(new)
    for run in runs:
        record = json.loads((run / "run.json").read_text())
        assert record["schedule"] == "interleaved"
        paired = json.loads(next((run / "nb" / "r1" / "steps").glob("01-*.json")).read_text())
        assert paired["paired"]["base"] == "na/r1"
    a, b = (str(r) for r in runs)
    out = dbregress("compare", a, b, "--format", "json", cwd=tmp_path, workdir=workdir)
    assert out.returncode == 0, out.stderr[-3000:]
    verdicts = json.loads(out.stdout)
    said = verdicts["compare"]
    assert said["unpaired"] and "unpaired" in said["unpaired"]
    assert said["host_class_differs"] == [] and said["host_differs"] == []
    assert f"note: {said['unpaired']}" in out.stderr
    (comparison,) = verdicts["comparisons"]
    assert [c["label"] for c in comparison["columns"]] == ["B:na", "B:nb"]
    steps = [s for c in comparison["columns"] for s in c["steps"]]
    assert {s["step"] for s in steps} == {"fillseq", "readrandom"}
    assert all("paired" not in s["reason"] for s in steps), [s["reason"] for s in steps]
    md = dbregress("compare", a, b, cwd=tmp_path, workdir=workdir)
    assert md.returncode == 0 and "judged on the repeats' QPS unpaired" in md.stdout
    assert "no paired repeats" not in md.stdout
