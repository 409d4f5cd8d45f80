"""One measurement identity per comparison's counts: a lab's counting replays go only to
the workers whose dbregress, loadgen binary, valgrind and libc are the lab's identity
(the coordinator's own when it could count, else the most workers'); a fleet without a
worker of that identity is refused, naming the fields that differ. The routing is tested
on a real (in-process) Dask scheduler with two workers."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any, cast

import pytest

from dbregress.fleet.host import (
    COUNT_IDENTITY,
    fingerprint,
    identity_key,
    measurement_identity,
    methods_unlike,
)
from dbregress.fleet.host import count_identity as choose
from dbregress.fleet.lane import FleetLane, replay_resources
from dbregress.fleet.worker import resources
from dbregress.lab.file import load_lab
from dbregress.method import identity as method
from dbregress.model.errors import LabError
from dbregress.store.files import write_json
from dbregress.store.history import History, host_fingerprint, reindex
from dbregress.store.history_rows import fingerprint_of
from dbregress.store.run import read_record
from tests.unit.test_fleet import LAB
from tests.unit.test_history import HOST, make_run


def worker(name: str, valgrind: str = "valgrind-3.22.0", **kw: Any) -> dict[str, Any]:
    fp = {
        "name": name,
        "cpu_count": 2,
        "group": "g",
        "valgrind": True,
        "dbregress": "0.1.0",
        "loadgen_sha256": "ab" * 32,
        "valgrind_version": valgrind,
        "libc": "glibc 2.39",
        "cpu_features": "haswell family 6 model 60, cpuid fcf7eafdaeb91fbc",
        **kw,
    }
    fp["count_key"] = identity_key(fp)
    return fp


def coordinator(**kw: Any) -> dict[str, Any]:
    fp = worker("coordinator", **kw)
    return {**{k: fp[k] for k in COUNT_IDENTITY}, "chosen_by": "the coordinator's own"}


def test_the_coordinators_identity_picks_the_workers_that_count() -> None:
    hosts = {"w1": worker("w1"), "w2": worker("w2", "valgrind-3.21.0")}
    identity = choose(coordinator(), hosts)
    assert identity["hosts"] == ["w1"]
    assert identity["valgrind_version"] == "valgrind-3.22.0"
    assert identity["key"] == hosts["w1"]["count_key"] != hosts["w2"]["count_key"]
    assert identity["left_out"] == {"w2": "valgrind_version"}

    # No worker has the coordinator's identity: refused, naming what differs.
    with pytest.raises(LabError) as e:
        choose(coordinator(valgrind="valgrind-3.23.0"), hosts)
    message = str(e.value)
    assert "valgrind_version: wanted valgrind-3.23.0" in message
    assert "w1 valgrind-3.22.0" in message and "w2 valgrind-3.21.0" in message
    assert "libc:" not in message and "loadgen_sha256:" not in message  # these agree

    # A worker without valgrind or a loadgen counts nothing, whatever its versions.
    with pytest.raises(LabError, match="no worker of the fleet has both"):
        choose(coordinator(), {"w1": worker("w1", valgrind=False, loadgen_sha256=None)})


def test_without_the_coordinators_identity_the_most_workers_decide() -> None:
    hosts = {
        "a": worker("a"),
        "b": worker("b"),
        "c": worker("c", libc="glibc 2.36"),
    }
    identity = choose(None, hosts)
    assert identity["hosts"] == ["a", "b"] and identity["chosen_by"] == "the most workers'"
    assert identity["left_out"] == {"c": "libc"}
    # As many of one identity as of another: no identity speaks for the fleet.
    with pytest.raises(LabError, match=re.escape("libc: a glibc 2.39, c glibc 2.36")):
        choose(None, {"a": hosts["a"], "c": hosts["c"]})


def test_a_workers_fingerprint_carries_its_measurement_identity() -> None:
    fp = fingerprint("here", None, None)
    mine = measurement_identity()
    assert {k: fp[k] for k in COUNT_IDENTITY} == mine
    assert mine["libc"] and str(mine["libc"]).split()[0] in ("glibc", "libc", "musl")
    assert fp["count_key"] == identity_key(mine)


def _where(_i: int) -> str:
    from distributed import get_worker

    return str(get_worker().name)


def test_replays_go_only_to_workers_of_the_labs_identity(tmp_path: Path) -> None:
    """Two workers whose valgrind differs: every replay lands on the matching one."""
    from distributed import Client, Scheduler, Worker

    hosts = {"w1": worker("w1", "valgrind-3.21.0"), "w2": worker("w2")}
    identity = choose(coordinator(), hosts)
    assert identity["hosts"] == ["w2"]
    lab_path = tmp_path / "f.toml"
    lab_path.write_text(LAB)
    lane = FleetLane(tmp_path, load_lab(lab_path), print, None, hosts, identity)
    assert list(lane.hosts) == ["w2"]  # its CPUs are the lane's, w1's are not

    async def main() -> list[str]:
        async with Scheduler(host="127.0.0.1", port=0, dashboard=False) as s:
            workers = [
                Worker(
                    s.address,
                    name=name,
                    nthreads=2,
                    resources=resources(name, "g", 2, fp["count_key"]),
                    dashboard=False,
                    memory_limit=0,
                    local_directory=str(tmp_path / name),
                )
                for name, fp in hosts.items()
            ]
            await asyncio.gather(*workers)
            try:
                async with Client(s.address, asynchronous=True) as client:
                    futures = [
                        client.submit(_where, i, pure=False, resources=replay_resources(identity))
                        for i in range(12)
                    ]
                    return list(await client.gather(futures))
            finally:
                await asyncio.gather(*(w.close() for w in workers))

    ran_on = asyncio.run(main())
    assert len(ran_on) == 12
    assert set(ran_on) == {"w2"}


def test_a_worker_whose_valgrind_presents_another_cpu_counts_nothing() -> None:
    """glibc and RocksDB choose code paths by CPUID: a worker on which valgrind presents
    another processor counts other code, so it gets none of the lab's replays."""
    hosts = {"w1": worker("w1"), "w2": worker("w2", cpu_features="skylake-avx512, cpuid 00")}
    identity = choose(coordinator(), hosts)
    assert identity["hosts"] == ["w1"] and identity["left_out"] == {"w2": "cpu_features"}
    assert "cpu_features" in COUNT_IDENTITY
    assert measurement_identity()["cpu_features"] == method.identity()["cpu_features"]


WORKER_FACTS = {
    "hostname": "bench-7",
    "machine": "x86_64",
    "cpu_model": "Worker CPU",
    "cpu_count": 16,
    "mem_gib": 64,
}


def test_fleet_time_rows_are_keyed_by_the_worker_that_measured_them(tmp_path: Path) -> None:
    """A fleet run's run.json is the coordinator's (its host, its method); each job's
    entry names the worker that ran it and carries that worker's method. The history's
    time rows take both from there, so a series groups the figures by the machine class
    and method that measured them."""
    root = tmp_path / "results"
    run = make_run(
        root, tmp_path, "fleet-run", "2026-03-01T03:00:00+0000", {"base": 1e3, "head": 1e3}
    )
    record = read_record(run)
    worker_method = {**method.identity(), "dbregress": "0.1.0+g7654321"}  # the worker's
    record["hosts"] = {"w7": cast(Any, {**WORKER_FACTS, "name": "w7"})}
    for entry in record["jobs"].values():
        entry["host"] = "w7"
        entry["method_identity"] = worker_method
    write_json(run / "run.json", record)
    assert reindex(root) == []
    with History(root) as h:
        (info,) = h.runs("nightly")
        assert info.host == host_fingerprint(HOST)  # the run: the coordinator's host
        series = h.series("nightly", step="l.i0", lane="time")
        assert {s.host for s in series} == {fingerprint_of(WORKER_FACTS)}
        points = [p for s in series for p in s.points]
        assert {p.hostname for p in points} == {"bench-7"}
        assert {p.method for p in points} == {method.key(worker_method)}
        assert method.key(info.method) not in (None, method.key(worker_method))
        # Asked for by host, the worker's class finds them and the coordinator's does not.
        assert h.series("nightly", lane="time", host="bench-7")
        assert not h.series("nightly", lane="time", host=host_fingerprint(HOST))


def test_a_resumed_comparison_goes_on_only_where_hosts_measure_as_before() -> None:
    """The finished jobs of a comparison carry their workers' method identities; a
    resumed run whose hosts now measure another way (a worker upgraded between the
    attempts) is refused, naming the job, the host and what differs."""
    mine = method.identity()
    here = worker("w1", valgrind=mine["valgrind"] or "none")
    here.update(
        dbregress=mine["dbregress"],
        loadgen_sha256=mine["loadgen_sha256"],
        libc=mine["libc"],
        cpu_features=mine.get("cpu_features"),
    )
    done = {"comparison": "c", "status": "ok", "method_identity": mine, "host": "w1"}
    jobs = {"a/r1": done, "x/r1": {**done, "comparison": "other"}}
    assert methods_unlike(jobs, {"w1": here}, "c") is None  # type: ignore[arg-type]
    upgraded = {**here, "dbregress": "0.2.0"}
    why = methods_unlike(jobs, {"w1": upgraded}, "c")  # type: ignore[arg-type]
    assert why is not None and why.startswith("job a/r1 was measured by another method than w1")
    assert f"dbregress {mine['dbregress']} -> 0.2.0" in why
    assert methods_unlike(jobs, {"w1": upgraded}, "none") is None  # type: ignore[arg-type]
    running = {"a/r1": {**done, "status": "running"}}  # run again from its start anyway
    assert methods_unlike(running, {"w1": upgraded}, "c") is None  # type: ignore[arg-type]
