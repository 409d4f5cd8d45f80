"""The run history with real runs: a run killed outright (SIGKILL, no clean-up) leaves the
history readable and holding every step that finished; later runs of the lab show up in
`dbregress history` as a series."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
from pathlib import Path

import pytest

from tests.e2e.conftest import assert_no_process_mentions, dbregress, start_dbregress, wait_for

pytestmark = pytest.mark.engine

LAB = """\
name = "hist"
placement = "same"
benchmark = "kv"
repeats = 2
warmup_job = false
count = false
[[column]]
label = "a"
build = "rocksdb@10.2.1"
[[column]]
label = "b"
build = "rocksdb@10.2.1"
[kv]
keys = 20000
seconds = 0.5
warmup_s = 0.2
steps = ["fillseq", "overwritesome", "readrandom", "fwdrange"]
"""


def finished_steps(run: Path) -> set[tuple[str, int, str]]:
    out = set()
    for f in run.glob("*/r*/steps/*.json"):
        if f.name.endswith(".spec.json"):
            continue
        r = json.loads(f.read_text())
        if r["status"] == "ok" and r["repeat"] > 0:
            out.add((r["column"], r["repeat"], r["step"]))
    return out


def test_a_killed_run_leaves_the_history_whole_up_to_its_last_step(
    tmp_path: Path, workdir: Path, launched: list
) -> None:
    lab = tmp_path / "lab.toml"
    lab.write_text(LAB)
    results = tmp_path / "results"
    proc = start_dbregress(launched, "run", str(lab), cwd=tmp_path, workdir=workdir)

    def some_steps_done() -> bool:
        runs = list(results.glob("*-hist"))
        return bool(runs) and len(finished_steps(runs[0])) >= 5

    wait_for(some_steps_done, 600, "five finished steps")
    os.killpg(proc.pid, signal.SIGKILL)  # no handler runs: mid-step, maybe mid-write
    proc.communicate(timeout=60)
    assert_no_process_mentions(str(workdir))  # the engine went with it (or is killed now)
    (run,) = results.glob("*-hist")
    done = finished_steps(run)
    db = sqlite3.connect(results / "history.sqlite")
    assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    rows = {
        (c, r, s)
        for c, r, s in db.execute(
            "SELECT column, repeat, step FROM time_samples WHERE run_id = ?", (run.name,)
        )
    }
    db.close()
    # every step whose file was written is indexed (the index follows the file at once,
    # so at most the step being written when the kill came is missing)
    assert rows <= done and len(done - rows) <= 1, (sorted(done - rows), sorted(rows - done))

    # the run goes on from where it stopped; a second run of the lab; both in the history
    again = dbregress("run", "--resume", str(run), cwd=tmp_path, workdir=workdir)
    assert again.returncode == 0, again.stderr
    second = dbregress("run", str(lab), cwd=tmp_path, workdir=workdir)
    assert second.returncode == 0, second.stderr
    out = dbregress("history", "hist", "--step", "readrandom", cwd=tmp_path, workdir=workdir)
    assert out.returncode == 0, out.stderr
    assert "readrandom" in out.stdout and run.name in out.stdout
    assert len([ln for ln in out.stdout.splitlines() if ln.startswith("| 20")]) == 2
