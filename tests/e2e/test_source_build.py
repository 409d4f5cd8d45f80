"""PostgreSQL built from Debian's source package (`make sources` unpacks it) in two
flavors, a second request of one of them a cache hit, and a small lab run on both builds
with both lanes. The second flavor is the lab's own, `rel` linked with `-z now`: the
same compiler flags, so on a fresh machine only the first build compiles cold and the
second takes its objects from ccache and links them anew (other flavors are built by
the bench/ scripts). Later runs find both builds in the cache."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import cast

import pytest

from dbregress import provision
from dbregress.analysis.compare import disturbance, disturbed_jobs
from dbregress.provision import BuildSpec
from dbregress.shapes.step_result import StepResultJson
from tests.e2e.conftest import cli_env, dbregress, run_record, step_results

pytestmark = pytest.mark.engine

DEBIAN_SOURCES = Path(os.environ.get("DEBIAN_SOURCES", "/var/cache/dbregress/debian-src"))
FLAVORS = ("rel", "rel_bindnow")
# The lab's flavor: shipped rel's compiler flags (flavors.toml), another link.
BINDNOW = """[flavors.postgres.rel_bindnow]
cflags = "-O2 -g1"
ldflags = "-Wl,-z,now"
"""


def debian_postgres_tree() -> Path:
    trees = sorted(DEBIAN_SOURCES.glob("postgresql-15-*/configure"))
    assert trees, f"no PostgreSQL source tree under {DEBIAN_SOURCES}: run `make sources`"
    return trees[-1].parent


def test_postgres_from_debian_source_in_two_flavors(tmp_path: Path, workdir: Path) -> None:
    tree = debian_postgres_tree()
    specs = [f"postgres@src:{tree}+{flavor}" for flavor in FLAVORS]
    fetched = subprocess.run(
        [sys.executable, "-m", "dbregress.cli.main", "fetch", specs[0]],
        cwd=tmp_path,
        env=cli_env(workdir),
        capture_output=True,
        text=True,
        timeout=3600,
    )
    assert fetched.returncode == 0, fetched.stderr
    build = provision.fetch(BuildSpec.parse(specs[0]))
    assert build.version_string.startswith("postgres (PostgreSQL) 15."), build
    assert build.identity["flavor"] == "rel" and build.identity["tree"] == str(tree)
    assert build.identity["cache_hit"] == "yes"
    # a second request: a cache hit in seconds, no compiler run (its log untouched)
    log = Path(json.loads((build.basedir / "dbregress-build.json").read_text())["log"])
    before = log.stat().st_mtime_ns
    t0 = time.monotonic()
    again = provision.fetch(BuildSpec.parse(specs[0]))
    assert time.monotonic() - t0 < 30 and again.basedir == build.basedir
    assert log.stat().st_mtime_ns == before

    lab = tmp_path / "lab.toml"
    lab.write_text(
        f"""name = "flavors"
placement = "same"
repeats = 2
warmup_job = false
count = true
count_replays = 2
count_replays_max = 2
count_steps = ["l.x", "qr100", "qp100"]
benchmark = "insert"
[[column]]
label = "rel"
build = "{specs[0]}"
config = "ci"
[[column]]
label = "rel_bindnow"
build = "{specs[1]}"
config = "ci"
{BINDNOW}
[insert]
load_rows = 3000
write_rows = 600
query_seconds = 0.3
warmup_s = 0.2
cleanup_wait_s = 0
steps = ["l.i0", "l.x", "qr100", "qp100"]
"""
    )
    out = dbregress("run", str(lab), cwd=tmp_path, workdir=workdir)
    assert out.returncode == 0, out.stderr
    run, record = run_record(tmp_path)
    assert record["status"] == "ok"
    assert {b["flavor"] for b in record["builds"].values()} == set(FLAVORS)
    keys = {b["cache_key"] for b in record["builds"].values()}
    assert len(keys) == 2  # two builds (tests/unit/test_source_key.py: link flags alone differ)
    assert all(b["source"] == "src" and b["tree"] == str(tree) for b in record["builds"].values())
    verdicts = json.loads((run / "verdicts.json").read_text())
    (column,) = verdicts["comparisons"][0]["columns"]
    steps = column["steps"]
    assert len(steps) == 4
    # the time lane judged every step, the cost lane the steps it counted (the load runs
    # uncounted in each replay) (a verdict, decided or not, from real measurements);
    # two replays a column decide (their counts agree within 0.05%); no replays are
    # added, which once took the lane from 57 s to 125 s
    # (a ratio unless the host, busy with other tests, left a side's repeats out as disturbed)
    results = [
        cast(StepResultJson, result)
        for label in FLAVORS
        for r in (1, 2)
        for result in step_results(run, f"{label}/r{r}").values()
    ]
    jobs_out = disturbed_jobs(results)
    disturbed = {
        r["step"] for r in results if disturbance(r) or (r["column"], r["repeat"]) in jobs_out
    }
    assert all(s["ratio"] is not None or s["step"] in disturbed for s in steps)
    counted = [s for s in steps if s["step"] != "l.i0"]
    assert all(s["cost"] is not None and s["cost"]["ratio"] is not None for s in counted)
    assert sum(s["cost"]["verdict"] != "undecided" for s in counted) >= 2
