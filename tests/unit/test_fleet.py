"""The fleet's parts that need no Dask: which hosts may be compared or are too noisy, and
how the coordinator's receiver applies a worker's messages (a lost attempt superseded,
its late messages ignored, nothing written outside the run folder)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from dbregress.fleet.host import identity_group, noisy_hosts, unlike
from dbregress.fleet.ship import Receiver, ShippingWriter
from dbregress.lab.file import load_lab
from dbregress.method import identity as method
from dbregress.model.errors import StoreError
from dbregress.model.records import StepResult
from dbregress.store.run import RunWriter
from tests.step_records import native

LAB = """\
name = "f"
placement = "unpinned"
repeats = 1
warmup_job = false
benchmark = "kv"
[[column]]
label = "a"
build = "null@0"
[[column]]
label = "b"
build = "null@0"
[kv]
keys = 1000
steps = ["fillseq", "readrandom"]
"""


def host(name: str, cv: float | None = None, **kw: Any) -> dict[str, Any]:
    fp = {
        "name": name,
        "cpu_model": "EPYC",
        "cpu_count": 8,
        "mem_gib": 32,
        "machine": "x86_64",
        "kernel_release": "6.1",
        "governor": "performance",
        "virt": "kvm",
        "calibration": {"median_cv": cv} if cv is not None else None,
        **kw,
    }
    fp["group"] = identity_group(fp)
    return fp


def test_identical_hosts_share_a_group_and_others_do_not() -> None:
    assert host("a")["group"] == host("b")["group"]
    assert host("a")["group"] != host("c", cpu_count=16)["group"]
    assert host("a")["group"] != host("d", virt="none")["group"]
    hosts = {"a": host("a"), "c": host("c", cpu_count=16)}
    assert unlike(hosts, ["a", "c"]) == ["cpu_count"]


def test_a_host_far_noisier_than_its_group_is_left_out() -> None:
    hosts = {n: host(n, cv) for n, cv in (("a", 0.02), ("b", 0.025), ("c", 0.021), ("d", 0.09))}
    found = noisy_hosts(hosts)
    assert list(found) == ["d"]
    assert "9.0%" in found["d"] and "left out" in found["d"]
    # Not judged without a calibration, nor against a group of itself.
    assert noisy_hosts({"a": host("a", 0.02), "x": host("x")}) == {}
    assert noisy_hosts({"d": host("d", 0.09)}) == {}


@pytest.fixture
def setup(tmp_path: Path) -> tuple[Any, RunWriter, Receiver, list[tuple[str, int]]]:
    lab_path = tmp_path / "f.toml"
    lab_path.write_text(LAB)
    lab = load_lab(lab_path)
    writer = RunWriter(tmp_path / "results", lab, {"hostname": "coordinator"})
    jobs = {j.name: j for j in lab.round(lab.comparisons[0], 1)}
    indexed: list[tuple[str, int]] = []
    receiver = Receiver(
        writer, jobs, lambda r, i: indexed.append((r.job.label, i)), lambda line: None
    )
    return lab, writer, receiver, indexed


def _attempt(
    tmp_path: Path, lab: Any, writer: RunWriter, attempt: str, sent: list[dict[str, Any]]
) -> ShippingWriter:
    w = ShippingWriter(
        tmp_path / f"scratch-{attempt}", lab, writer.record, sent.append, "c/round 1", attempt
    )
    return w


def _step(label: str, q: float) -> StepResult:
    figures = {"op": "put", "unit": "ops", "count": int(q), "value": q}
    return native({"column": label, "repeat": 1, "step": "fillseq", "q": figures})


def test_a_new_attempt_replaces_what_a_lost_one_sent(tmp_path: Path, setup: Any) -> None:
    lab, writer, receiver, indexed = setup
    job_a = next(j for j in receiver.jobs.values() if j.column.label == "a")
    first: list[dict[str, Any]] = []
    lost = _attempt(tmp_path, lab, writer, "one", first)
    lost.start([job_a], "h1")
    lost.set_job(job_a, {"status": "running"})
    lost.write_step(job_a, 1, _step("a", 100.0), [], "")
    for msg in first:
        receiver.apply(msg)
    stored = writer.path / "a" / "r1" / "steps" / "01-fillseq.json"
    assert json.loads(stored.read_text())["q"]["value"] == 100.0
    assert writer.record["jobs"]["a/r1"]["host"] == "h1"

    second: list[dict[str, Any]] = []
    again = _attempt(tmp_path, lab, writer, "two", second)
    again.start([job_a], "h2")
    receiver.apply(second[0])  # the new start: what the lost attempt wrote is dropped
    assert not stored.exists()
    assert "a/r1" not in writer.record["jobs"]
    receiver.apply({**first[-1], "seq": 99})  # a late message of the lost attempt
    assert not stored.exists()

    again.set_job(job_a, {"status": "running"})
    again.write_step(job_a, 1, _step("a", 200.0), [], "")
    again.end_job(job_a, "ok")
    # The task's return carries every message: those the topic never delivered count too.
    receiver.finish({"unit": "c/round 1", "messages": second})
    assert json.loads(stored.read_text())["q"]["value"] == 200.0
    entry = writer.record["jobs"]["a/r1"]
    assert entry == {"status": "ok", "host": "h2", "method_identity": method.identity()}
    assert indexed == [("a", 1), ("a", 1)]
    receiver.apply({**second[-1], "seq": 100})  # after the unit ended: ignored
    assert writer.record["jobs"]["a/r1"]["status"] == "ok"


def test_a_file_outside_the_run_folder_is_refused(setup: Any) -> None:
    _lab, writer, receiver, _ = setup
    start = {"unit": "u", "attempt": "x", "seq": 0, "kind": "start", "jobs": [], "host": "h"}
    receiver.apply(start)
    bad = {"unit": "u", "attempt": "x", "seq": 1, "kind": "cache", "failure": None}
    with pytest.raises(StoreError, match="outside the run folder"):
        receiver.apply({**bad, "files": {"../evil": b"x"}})
    with pytest.raises(StoreError, match="outside the run folder"):
        receiver.apply({**bad, "seq": 2, "files": {"/etc/evil": b"x"}})
    assert not (writer.path.parent / "evil").exists()
