"""A count per query does not move with the host's speed: the cost lane's windows of
a q-step whose time lane ran at two very different rates (8,224 and 4,412 queries per
second, as two points of one bisection on a loaded host did) count the same figure on
a real PostgreSQL, within the noise floor. Before the writers' pace was pinned
(benchmarks' counted_pace, explainer.pinned_window) the window ran them at the base's
time-lane rate, so the slower host's count held nearly twice the writes per query:
at these sizes 131,393 instructions per query at 8,224/s against 144,743 at 4,412/s
(+10.2%), where five replays at the pinned window counted 140,775-140,934 (0.11%).
One replay at each pace differs by the replays' own noise (sd FLOOR_SD each, so sqrt(2)
FLOOR_SD for the difference; CI once saw 0.27%), so the test bounds it at five of those
sds (0.71%), a fourteenth of what an unpinned pace moved, and checks the window itself,
which must not depend on the rate at all."""

from __future__ import annotations

import math
import threading
from pathlib import Path
from typing import Any

import pytest

from dbregress import provision
from dbregress.analysis.cost import FLOOR_SD
from dbregress.cost.planning import LANE_SIZING
from dbregress.cost.replay import Replay, count_replay
from dbregress.explain.explainer import windows
from dbregress.lab.file import load_lab

pytestmark = pytest.mark.engine

STEP = "qr1000"  # the most writes per query: where the pace moved a count most
LAB = f"""name = "pace"
placement = "same"
repeats = 1
count = true
benchmark = "insert"
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
steps = ["l.i0", "l.x", "{STEP}"]
"""


def _time_lane(rate: float) -> list[dict[str, Any]]:
    """Both columns' step results as a time lane at `rate` queries/s records them."""
    return [
        {
            "column": label,
            "step": STEP,
            "q": {"op": "range_query", "count": int(rate * 0.3)},
            "ops": {"range_query": {"ops": int(rate * 0.3), "ops_per_s": rate}},
        }
        for label in ("a", "b")
    ]


def test_a_q_step_counted_at_two_time_lane_paces_gives_the_same_count(
    tmp_path: Path, workdir: Path
) -> None:
    path = tmp_path / "lab.toml"
    path.write_text(LAB)
    lab = load_lab(path)
    comp = lab.comparisons[0]
    base = comp.base
    build = provision.fetch(base.build)
    per_op = []
    plans = []
    for n, rate in enumerate((8224.0, 4412.0), start=1):
        choices = windows(
            comp, [STEP], base.label, _time_lane(rate), sizing=LANE_SIZING, own_pace=False
        )
        plans.append(choices)
        record = count_replay(
            lab,
            Replay(comp, base, n),
            build,
            choices,
            workdir / f"count{n}",
            tmp_path / f"out{n}",
            threading.Event(),
        )
        assert record["status"] == "ok", record.get("error")
        per_op.append(record["steps"][STEP]["per_op"])
    # the same window at both paces: the same operations at the same pace
    assert plans[0] == plans[1]
    fast, slow = per_op
    for metric in ("instructions", "estimated_cycles"):
        # two replays of one window, apart by no more than their own noise
        ratio = slow[metric] / fast[metric]
        assert abs(ratio - 1) <= 5 * math.sqrt(2) * FLOOR_SD, (metric, fast[metric], slow[metric])
