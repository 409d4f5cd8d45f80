"""A named cause for a slower step: a pure function of the numbers (docs/metrics.md,
"Explanations").

The evidence is the run's own metric verdicts for the step (each per-operation metric's
ratio to the base, with its interval and verdict: analysis/compare.py) and, when
`dbregress explain` measured the step on both builds, their per-operation instructions,
simulated cache misses, branch mispredictions and functions. A metric counts as moved
when its verdict is `higher` (the run's repeats say so beyond their noise); an explain
figure when it changed by more than `noise` (two explain runs of one build agree within
about 1%) and by more than a floor in absolute terms. Nothing moved: `unexplained`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from dbregress.shapes.explain import (
    CauseFigure,
    CauseRecord,
    ChangeRecord,
    FunctionFigures,
    GrownFunction,
)

NOISE = 0.02  # relative change an explain figure must exceed
MISS_FLOOR = 0.05  # misses per operation: smaller changes are noise whatever the ratio
TOP_FUNCTIONS = 5


@dataclass(frozen=True)
class MetricChange:
    """One per-operation metric of the run, column against base."""

    verdict: str  # higher | lower | same | undecided (QPS: slower | faster | ...)
    ratio: float | None = None
    ci: tuple[float, float] | None = None

    def to_json(self) -> ChangeRecord:
        return {
            "verdict": self.verdict,
            "ratio": self.ratio,
            "ci": list(self.ci) if self.ci else None,
        }


@dataclass(frozen=True)
class Counted:
    """What explain measured on one build for one step, per operation."""

    per_op: dict[str, float]  # instructions, d1_read_misses, ... (count_figures.FIGURES)
    functions: list[FunctionFigures] = field(default_factory=list)
    objects: dict[str, float] = field(default_factory=dict)  # object -> instructions per op


@dataclass(frozen=True)
class Evidence:
    qps: MetricChange
    metrics: dict[str, MetricChange]  # server_cpu_us, client_cpu_us, cs, rkb, wkb, ...
    base: Counted | None = None
    other: Counted | None = None
    noise: float = NOISE


@dataclass(frozen=True)
class Cause:
    key: str
    text: str
    figures: dict[str, CauseFigure]

    def to_json(self) -> CauseRecord:
        return {"key": self.key, "text": self.text, "figures": self.figures}


TEXTS = {
    "client_cpu": "more client CPU per operation (the load generator)",
    "server_cpu": "more server CPU per operation",
    "code": "more instructions per operation (code bloat)",
    "counted_code": "more instructions per operation in the run, by hardware counters (code bloat)",
    "memory": "more cache misses per operation at flat instructions (memory-system bloat)",
    "branches": "more branch mispredictions per operation at flat instructions",
    "reads": "more bytes read per operation (IO)",
    "writes": "more bytes written per operation (IO)",
    "switches": "more context switches per operation (waiting, contention)",
    "waiting": "CPU per operation flat while throughput fell (waiting, contention, stalls)",
    "functions": "functions whose instructions per operation grew most",
    "unexplained": "unexplained: nothing moved beyond its noise",
}


def _up(c: MetricChange | None) -> bool:
    return c is not None and c.verdict == "higher"


def _flat(c: MetricChange | None) -> bool:
    return c is not None and c.verdict in ("same", "lower")


def _figure(c: MetricChange) -> ChangeRecord:
    return c.to_json()


def _rel(base: float, other: float) -> float | None:
    return other / base if base > 0 else None


def _moved(base: float, other: float, noise: float, floor: float = 0.0) -> bool:
    """other exceeds base beyond the relative noise and the absolute floor."""
    return other - base > max(noise * base, floor)


def _pair(b: Counted, o: Counted, *keys: str) -> tuple[float, float]:
    return (
        sum(b.per_op.get(k, 0.0) for k in keys),
        sum(o.per_op.get(k, 0.0) for k in keys),
    )


def grown_functions(b: Counted, o: Counted, top: int = TOP_FUNCTIONS) -> list[GrownFunction]:
    """The functions whose instructions per operation grew most (matched by name and
    object; a function the base's list lacks counts from 0)."""

    def keyed(c: Counted) -> dict[tuple[str, str], float]:
        out: dict[tuple[str, str], float] = {}
        for f in c.functions:
            k = (f["function"], f.get("object", ""))
            out[k] = out.get(k, 0.0) + float(f.get("instructions", 0.0))
        return out

    base, other = keyed(b), keyed(o)
    deltas = sorted(
        ((ir - base.get(k, 0.0), k, ir) for k, ir in other.items()), key=lambda t: -t[0]
    )
    return [
        {"function": fn, "object": ob, "base": ir - d, "other": ir, "delta": d}
        for d, (fn, ob), ir in deltas[:top]
        if d > 0
    ]


def _explain_figures(e: Evidence, causes: list[Cause]) -> None:
    """What the counts say: code, memory or branches; then the functions."""
    b, o = e.base, e.other
    if b is None or o is None:
        return
    ir_b, ir_o = _pair(b, o, "instructions")
    code = _moved(ir_b, ir_o, e.noise)
    if code:
        objects = {
            name: o.objects.get(name, 0.0) - b.objects.get(name, 0.0)
            for name in set(b.objects) | set(o.objects)
        }
        grew = max(objects, key=lambda k: objects[k]) if objects else None
        causes.append(
            Cause(
                "code",
                TEXTS["code"],
                {
                    "instructions": {"base": ir_b, "other": ir_o, "ratio": _rel(ir_b, ir_o)},
                    "object_grew_most": grew,
                    "object_delta": objects.get(grew, 0.0) if grew else None,
                },
            )
        )
    elif not _moved(ir_o, ir_b, e.noise):  # instructions flat (within the noise both ways)
        misses: dict[str, CauseFigure] = {}
        for name, keys in (
            ("d1_misses", ("d1_read_misses", "d1_write_misses")),
            ("ll_misses", ("ll_read_misses", "ll_write_misses")),
        ):
            mb, mo = _pair(b, o, *keys)
            if _moved(mb, mo, e.noise, MISS_FLOOR):
                misses[name] = {"base": mb, "other": mo, "ratio": _rel(mb, mo)}
        if misses:
            misses["instructions"] = {"base": ir_b, "other": ir_o, "ratio": _rel(ir_b, ir_o)}
            causes.append(Cause("memory", TEXTS["memory"], misses))
        bb, bo = _pair(b, o, "branch_mispredictions")
        if _moved(bb, bo, e.noise, MISS_FLOOR):
            causes.append(
                Cause(
                    "branches",
                    TEXTS["branches"],
                    {"branch_mispredictions": {"base": bb, "other": bo, "ratio": _rel(bb, bo)}},
                )
            )
    grown = [g for g in grown_functions(b, o) if g["delta"] > e.noise * ir_b / 100]
    if grown and code:
        causes.append(Cause("functions", TEXTS["functions"], {"functions": grown}))


def explain(e: Evidence) -> list[Cause]:
    """The causes of one slower step, most direct first; [unexplained] if none."""
    causes: list[Cause] = []
    m = e.metrics
    client, server = m.get("client_cpu_us"), m.get("server_cpu_us")
    if _up(client):
        assert client is not None
        causes.append(Cause("client_cpu", TEXTS["client_cpu"], {"client_cpu_us": _figure(client)}))
    if _up(server):
        assert server is not None
        causes.append(Cause("server_cpu", TEXTS["server_cpu"], {"server_cpu_us": _figure(server)}))
    instructions = m.get("server_instructions")  # perf stat's, on a host with a PMU
    if _up(instructions):
        assert instructions is not None
        figures: dict[str, CauseFigure] = {"server_instructions": _figure(instructions)}
        causes.append(Cause("counted_code", TEXTS["counted_code"], figures))
    _explain_figures(e, causes)
    for key, metric in (("reads", "rkb"), ("writes", "wkb"), ("switches", "cs")):
        c = m.get(metric)
        if _up(c):
            assert c is not None
            causes.append(Cause(key, TEXTS[key], {metric: _figure(c)}))
    cpu_flat = _flat(server) and not _up(client)
    if e.qps.verdict == "slower" and cpu_flat and not causes:
        assert server is not None
        figures = {"qps": _figure(e.qps), "server_cpu_us": _figure(server)}
        if client is not None:
            figures["client_cpu_us"] = _figure(client)
        causes.append(Cause("waiting", TEXTS["waiting"], figures))
    if not causes:
        causes.append(Cause("unexplained", TEXTS["unexplained"], {"qps": _figure(e.qps)}))
    return causes
