"""Two runs of one lab measured by different loadgen binaries: the history draws the
method boundary between them, and the second run's report says the method differs
(real RocksDB; the second binary is the first with bytes appended, so it runs the same
code under another hash)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from dbregress.loadgen.client import find_binary
from tests.e2e.conftest import cli_env

pytestmark = pytest.mark.engine

LAB = """\
name = "method-e2e"
placement = "same"
benchmark = "kv"
repeats = 1
warmup_job = false
count = false
[[column]]
label = "a"
build = "rocksdb@10.2.1"
[[column]]
label = "b"
build = "rocksdb@10.2.1"
[kv]
keys = 5000
seconds = 0.3
warmup_s = 0.1
steps = ["fillseq", "readrandom"]
"""


def _dbregress(*args: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "dbregress.cli.main", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )


def test_a_new_loadgen_binary_is_a_method_boundary(tmp_path: Path, workdir: Path) -> None:
    lab = tmp_path / "lab.toml"
    lab.write_text(LAB)
    env = cli_env(workdir)
    first = _dbregress("run", str(lab), cwd=tmp_path, env=env)
    assert first.returncode == 0, first.stderr
    other = workdir / "dbregress-loadgen"
    shutil.copy2(find_binary(), other)
    with other.open("ab") as f:
        f.write(b"\0another build of the loadgen\0")
    second = _dbregress("run", str(lab), cwd=tmp_path, env={**env, "DBREGRESS_LOADGEN": str(other)})
    assert second.returncode == 0, second.stderr
    runs = sorted(p.parent for p in (tmp_path / "results").glob("*/run.json"))
    assert len(runs) == 2
    ids = [json.loads((r / "run.json").read_text())["method_identity"] for r in runs]
    assert ids[0]["loadgen_sha256"] != ids[1]["loadgen_sha256"]
    assert {k: v for k, v in ids[0].items() if k != "loadgen_sha256"} == {
        k: v for k, v in ids[1].items() if k != "loadgen_sha256"
    }
    run = runs[1]
    report = (run / "report.md").read_text()
    assert "The method differs from the lab's previous run: loadgen binary " in report
    history = _dbregress("history", "method-e2e", "--step", "readrandom", cwd=tmp_path, env=env)
    assert history.returncode == 0, history.stderr
    assert "| - | **method changed**: loadgen binary " in history.stdout
    rows = [line for line in history.stdout.splitlines() if line.startswith("| 20")]
    assert len(rows) == 2 and not any("▼" in r or "▲" in r for r in rows)
