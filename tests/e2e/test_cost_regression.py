"""A known server-side regression from outside the tool: a user build whose server runs
with a preloaded library that adds a fixed, counted number of instructions to every
send() (tests/fixtures/sendcost.c). The cost lane must call every query step `slower`,
with an increase per operation that agrees with the library's own count times the
responses per operation, and `--fail-on slower:cost` must fail on it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.e2e.conftest import dbregress, run_record
from tests.fixtures.userbuild import (
    build_library,
    counted_cost_per_call,
    postgres_basedir,
    wrap_mariadb,
    wrap_postgres,
)

pytestmark = pytest.mark.engine

# The query steps: each operation is answered by at least one response. Two of the
# Insert Benchmark's six, after the load and the indexes they query: the other four run
# the same statements at other insert rates, and each q-step counted under valgrind
# costs a replay about 10 seconds. Only they are counted (count_steps): the load and
# the indexes run in each replay, uncounted. Of the microbenchmarks, one statement per
# operation and a transaction of several (more responses per operation).
POSTGRES_QUERIES = ("qr100", "qp100")
MICRO_QUERIES = ("point-query", "read-only-range10")


def _check(run: Path, steps: tuple[str, ...], per_send: float) -> None:
    verdicts = json.loads((run / "verdicts.json").read_text())
    (column,) = verdicts["comparisons"][0]["columns"]
    base, label = verdicts["comparisons"][0]["base"], column["label"]
    by_step = {s["step"]: s for s in column["steps"]}
    for step in steps:
        cost = by_step[step]["cost"]
        assert cost["verdict"] == "slower", (step, cost)
        instr = cost["counts"]["instructions"]
        added = instr["value"] - instr["base"]
        # responses per operation, counted in the slow build's own windows: the
        # library's instructions per operation over its cost per send()
        sends = _library_per_op(run, label, step) / per_send
        assert sends >= 0.5, (step, sends)
        assert not _library_per_op(run, base, step)
        assert abs(added / (per_send * sends) - 1) <= 0.10, (step, added, per_send, sends)


def _library_per_op(run: Path, label: str, step: str) -> float:
    values = []
    for path in sorted((run / "cost" / label).glob("r*.json")):
        steps = json.loads(path.read_text())["steps"]
        if step not in steps:
            continue  # an added replay that counted only other steps
        objects = steps[step]["objects"]
        values.append(sum(v for k, v in objects.items() if k.startswith("libsendcost")))
    return sum(values) / len(values)


def _lab(tmp: Path, body: str) -> Path:
    path = tmp / "lab.toml"
    head = 'name = "sendcost"\nplacement = "same"\nrepeats = 1\nwarmup_job = false\n'
    # count_replays_max = count_replays: steps the test does not judge (a load step
    # whose replays differ by more than cost_band) get no added replays
    path.write_text(head + "count = true\ncount_replays = 2\ncount_replays_max = 2\n" + body)
    return path


def test_a_preloaded_send_cost_is_slower_in_the_cost_lane_postgres(
    tmp_path: Path, workdir: Path
) -> None:
    lib = build_library(workdir)
    per_send = counted_cost_per_call(lib)
    slow = wrap_postgres(postgres_basedir("17.2.0"), workdir / "pg-slow", lib)
    lab = _lab(
        tmp_path,
        f"""benchmark = "insert"
count_steps = [{", ".join(f'"{s}"' for s in POSTGRES_QUERIES)}]
[[column]]
label = "pg17"
build = "postgres@17.2.0"
config = "ci"
[[column]]
label = "pg17-sendcost"
build = "postgres@{slow}"
config = "ci"
[insert]
load_rows = 3000
write_rows = 600
query_seconds = 0.3
warmup_s = 0.1
cleanup_wait_s = 0
steps = ["l.i0", "l.x", {", ".join(f'"{s}"' for s in POSTGRES_QUERIES)}]
""",
    )
    out = dbregress("run", str(lab), "--fail-on", "slower:cost", cwd=tmp_path, workdir=workdir)
    assert out.returncode == 1, out.stderr
    assert "fail-on slower:cost: FAILED" in out.stderr and ", cost)" in out.stderr
    run, _ = run_record(tmp_path)
    _check(run, POSTGRES_QUERIES, per_send)


def test_a_preloaded_send_cost_is_slower_in_the_cost_lane_mariadb(
    tmp_path: Path, workdir: Path
) -> None:
    lib = build_library(workdir)
    per_send = counted_cost_per_call(lib)
    slow = wrap_mariadb(workdir / "mariadb-slow", lib)
    lab = _lab(
        tmp_path,
        f"""benchmark = "micro"
[[column]]
label = "mariadb"
build = "mariadb@system"
config = "ci"
[[column]]
label = "mariadb-sendcost"
build = "mysql@{slow}"
config = "ci"
[micro]
tables = 1
rows = 2000
seconds = 0.3
warmup_s = 0.1
cleanup_wait_s = 0
reads_before_writes = false
only = {list(MICRO_QUERIES)!r}
""",
    )
    out = dbregress("run", str(lab), "--fail-on", "slower", cwd=tmp_path, workdir=workdir)
    assert out.returncode == 1, out.stderr
    run, _ = run_record(tmp_path)
    _check(run, MICRO_QUERIES, per_send)
