"""An embedded engine's cost from callgrind's call graph: a hand-written file of one
client thread (the loadgen calling RocksDB's C API, its own busy-wait, a library calling
back into RocksDB) read, and its call arcs summed into the engine's work and nothing
else (explain/callgrind.py engine_calls, explain/count_figures.py figures)."""

from __future__ import annotations

from pathlib import Path

import pytest

from dbregress.benchmarks.plan import StepPlan
from dbregress.cost.replay import _kept
from dbregress.explain import callgrind
from dbregress.explain.count_figures import estimated_cycles, figures, per_op
from dbregress.explain.jobs import Choice
from dbregress.explain.window_split import ENGINE_CALLS, LOADGEN_OBJECT

DATA = Path(__file__).parents[1] / "data" / "callgrind" / "client-thread.out"
LOADGEN = "/x/target/release/dbregress-loadgen"
ROCKSDB = "/c/librocksdbjni-linux64.so"
LIBC = "/lib/x86_64-linux-gnu/libc.so.6"
LIBSTDCXX = "/usr/lib/x86_64-linux-gnu/libstdc++.so.6"


def is_engine(ob: str) -> bool:
    return callgrind.object_name(ob).startswith("librocksdb")


def is_client(ob: str) -> bool:
    return callgrind.object_name(ob) == LOADGEN_OBJECT


# rocksdb_put's inclusive cost as the file gives it, every event (the last: sysCount)
PUT = [36000, 9900, 6800, 31, 352, 181, 3, 17, 13, 4150, 146, 60, 6, 4]


def vector(*values: int) -> list[int]:
    return [*values] + [0] * (len(callgrind.EVENTS) + 1 - len(values))


def test_the_parser_keeps_each_call_arc_with_its_callee_object() -> None:
    p = callgrind.read(DATA)
    assert p.events == (*callgrind.EVENTS, "sysCount")
    # self costs only: the inclusive cost lines are kept apart
    assert p.total("Ir") == 92500
    assert p.functions[(LOADGEN, "dbregress_loadgen::context::spin")][0] == 50000
    assert p.calls[(LOADGEN, "dbregress_loadgen::context::timed_call", ROCKSDB, "rocksdb_put")] == (
        PUT
    )
    assert (
        p.call_counts[(LOADGEN, "dbregress_loadgen::context::timed_call", ROCKSDB, "rocksdb_put")]
        == 4
    )
    # no cob= before a call: the callee is in the caller's object ("* 700": same line)
    record = (
        LOADGEN,
        "dbregress_loadgen::context::timed_call",
        LOADGEN,
        "dbregress_loadgen::stats::record",
    )
    assert p.calls[record] == vector(700)
    # a cob= holds for its own call only: DBImpl::Put is RocksDB's, memcpy libc's
    put = "rocksdb::DBImpl::Put(rocksdb::WriteOptions const&, rocksdb::Slice const&)"
    assert (ROCKSDB, "rocksdb_put", ROCKSDB, put) in p.calls
    assert p.calls[(ROCKSDB, put, LIBC, "memcpy")][0] == 5000
    assert p.calls[(LIBSTDCXX, "__once_proxy", ROCKSDB, "rocksdb::InitOnce()")][0] == 3000
    # compressed names reused: clock_gettime called from two functions, one libc entry
    assert p.functions[(LIBC, "clock_gettime")][0] == 4800
    assert sum(c for a, c in p.call_counts.items() if a[3] == "clock_gettime") == 48


def test_only_the_clients_calls_into_the_engine_count_each_once() -> None:
    work = callgrind.engine_calls(callgrind.read(DATA), is_engine, is_client)
    # rocksdb_put inclusive: its wrapper, DBImpl::Put, the memcpy and write(2) it made,
    # and the libstdc++ call that called back into RocksDB, once; not the loadgen's own
    # code, its clock_gettime calls, or the busy-wait
    assert work.total == PUT
    assert work.entries == {"rocksdb_put": PUT} and work.entry_calls == {"rocksdb_put": 4}
    assert not any(work.reentered) and not any(work.nested)
    # where it ran: RocksDB's own code (less the callback counted in libstdc++'s call),
    # the inclusive cost of its calls into libc and libstdc++; together the total
    objects = {callgrind.object_name(ob): cost[0] for ob, cost in work.objects.items()}
    assert objects == {"librocksdbjni-linux64.so": 25000, "libc.so.6": 6000, "libstdc++.so.6": 5000}
    for i in range(len(PUT)):
        assert sum(cost[i] for cost in work.objects.values()) == PUT[i]
    assert work.functions[(LIBC, "write")][-1] == 4  # the system call, on RocksDB's behalf
    assert (LOADGEN, "dbregress_loadgen::context::spin") not in work.functions


REENTRY = """\
events: Ir
ob=(1) /bin/dbregress-loadgen
fn=(1) main
1 10
cob=(2) /lib/librocksdb.so.10.2
cfn=(2) rocksdb_iter_seek
calls=1 0
1 1000
ob=(2)
fn=(2)
1 600
cob=(1)
cfn=(3) compare_callback
calls=2 0
1 400
ob=(1)
fn=(3)
1 100
cob=(2)
cfn=(4) rocksdb_get
calls=2 0
1 300
ob=(2)
fn=(4)
1 300
"""


def test_an_engine_call_made_from_a_callback_is_inside_the_outer_call() -> None:
    p = callgrind.parse(REENTRY.splitlines())
    work = callgrind.engine_calls(p, is_engine, is_client)
    # the loadgen's rocksdb_get, made inside rocksdb_iter_seek's callback, is already in
    # rocksdb_iter_seek's 1000: counted once
    assert work.total == [1000] and work.nested == [300] and work.reentered == [400]
    assert list(work.entries) == ["rocksdb_iter_seek"]
    assert sum(c[0] for c in work.objects.values()) == 1000


def _choice() -> Choice:
    plan = StepPlan(name="overwritesome", step="overwritesome", reported=True)
    return Choice(index=3, plan=plan, skip_ops=4, ops=4, q_per_s=1000.0)


def _figures(text: str) -> dict[str, object]:
    p = callgrind.parse(text.splitlines())
    work = callgrind.engine_calls(p, is_engine, is_client)
    close = {"ops": 4, "rows": 4}
    return figures(p, close, {"q_unit": "ops"}, _choice(), 3, engine=work)


def test_figures_of_the_engine_calls_every_metric_from_the_same_scope() -> None:
    text = DATA.read_text()
    got = _figures(text)
    events = (*callgrind.EVENTS, "sysCount")
    assert got["per_op"] == per_op(events, PUT, 4.0)
    per = got["per_op"]
    assert isinstance(per, dict)
    assert per["instructions"] == 9000.0
    assert per["estimated_cycles"] == estimated_cycles(events, PUT) / 4
    assert per["branch_mispredictions"] == (146 + 6) / 4
    assert per["system_calls"] == 1.0  # write(2) once a put, made by RocksDB
    assert got["reentered_per_op"] == got["nested_per_op"] == per_op(events, [0] * 14, 4.0)
    client = got["client_per_op"]
    assert isinstance(client, dict) and client["instructions"] == 92500 / 4
    assert got["objects"] == {
        "librocksdbjni-linux64.so": 6250.0,
        "libc.so.6": 1500.0,
        "libstdc++.so.6": 1250.0,
    }
    assert got["entries"] == [
        {"function": "rocksdb_put", "calls_per_op": 1.0, "instructions": 9000.0}
    ]
    functions = got["functions"]
    assert isinstance(functions, list)
    assert {f["object"] for f in functions} == {
        "librocksdbjni-linux64.so",
        "libc.so.6",
        "libstdc++.so.6",
    }
    # the cost lane's replay keeps the client's figure beside the engine's
    kept = _kept({**got, "scope": ENGINE_CALLS})
    assert kept["scope"] == ENGINE_CALLS and kept["client_per_op"] == client


def test_a_slower_client_moves_only_the_client_figure() -> None:
    # The busy-wait of inject_slowdown three times as long, its clock_gettime calls too
    text = DATA.read_text()
    slow = text.replace(
        "20 50000 10000 0 0 0 0 0 0 0 10000 10", "20 150000 30000 0 0 0 0 0 0 0 30000 30"
    )
    slow = slow.replace(
        "21 4000 1000 500 0 0 0 0 0 0 250 10", "21 12000 3000 1500 0 0 0 0 0 0 750 30"
    )
    slow = slow.replace(
        "0 4800 1200 600 0 0 0 0 0 0 300 12", "0 12800 3200 1600 0 0 0 0 0 0 800 32"
    )
    assert slow != text
    base, column = _figures(text), _figures(slow)
    assert column["per_op"] == base["per_op"]
    b, c = base["client_per_op"], column["client_per_op"]
    assert isinstance(b, dict) and isinstance(c, dict)
    assert c["instructions"] == pytest.approx(b["instructions"] + 108000 / 4)
