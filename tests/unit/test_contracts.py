"""The contracts between the two programs, on both sides: the step specs the Python
side writes, the events the real loadgen prints (null driver) and the step results
built from them validate against the schemas."""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from dbregress.benchmarks.insert import engine_sizes, plan, step_spec
from dbregress.benchmarks.plan import StepPlan
from dbregress.collect import hostcpu
from dbregress.engines.base import Engine, EngineOptions
from dbregress.execution.step import collect_step
from dbregress.lab.file import InsertSizes, Placement
from dbregress.loadgen.client import EVENT_VERSION, SPEC_VERSION, Loadgen, find_binary
from dbregress.model.errors import LoadgenError

SCHEMAS = Path(__file__).parents[2] / "schema"
SCHEMA = json.loads((SCHEMAS / "step-spec.schema.json").read_text())
EVENTS = json.loads((SCHEMAS / "events.schema.json").read_text())
RESULT = json.loads((SCHEMAS / "step-result.schema.json").read_text())
CONN = {
    "driver": "postgres",
    "socket_dir": "/tmp/x",
    "port": 5432,
    "user": "postgres",
    "database": "postgres",
}


def test_every_insert_step_spec_is_valid() -> None:
    plans = plan(InsertSizes(clients=3, load_rows=1000, write_rows=100, query_seconds=2))
    assert [p.name for p in plans][:5] == ["l.i0", "l.x", "l.i1", "l.i2", "cleanup"]
    for p in plans:
        spec = {**step_spec(CONN, p, 3, 7), "spec_version": SPEC_VERSION, "wait_before_close": True}
        spec |= {"handshake": True, "warmup_s": 2.5, "inject_slowdown": 0.1}
        jsonschema.validate(spec, SCHEMA)
    q = {p.name: p for p in plans}["qp500"]
    assert q.step == "qp" and q.section["insert_rate"] == 500
    workload = step_spec(CONN, q, 3, 7)["workload"]
    assert workload == {"kind": "insert", "step": "qp", **q.section}


def test_a_spec_of_another_workload_or_version_is_refused() -> None:
    """The schema ties a step and its fields to their workload, and reads version 3 only."""
    load = plan(InsertSizes(load_rows=10))[0]
    spec = {**step_spec(CONN, load, 1, 7), "spec_version": SPEC_VERSION}
    jsonschema.validate(spec, SCHEMA)
    for bad in (
        {**spec, "spec_version": 2},
        {**spec, "workload": {**spec["workload"], "keys": 5}},  # a kv field
        {**spec, "workload": {**spec["workload"], "step": "fillseq"}},  # a kv step
        {**spec, "workload": {**spec["workload"], "kind": "micro"}},  # rows too small
        {**spec, "kv": {}},  # a version 2 section
    ):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(bad, SCHEMA)


def test_engine_sizes_fit_the_data_and_the_host() -> None:
    small = engine_sizes(InsertSizes(load_rows=1000, write_rows=100), 24 * 2**30)
    assert small.cache_mb == 128 and small.wal_mb == 1024
    big = engine_sizes(InsertSizes(clients=8, load_rows=10_000_000), 24 * 2**30)
    assert big.cache_mb == 6 * 1024  # capped at a quarter of memory


def test_every_micro_step_spec_is_valid() -> None:
    from dbregress.benchmarks import micro
    from dbregress.lab.file import MicroSizes

    mysql = {"driver": "mysql", "socket": "/tmp/s", "user": "root", "database": "test"}
    plans = micro.plan(MicroSizes(tables=2, rows=1000, seconds=1))
    assert len(plans) > 2 and plans[0].name == "load"
    for p in plans:
        for conn in (CONN, mysql):
            spec = {**micro.step_spec(conn, p, 2, 7), "spec_version": SPEC_VERSION}
            jsonschema.validate(spec, SCHEMA)
            workload = spec["workload"]
            assert spec["engine"] is conn and workload["kind"] == "micro"
            assert (workload["step"], workload["tables"], workload["rows"]) == (p.step, 2, 1000)


@pytest.fixture(scope="module")
def loadgen_built() -> None:
    try:
        find_binary()
    except LoadgenError as e:
        pytest.skip(str(e))


def null_spec(step: str, insert: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {
        "engine": {"driver": "null", "latency_us": 200},
        "workload": {"kind": "insert", "step": step, **insert},
        "clients": 2,
        "seed": 3,
        "report_interval_ms": 100,
        **extra,
    }


def follow(spec: dict[str, Any], tmp_path: Path) -> list[dict[str, Any]]:
    """Runs the loadgen through its handshake; every event, each checked on arrival."""
    lg = Loadgen(spec, tmp_path / "s.spec.json", tmp_path / "s.stderr", None)
    events: list[dict[str, Any]] = []
    try:
        for event in lg.events(poll_s=30):
            assert event is not None, f"no event for 30 s after {events[-1:]}"
            jsonschema.validate(event, EVENTS)
            events.append(event)
            if event["type"] == "ready":
                lg.go()
            elif event["type"] == "stopped":
                lg.check()
            elif event["type"] in ("summary", "fatal"):
                assert lg.release() == (0 if event["type"] == "summary" else 1)
    finally:
        lg.kill()
    return events


def kinds(events: list[dict[str, Any]]) -> list[str]:
    out: list[str] = []
    for e in events:
        if not out or out[-1] != e["type"]:
            out.append(e["type"])
    return out


@pytest.mark.usefixtures("loadgen_built")
def test_the_event_stream_of_a_warmed_up_step(tmp_path: Path) -> None:
    spec = null_spec("qr", {"duration_s": 0.4, "insert_rate": 100}, warmup_s=0.3)
    started = time.monotonic()
    events = follow(spec, tmp_path)
    whole_s = time.monotonic() - started
    assert events[0]["event_version"] == EVENT_VERSION
    assert kinds(events) == [
        "start",
        "ready",
        "interval",
        "measuring",
        "interval",
        "stopped",
        "summary",
    ]
    measuring = next(e for e in events if e["type"] == "measuring")
    stopped = next(e for e in events if e["type"] == "stopped")
    summary = events[-1]
    # The warm-up ends at a boundary fixed in advance (go + warmup_s) and the intervals
    # at fixed ticks, whenever the loadgen gets round to printing them: exact on any host.
    assert measuring["t_s"] == pytest.approx(spec["warmup_s"])
    assert summary["phases"]["warmup"]["wall_s"] == pytest.approx(spec["warmup_s"])
    ticks = [e["t_s"] for e in events if e["type"] == "interval"][:-1]  # the last: at stopped
    tick_s = spec["report_interval_ms"] / 1000
    assert ticks == pytest.approx([tick_s * n for n in range(1, len(ticks) + 1)])
    assert set(summary["phases"]) == {"setup", "warmup", "measured", "checks"}
    # The measured window: positive, from the warm-up's end to stopped, and (with the
    # warm-up) not longer than the whole run as this test timed it.
    elapsed = summary["elapsed_s"]
    assert elapsed > 0 and summary["phases"]["measured"]["wall_s"] == elapsed
    assert elapsed == pytest.approx(stopped["t_s"] - measuring["t_s"])
    assert measuring["t_s"] + elapsed <= whole_s


@pytest.mark.usefixtures("loadgen_built")
def test_the_event_stream_of_a_fixed_work_step(tmp_path: Path) -> None:
    events = follow(null_spec("l.i0", {"rows": 200}, warmup_s=5), tmp_path)
    order = kinds(events)
    assert order[:3] == ["start", "ready", "measuring"] and order[-2:] == ["stopped", "summary"]
    assert next(e for e in events if e["type"] == "measuring")["t_s"] == 0
    assert events[-1]["checks"]["rows_found"] == 400


@pytest.mark.usefixtures("loadgen_built")
def test_the_loadgen_defaults_follow_the_schema(tmp_path: Path) -> None:
    """A spec without warmup_s and report_interval_ms runs as the schema's defaults say
    (both show in the event stream; the ticks and the warm-up's end are set in advance)."""
    tick_s = SCHEMA["properties"]["report_interval_ms"]["default"] / 1000
    warmup_s = SCHEMA["properties"]["warmup_s"]["default"]
    spec = null_spec("qr", {"duration_s": 1.5 * tick_s, "insert_rate": 0})
    del spec["report_interval_ms"]
    assert "warmup_s" not in spec
    events = follow(spec, tmp_path)
    assert next(e for e in events if e["type"] == "measuring")["t_s"] == warmup_s
    assert events[-1]["phases"]["warmup"]["wall_s"] == warmup_s
    ticks = [e["t_s"] for e in events if e["type"] == "interval"][:-1]  # the last: at stopped
    assert ticks == pytest.approx([tick_s])  # one tick in one and a half intervals


class NullEngine(Engine):
    """The null driver as an engine; its "server" is a sleeping process, or none."""

    def __init__(self, embedded: bool, workdir: Path) -> None:
        self.embedded = embedded  # type: ignore[misc]
        self.options = EngineOptions(workdir, workdir / "server.log", "default")
        self.server = subprocess.Popen(["sleep", "60"])

    def start(self) -> None:
        pass

    def stop(self) -> None:
        self.server.kill()
        self.server.wait()

    def server_pid(self) -> int:
        return self.server.pid

    def check_alive(self) -> None:
        pass

    def connection(self) -> dict[str, Any]:
        return {"driver": "null", "latency_us": 200}

    def data_size_bytes(self) -> int:
        return 0

    def settings_applied(self) -> dict[str, str]:
        return {}

    def log_tail(self, lines: int = 30) -> str:
        return ""


@pytest.fixture(params=[False, True], ids=["server", "embedded"])
def engine(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[NullEngine]:
    e = NullEngine(request.param, tmp_path / "engine")
    yield e
    e.stop()


@pytest.mark.usefixtures("loadgen_built")
def test_a_step_result_covers_the_measured_window(engine: NullEngine, tmp_path: Path) -> None:
    insert = {"duration_s": 0.3, "insert_rate": 0}
    spec = null_spec("qp", insert, warmup_s=0.3, inject_slowdown=0.1)
    p = StepPlan("qp0", "qp", insert, duration_s=0.3)
    placement = Placement("unpinned", None, None)
    outcome = collect_step(
        engine, spec, tmp_path / "01-qp0", p, 60, placement, lambda e, r, q: None
    )
    r = outcome.result
    jsonschema.validate({"schema_version": 1, "column": "c", "repeat": 1, **r}, RESULT)
    window, host = r["window"], r["host"]
    assert window["warmup_s"] == pytest.approx(spec["warmup_s"])  # a boundary set in advance
    assert window["measured_s"] == r["elapsed_s"] > 0
    # both windows lie inside the whole step as the runner timed it (wall_s: to the ms)
    assert 0 < host["window_s"] <= r["wall_s"] + 0.001
    assert window["warmup_s"] + window["measured_s"] <= r["wall_s"] + 0.001
    assert r["inject_slowdown"] == 0.1
    assert r["q"]["value"] > 0 and r["per_op"]["server_cpu_us"] is not None
    assert (r["client"] is None) == engine.embedded
    assert all((ph["server_cpu_s"] is None) == engine.embedded for ph in r["phases"].values())
    # unpinned, the server and the loadgen may run on every CPU this process may use
    assert host["cpus"] == len(os.sched_getaffinity(0))
    # someone else's CPU time: the CPUs' busy time less the step's own
    own_s = sum(u["user_s"] + u["system_s"] for u in (r["server"], r["client"]) if u)
    own_s += host["harness_cpu_s"]  # dbregress's own: the harness, not a neighbour
    assert host["other_cpu_s"] == pytest.approx(max(0.0, host["busy_s"] - own_s))
    assert host["other_cpu_s"] <= host["busy_s"]
    assert (host["other_cpu_frac"] is None) == (host["window_s"] < hostcpu.MIN_WINDOW_S)
    # the series keeps the warm-up's intervals: it starts at the first tick
    ticks = sorted({point["t_s"] for point in outcome.series})
    assert ticks[0] == pytest.approx(spec["report_interval_ms"] / 1000)
    assert ticks[0] < window["warmup_s"] < ticks[-1]
