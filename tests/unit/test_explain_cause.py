"""The named cause of a slower step, from synthetic numbers (explain/cause.py is pure)."""

from __future__ import annotations

from pathlib import Path

from dbregress.explain import callgrind, flame
from dbregress.explain.cause import Counted, Evidence, MetricChange, explain, grown_functions

SAME = MetricChange("same", 1.0, (0.98, 1.02))
SLOWER = MetricChange("slower", 0.83, (0.80, 0.86))


def metrics(**changed: MetricChange) -> dict[str, MetricChange]:
    base = {k: SAME for k in ("server_cpu_us", "client_cpu_us", "cs", "rkb", "wkb")}
    return base | changed


def counted(instructions: float, d1: float = 100.0, ll: float = 5.0, **fns: float) -> Counted:
    per_op = {
        "instructions": instructions,
        "d1_read_misses": d1,
        "d1_write_misses": 0.0,
        "ll_read_misses": ll,
        "ll_write_misses": 0.0,
        "branch_mispredictions": 50.0,
    }
    functions = [{"function": f, "object": "postgres", "instructions": v} for f, v in fns.items()]
    return Counted(per_op, functions, {"postgres": instructions})


def keys(e: Evidence) -> list[str]:
    return [c.key for c in explain(e)]


def test_an_injected_slowdown_is_client_cpu() -> None:
    # inject_slowdown = 0.2: the loadgen busy-waits after each call, the server does not
    # change; the run's verdicts then say client CPU per operation is higher.
    e = Evidence(
        qps=SLOWER,
        metrics=metrics(client_cpu_us=MetricChange("higher", 1.21, (1.18, 1.25))),
        base=counted(80_000),
        other=counted(80_400),
    )
    causes = explain(e)
    assert causes[0].key == "client_cpu"
    assert causes[0].text == "more client CPU per operation (the load generator)"
    assert causes[0].figures["client_cpu_us"]["ratio"] == 1.21
    assert "waiting" not in keys(e), "the server waits for the client: not contention"
    assert "code" not in keys(e), "0.5% more instructions is within explain's noise"


def test_more_instructions_is_code_bloat_with_the_functions_that_grew() -> None:
    e = Evidence(
        qps=SLOWER,
        metrics=metrics(server_cpu_us=MetricChange("higher", 1.2, (1.15, 1.25))),
        base=counted(100_000, _bt_readpage=6_000, AllocSetAlloc=4_000),
        other=counted(121_000, _bt_readpage=6_100, AllocSetAlloc=4_000, ExecNew=15_000),
    )
    assert keys(e) == ["server_cpu", "code", "functions"]
    code = explain(e)[1]
    assert code.figures["instructions"]["ratio"] == 1.21
    grown = explain(e)[2].figures["functions"]
    assert [g["function"] for g in grown] == ["ExecNew", "_bt_readpage"]
    assert grown[0]["base"] == 0.0 and grown[0]["delta"] == 15_000


def test_misses_at_flat_instructions_is_the_memory_system() -> None:
    e = Evidence(
        qps=SLOWER,
        metrics=metrics(server_cpu_us=MetricChange("higher", 1.1, (1.05, 1.15))),
        base=counted(100_000, d1=400, ll=2),
        other=counted(100_500, d1=700, ll=9),
    )
    assert keys(e) == ["server_cpu", "memory"]
    memory = explain(e)[1].figures
    assert memory["d1_misses"]["other"] == 700 and memory["ll_misses"]["ratio"] == 4.5


def test_io_and_context_switches_are_named_with_their_figures() -> None:
    e = Evidence(
        qps=SLOWER,
        metrics=metrics(
            rkb=MetricChange("higher", 3.0, (2.5, 3.5)), cs=MetricChange("higher", 1.5, (1.2, 1.8))
        ),
    )
    causes = explain(e)
    assert [c.key for c in causes] == ["reads", "switches"]
    assert causes[0].text == "more bytes read per operation (IO)"
    assert causes[0].figures["rkb"]["ci"] == [2.5, 3.5]


def test_flat_cpu_while_qps_fell_is_waiting() -> None:
    e = Evidence(
        qps=SLOWER, metrics=metrics(server_cpu_us=MetricChange("lower", 0.97, (0.95, 0.99)))
    )
    causes = explain(e)
    assert [c.key for c in causes] == ["waiting"]
    assert causes[0].figures["qps"]["ratio"] == 0.83


def test_nothing_beyond_its_noise_is_unexplained() -> None:
    undecided = MetricChange("undecided", 1.04, (0.9, 1.2))
    e = Evidence(
        qps=SLOWER,
        metrics=metrics(server_cpu_us=undecided, client_cpu_us=undecided),
        base=counted(100_000),
        other=counted(101_000),
    )
    assert keys(e) == ["unexplained"]


def test_grown_functions_match_by_name_and_object() -> None:
    b = counted(10, f=5.0, g=3.0)
    o = counted(10, f=4.0, g=3.5, h=1.0)
    assert [(g["function"], g["delta"]) for g in grown_functions(b, o)] == [("h", 1.0), ("g", 0.5)]


CALLGRIND = """\
# callgrind format
version: 1
positions: line
events: Ir Dr Dw I1mr D1mr D1mw ILmr DLmr DLmw Bc Bcm Bi Bim
desc: LL cache: 8388608 B, 64 B, 16-way associative
desc: Trigger: dump dbregress-x-06
ob=(1) /usr/lib/postgresql/bin/postgres
fl=(1) nbtree.c
fn=(1) _bt_readpage
10 100 20 5 1 2 0 0 0 0 10 1
+2 50 10 0 0 1
cfn=(2) palloc
calls=3 5
+1 400 80 40
fn=(2)
5 40 8 4
ob=(2) /lib/libc.so.6
fn=(3) memcmp(void const*, void const*, unsigned long)
0 7
"""


def test_callgrind_self_costs_skip_the_inclusive_cost_of_calls(tmp_path: Path) -> None:
    p = callgrind.parse(CALLGRIND.splitlines(keepends=True))
    assert p.functions[("/usr/lib/postgresql/bin/postgres", "_bt_readpage")][:3] == [150, 30, 5]
    assert p.functions[("/usr/lib/postgresql/bin/postgres", "palloc")][0] == 40
    assert p.total("Ir") == 150 + 40 + 7
    assert p.caches["LL"].startswith("8388608 B") and p.triggers == ["dump dbregress-x-06"]
    f = tmp_path / "callgrind.out.1.1"
    f.write_text(CALLGRIND)
    assert callgrind.trigger(f) == "dump dbregress-x-06"
    assert callgrind.short_name("memcmp(void const*, void const*, unsigned long)") == "memcmp"
    assert callgrind.short_name("ns::(anonymous namespace)::f(int) const") == (
        "ns::(anonymous namespace)::f"
    )


def test_folded_cpu_time_becomes_nanoseconds_per_operation() -> None:
    folded = "postgres;exec;_bt_readpage 3003003\npostgres;exec 1001001\npostgres;idle 10\n"
    assert flame.per_op(folded, 1000) == "postgres;exec;_bt_readpage 3003\npostgres;exec 1001\n"
    assert flame.per_op(folded, 0) == ""


def test_the_runs_hardware_counts_name_code_bloat_without_explain() -> None:
    # On a host with a PMU every step's instructions per operation have verdicts of
    # their own (perf stat over the window), so the cause is named from the run alone.
    up = MetricChange("higher", 1.18, (1.15, 1.21))
    e = Evidence(
        qps=SLOWER,
        metrics=metrics(
            server_cpu_us=MetricChange("higher", 1.2, (1.15, 1.25)), server_instructions=up
        ),
    )
    causes = explain(e)
    assert [c.key for c in causes] == ["server_cpu", "counted_code"]
    assert causes[1].figures["server_instructions"]["ratio"] == 1.18
    flat = Evidence(qps=SLOWER, metrics=metrics(server_instructions=SAME))
    assert "counted_code" not in keys(flat)
