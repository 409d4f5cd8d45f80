"""The cost verdict's history floor: a step's spread in the lab's earlier runs of the
same method widens its noise floor; runs of another method do not take part."""

from __future__ import annotations

import math
import random
from pathlib import Path

from dbregress import method
from dbregress.store.files import write_json
from dbregress.store.history import History, reindex
from dbregress.store.replays import save_replay
from dbregress.store.run import read_record
from tests.unit.test_history import make_run, replay


def _runs(root: Path, tmp: Path, sd: float, loadgen: str, first: int) -> None:
    rng = random.Random(first)
    for i in range(first, first + 3):
        run = make_run(
            root, tmp, f"run-{i}", f"2026-01-{i + 1:02d}T03:00:00+0000", {"base": 1, "head": 1}
        )
        record = read_record(run)
        record["method_identity"]["loadgen_sha256"] = loadgen
        write_json(run / "run.json", record)
        for label in ("base", "head"):
            for n in (1, 2, 3):
                cycles = {"l.i0": 10000.0 * math.exp(rng.gauss(0, sd))}
                save_replay(run, label, n, replay(label, n, cycles))


def test_the_history_floor_is_the_earlier_runs_spread_of_this_method(tmp_path: Path) -> None:
    root = tmp_path / "results"
    _runs(root, tmp_path, 0.01, "aaaa", 0)  # 1% spread, one method
    _runs(root, tmp_path, 0.0001, "bbbb", 3)  # 0.01%, another
    assert reindex(root) == []
    with History(root) as h:
        key_a = method.key(h.runs("nightly")[0].method)
        key_b = method.key(h.runs("nightly")[-1].method)
        wide = h.cost_noise("nightly", key_a, but="none")["estimated_cycles"]["insert/l.i0"]
        narrow = h.cost_noise("nightly", key_b, but="run-5")["estimated_cycles"]["insert/l.i0"]
        assert 0.005 < wide < 0.02 and narrow < 0.0005
        assert h.cost_noise("nightly", None, but="none") == {}
