"""RocksDB's cost lane counts the engine, not its client: a column whose loadgen
busy-waits after every call (`inject_slowdown = 0.2`: the client slower, RocksDB the
same build) against the same build without it. The cost lane must call every counted
step `same` (the busy-wait runs in the loadgen, outside RocksDB's calls), while the
loadgen's whole-thread figure (`client_per_op`) shows the added client work."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.e2e.conftest import dbregress, run_record

pytestmark = pytest.mark.engine

STEPS = ("overwritesome", "readrandom")


def _lab(tmp_path: Path) -> Path:
    text = f"""\
name = "slow-client"
placement = "same"
benchmark = "kv"
repeats = 1
warmup_job = false
count = true
count_replays = 2
count_replays_max = 2
count_steps = {json.dumps(list(STEPS))}
[[column]]
label = "base"
build = "rocksdb@10.2.1"
[[column]]
label = "slow-client"
build = "rocksdb@10.2.1"
inject_slowdown = 0.2
[kv]
keys = 20000
seconds = 0.3
warmup_s = 0.1
steps = ["fillseq", "overwritesome", "readrandom"]
"""
    path = tmp_path / "lab.toml"
    path.write_text(text)
    return path


def test_an_injected_client_slowdown_is_not_engine_cost(tmp_path: Path, workdir: Path) -> None:
    out = dbregress("run", str(_lab(tmp_path)), cwd=tmp_path, workdir=workdir)
    assert out.returncode == 0, out.stderr
    run, _ = run_record(tmp_path)
    verdicts = json.loads((run / "verdicts.json").read_text())
    (column,) = verdicts["comparisons"][0]["columns"]
    by_step = {s["step"]: s for s in column["steps"]}
    for step in STEPS:
        cost = by_step[step]["cost"]
        assert cost["verdict"] == "same", (step, cost)
        # the time lane's figure for the report (one repeat: no verdict is asked of it)
        print(step, "time ratio", by_step[step].get("ratio"), "cost ratio", cost["ratio"])

    def figures(label: str, step: str, key: str) -> list[float]:
        got = []
        for path in sorted((run / "cost" / label).glob("r*.json")):
            replay = json.loads(path.read_text())
            assert replay["status"] == "ok", replay
            figures = replay["steps"][step]
            assert figures["scope"] == "engine-calls"
            got.append(figures[key]["instructions"])
        return got

    for step in STEPS:
        engine = figures("slow-client", step, "per_op")
        base_client = figures("base", step, "client_per_op")
        slow_client = figures("slow-client", step, "client_per_op")
        # the busy-wait's instructions are the client's: its whole-thread figure rises
        # above the base's, by more than 5% of the engine's cost per operation
        assert min(slow_client) > max(base_client), (step, base_client, slow_client)
        assert min(slow_client) - max(base_client) > 0.05 * max(engine), step
