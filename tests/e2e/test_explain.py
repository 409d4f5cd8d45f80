"""dbregress explain on a tiny run: a PostgreSQL q-step and a RocksDB step counted under
callgrind over a small window, sampled by perf, stored, and shown by the report. No
timing is asserted, only that the figures exist, are consistent and are kept."""

from __future__ import annotations

import json
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from dbregress.explain import flame
from tests.e2e.conftest import dbregress, run_record

pytestmark = pytest.mark.engine

LAB = """\
name = "x"
placement = "same"
warmup_job = false

[[comparison]]
name = "pg"
benchmark = "insert"
[[comparison.column]]
label = "pg17"
build = "postgres@17.2.0"
config = "ci"
[comparison.insert]
clients = 1
load_rows = 3000
write_rows = 400
query_seconds = 0.5
warmup_s = 0.2
cleanup_wait_s = 0
steps = ["l.i0", "l.x", "l.i1", "qr100"]

[[comparison]]
name = "kv"
benchmark = "kv"
[[comparison.column]]
label = "r7"
build = "rocksdb@7.10.2"
[[comparison.column]]
label = "r10"
build = "rocksdb@10.2.1"
[comparison.kv]
keys = 5000
seconds = 0.5
short_seconds = 0.5
warmup_s = 0.2
steps = ["fillseq", "readrandom"]
"""


@pytest.mark.skipif(shutil.which("valgrind") is None, reason="needs valgrind (make debian)")
def test_explain_a_postgres_q_step_and_a_rocksdb_step(tmp_path: Path, workdir: Path) -> None:
    (tmp_path / "lab.toml").write_text(LAB)
    out = dbregress("run", str(tmp_path / "lab.toml"), cwd=tmp_path, workdir=workdir)
    assert out.returncode == 0, out.stderr
    run, record = run_record(tmp_path)
    args = ["explain", str(run), "--step", "qr100", "--step", "readrandom", "--ops", "40"]
    out = dbregress(*args, cwd=tmp_path, workdir=workdir)
    assert out.returncode == 0, out.stderr
    explain = json.loads((run / "explain" / "explain.json").read_text())
    assert explain["schema_version"] == 1 and explain["kind"] == "explain"
    assert explain["pmu"]["note"]
    got = {(e["step"], e["column"]): e for e in explain["results"]}
    assert set(got) == {("qr100", "pg17"), ("readrandom", "r7"), ("readrandom", "r10")}
    for (step, column), e in got.items():
        c = e["count"]
        assert (c["ops"], c["divisor"]) == (40, 40.0), (step, column)
        # at the middle of the run's measured window: past its warm-up's calls
        assert c["skip_ops"] > 20, (step, column)
        per_op = c["per_op"]
        assert per_op["instructions"] > 1000, (step, column)
        assert 0 <= per_op["ll_read_misses"] <= per_op["d1_read_misses"] + per_op["i1_misses"]
        assert per_op["branch_mispredictions"] <= per_op["branches"]
        # the functions' own costs add up to the total
        assert sum(c["objects"].values()) == pytest.approx(per_op["instructions"], rel=1e-6)
        assert c["caches"]["LL"].startswith("8388608 B")
        assert list((run / "explain" / column).glob(f"*-{step}/callgrind.out.*.gz"))
    pg = got[("qr100", "pg17")]["count"]
    assert "postgres" in pg["objects"] and pg["files"] >= 2  # the backend and its peers
    # The backends serving the loadgen's sessions, apart from the server's other processes
    assert pg["scope"] == "sessions", pg.get("scope")
    assert pg["background_per_op"]["instructions"] > 0
    # RocksDB, embedded: a file per thread; the loadgen's threads apart from RocksDB's
    r7 = got[("readrandom", "r7")]["count"]
    assert r7["scope"] == "engine-calls" and r7["files"] >= 2, (r7.get("scope"), r7["files"])
    assert isinstance(r7["background_per_op"].get("instructions"), float | int), r7  # may be 0
    assert all("-" in f.name for f in (run / "explain" / "r7").glob("*-readrandom/callgrind.*"))
    assert any(f["function"].startswith("_bt_") for f in pg["functions"][:30])
    r10 = got[("readrandom", "r10")]["count"]
    # only the engine's calls count: the loadgen's own code is not among the objects
    assert "dbregress-loadgen" not in r10["objects"]
    assert r10["client_per_op"]["instructions"] > r10["per_op"]["instructions"]
    assert max(r10["objects"], key=r10["objects"].get) == "librocksdbjni-linux64.so"
    if explain["profiler"]["available"]:
        svgs = [run / got[("readrandom", "r7")]["profile"]["flame"]]
        svgs.append(run / got[("readrandom", "r10")]["profile"]["diff"])
        svgs.append(run / got[("qr100", "pg17")]["profile"]["flame"])
        for svg in svgs:
            text = " ".join(t.text or "" for t in ET.parse(svg).getroot().iter())
            assert "rocksdb::" in text or "postgres" in text or "exec" in text, svg
    else:
        assert flame.perf_can_sample() or flame.missing_tools()
    out = dbregress("report", str(run), cwd=tmp_path, workdir=workdir)
    assert out.returncode == 0, out.stderr
    report = (run / "report.md").read_text()
    assert "## Explanations" in report and "### kv: readrandom" in report
    assert "LL read misses" in report and "Top functions on r10" in report
    assert record["status"] == "ok"


KNOWN = """\
name = "k"
placement = "same"
warmup_job = false
repeats = 4
order = "fixed"
[[column]]
label = "pg"
build = "postgres@17.2.0"
config = "ci"
[[column]]
label = "slow"
build = "postgres@17.2.0"
config = "ci"
inject_slowdown = 0.2
[insert]
clients = 1
load_rows = 2000
write_rows = 200
query_seconds = 1
warmup_s = 0.2
cleanup_wait_s = 0
steps = ["l.i0", "qp100"]
"""


# quiet: it judges timed figures (client CPU per operation), so it runs with the host to
# itself (Makefile); the others count under valgrind, which a busy host does not move.
@pytest.mark.quiet
def test_an_injected_slowdown_is_named_client_cpu(tmp_path: Path, workdir: Path) -> None:
    """The known cause: the loadgen busy-waits 0.2 of each call after it, the server is
    the same build and config. The run's own metric verdicts name it, no explain run
    needed; the cause is asked for whatever the QPS verdict (four repeats on a busy
    host may leave it undecided, client CPU per operation never is)."""
    from dbregress.analysis.compare import compare_run
    from dbregress.explain import cause
    from dbregress.report.explanations import evidence
    from dbregress.store.run import read_run

    (tmp_path / "lab.toml").write_text(KNOWN)
    out = dbregress("run", str(tmp_path / "lab.toml"), cwd=tmp_path, workdir=workdir)
    assert out.returncode == 0, out.stderr
    run, _ = run_record(tmp_path)
    data = read_run(run)
    # A busy host (CI, a benchmark next door) marks repeats disturbed and leaves them out
    # of the verdicts; the cause, not the host's noise, is under test here.
    for results in data.steps.values():
        for r in results:
            r["host"] = {}
    verdicts = compare_run(data.record, data.steps)
    key = (data.record["comparisons"][0]["name"], "slow", "qp100")
    e = evidence({}, data.record, verdicts, key)
    assert e.metrics["client_cpu_us"].verdict == "higher", (e, sorted(verdicts.qps))
    causes = cause.explain(e)
    assert causes[0].text == "more client CPU per operation (the load generator)"
    assert causes[0].figures["client_cpu_us"]["ratio"] > 1.1


AS_PART = """\
name = "e"
placement = "same"
warmup_job = false
explain = true
benchmark = "kv"
[[column]]
label = "r10"
build = "rocksdb@10.2.1"
[kv]
keys = 3000
seconds = 0.3
short_seconds = 0.3
warmup_s = 0.1
steps = ["fillseq", "readrandom"]
"""


@pytest.mark.skipif(shutil.which("valgrind") is None, reason="needs valgrind (make debian)")
def test_a_lab_can_explain_itself(tmp_path: Path, workdir: Path) -> None:
    """`explain = true`: the run is explained (every step, none being slower) before its
    report, which then has the Explanations section."""
    (tmp_path / "lab.toml").write_text(AS_PART)
    out = dbregress("run", str(tmp_path / "lab.toml"), cwd=tmp_path, workdir=workdir)
    assert out.returncode == 0, out.stderr
    run, record = run_record(tmp_path)
    explain = json.loads((run / "explain" / "explain.json").read_text())
    got = {(e["step"], e["column"]) for e in explain["results"]}
    assert got == {("fillseq", "r10"), ("readrandom", "r10")}
    report = (run / "report.md").read_text()
    assert "## Explanations" in report and "### kv: readrandom" in report
    assert "Explanations: " in out.stderr and record["status"] == "ok"
