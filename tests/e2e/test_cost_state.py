"""Every engine counted in its timed state: a PostgreSQL lab whose counting replays run
with a tiny shared_buffers (the cost lane's test hook, DBREGRESS_TEST_REPLAY_SETTINGS)
counts windows much colder than the timed ones, and the cost lane must say so: each
step `undecided` with the reason, verdicts.json with both windows' misses per operation
and the tolerance, never a verdict on the colder count."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from dbregress.analysis import state
from dbregress.cost.replay import TEST_SETTINGS_ENV
from tests.e2e.conftest import cli_env, run_record, step_results

pytestmark = pytest.mark.engine

LAB = """name = "coldstate"
placement = "same"
repeats = 1
warmup_job = false
count = true
count_replays = 2
count_replays_max = 2
benchmark = "insert"
count_steps = ["qp100"]
[[column]]
label = "a"
build = "postgres@17.2.0"
config = "ci"
[[column]]
label = "b"
build = "postgres@17.2.0"
config = "ci"
[insert]
load_rows = 3000
write_rows = 600
query_seconds = 0.3
warmup_s = 0.1
cleanup_wait_s = 0
steps = ["l.i0", "l.x", "qp100"]
"""


def test_a_colder_counted_window_is_undecided_with_the_reason(
    tmp_path: Path, workdir: Path
) -> None:
    lab = tmp_path / "lab.toml"
    lab.write_text(LAB)
    env = {**cli_env(workdir), TEST_SETTINGS_ENV: "shared_buffers=128kB"}
    out = subprocess.run(
        [sys.executable, "-m", "dbregress.cli.main", "run", str(lab)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert f"test hook {TEST_SETTINGS_ENV} sets shared_buffers=128kB" in out.stderr, out.stderr
    run, _ = run_record(tmp_path)
    # the time lane ran the lab's shared_buffers: its sessions read no block per query
    for label in ("a", "b"):
        result = step_results(run, f"{label}/r1")["qp100"]
        blocks = result["engine_stats"]["statistics"][state.PG_READ_BYTES] / state.PG_BLOCK
        assert blocks / result["q"]["count"] < 0.01, (blocks, result["q"])
    # the counting replays read blocks on most queries
    for label in ("a", "b"):
        for n in (1, 2):
            replay = json.loads((run / "cost" / label / f"r{n}.json").read_text())
            assert replay["status"] == "ok", replay
            step = replay["steps"]["qp100"]
            es = step["engine_state"]
            assert es["counted"]["kind"] == "postgres" and es["counted"]["hit_rate"] is None
            assert es["counted"]["misses_per_op"] > 1.0, es
            assert es["counted"]["misses_per_op"] > 10 * es["tolerance_misses_per_op"], es
            assert step["state_mismatch"] is not None
    verdicts = json.loads((run / "verdicts.json").read_text())
    (column,) = verdicts["comparisons"][0]["columns"]
    cost = {s["step"]: s for s in column["steps"]}["qp100"]["cost"]
    assert cost["verdict"] == "undecided", cost
    assert cost["reason"].startswith("the base's counted windows missed"), cost["reason"]
    assert "PostgreSQL 8 KB blocks read by the sessions' backends" in cost["reason"]
    for side in ("base", "column"):
        s = cost["state"][side]
        assert s["kind"] == "postgres" and s["replays"] == 2
        assert s["counted"] is None and s["timed"] is None  # PostgreSQL: no hit rate
        assert s["counted_misses_per_op"] > 1.0 and s["timed_misses_per_op"] < 0.01
        assert 0 < s["tolerance_misses_per_op"] < 1.0
        assert s["mismatch"] is not None
    for metric, c in cost["counts"].items():  # no metric is judged on the colder count
        assert c["verdict"] == "undecided", (metric, c)
    report = (run / "report.md").read_text()
    assert "PostgreSQL 8 KB blocks read by the sessions' backends: misses/op" in report
    assert "counted windows missed its timed window's state: no verdict" in report
    assert os.environ.get(TEST_SETTINGS_ENV) is None  # the hook stayed in the child
