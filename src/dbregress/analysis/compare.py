"""A run's step results -> one verdict per (comparison, column, step), for QPS and for
each per-operation metric (docs/verdicts.md).

The unit of evidence is the repeat: one fresh engine running the benchmark. The samples
of a cell are its repeats' values; the warm-up job (repeat 0), failed steps and repeats
disturbed by other work on the host are left out, and counted.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from dbregress.analysis.changepoints import RunChanges
from dbregress.analysis.cost import CostComparison, CostVerdicts
from dbregress.analysis.io_efficiency import IoSection, sections
from dbregress.analysis.metrics import PER_OP, Metric
from dbregress.analysis.paired import pair_slices, paired_all
from dbregress.analysis.verdict import Policy, StepVerdict, compare_all
from dbregress.lab.file import VerdictPolicy
from dbregress.model.records import JobId
from dbregress.shapes.run import RunJson
from dbregress.shapes.step_result import StepResultJson

Key = tuple[str, str, str]  # (comparison, column, step)
# A step result as the verdicts read it: typed (shapes/step_result.py), or the JSON
# object a caller outside the analysis still passes on as it was read (store/run.py).

# A repeat is disturbed when, during its measured window, processes other than the
# engine and the loadgen used more than this share of the host's CPUs, or the
# hypervisor stole more than this share: it is reported and left out of verdicts.
DISTURBED_OTHER_CPU = 0.10
DISTURBED_STEAL = 0.05

# A job is disturbed as a whole when its steps moved together, far from the other jobs
# of its column (a neighbour, or a hypervisor that slowed the whole job, unseen by the
# counters above): its job factor, the median over its steps of log(QPS / that step's
# median over the column's jobs), lies more than JOB_K robust standard deviations of the
# column's job factors from their median, and more than JOB_MIN from it. Judged among at
# least JOB_MIN_JOBS jobs of a column with at least JOB_MIN_STEPS steps each. The rule
# compares a job only with its own column's jobs, so a change that moves a whole column
# (a regression) cannot trigger it.
JOB_K = 5.0
JOB_MIN = math.log(1.10)
JOB_MIN_JOBS = 5
JOB_MIN_STEPS = 3

# Per-op metrics that get verdicts: every one but o/s, which is QPS again.
VERDICT_METRICS: tuple[Metric, ...] = tuple(m for m in PER_OP if m.key != "ops_per_s")


@dataclass(frozen=True)
class Disturbed:
    column: str
    repeat: int
    step: str
    why: str


@dataclass(frozen=True)
class RunVerdicts:
    policy: VerdictPolicy
    qps: dict[Key, StepVerdict]
    metrics: dict[str, dict[Key, StepVerdict]]  # metric key -> verdicts
    disturbed: list[Disturbed] = field(default_factory=list)
    cost: CostVerdicts | None = None  # the cost lane's, where the run has one
    changes: RunChanges | None = None  # change points, where the run has a series
    paired: bool = False  # QPS verdicts from the interleaved schedule's paired repeats
    io: list[IoSection] = field(default_factory=list)  # IO-bound comparisons' device figures

    def io_for(self, comparison: str) -> IoSection | None:
        """The comparison's IO-efficiency section (analysis/io_efficiency.py), if IO-bound."""
        return next((s for s in self.io if s.comparison == comparison), None)

    def cost_for(self, key: Key) -> CostComparison | None:
        """The cost lane's headline verdict (estimated cycles per op) of a key."""
        return self.cost.headline().get(key) if self.cost is not None else None

    def cost_metric(self, metric: str, key: Key) -> CostComparison | None:
        return self.cost.metrics.get(metric, {}).get(key) if self.cost is not None else None

    def for_comparison(self, name: str) -> dict[tuple[str, str], StepVerdict]:
        """(column, step) -> QPS verdict of one comparison."""
        return {(col, step): c for (comp, col, step), c in self.qps.items() if comp == name}

    def slower(self, lane: str = "time") -> list[Key]:
        """Keys confirmed slower in one lane ("time": QPS, "cost": estimated cycles)."""
        if lane == "cost":
            return self.cost.slower() if self.cost is not None else []
        return [k for k, c in self.qps.items() if c.verdict == "slower"]

    def decided(self, lane: str) -> tuple[int, int]:
        """(steps decided, steps judged) in one lane: its verdicts that are not
        `undecided`, of all it gave (the cost lane's headline metric)."""
        found = self.qps if lane == "time" else self.cost.headline() if self.cost else {}
        return sum(c.verdict != "undecided" for c in found.values()), len(found)


def lane_gaps(verdicts: RunVerdicts, record: RunJson) -> dict[str, str]:
    """Each lane that gave no verdict a gate can rest on, with why: it did not run, or
    it decided no step. A lane missing here judged at least one step (`record`: run.json,
    typed or as read)."""
    gaps: dict[str, str] = {}
    time_decided, time_all = verdicts.decided("time")
    if not time_all:
        gaps["time"] = "no step has a measured repeat on both sides"
    elif not time_decided:
        gaps["time"] = f"every step is undecided ({time_all})"
    if verdicts.cost is None:
        lane = record.get("cost_lane")
        why = lane.get("why_not") if lane else None
        if why:
            gaps["cost"] = f"not run, {why}"
        elif lane and lane.get("planned"):
            gaps["cost"] = "not finished (no counting replays are stored)"
        else:
            gaps["cost"] = "this run has no counting replays"
    elif not verdicts.decided("cost")[1]:
        gaps["cost"] = "no step was counted"
    elif not verdicts.decided("cost")[0]:
        gaps["cost"] = f"every counted step is undecided ({verdicts.decided('cost')[1]})"
    return gaps


def disturbance(result: StepResultJson) -> str | None:
    """Why a step's measured window was disturbed by the host, or None."""
    host = result.get("host")
    other = host.get("other_cpu_frac") if host else None
    steal = host.get("steal_frac") if host else None
    if other is not None and other > DISTURBED_OTHER_CPU:
        return f"other processes used {other:.0%} of the host's CPU"
    if steal is not None and steal > DISTURBED_STEAL:
        return f"the hypervisor stole {steal:.0%} of the CPU"
    return None


def disturbed_jobs(results: Iterable[StepResultJson]) -> dict[tuple[str, int], str]:
    """(column, repeat) -> why, for every job whose steps moved together far from the
    other jobs of its column (the rule above)."""
    logs: dict[str, dict[int, dict[str, float]]] = {}
    for r in results:
        q = r.get("q", {}).get("value")
        if not measured(r):
            continue
        if isinstance(q, int | float) and q > 0 and math.isfinite(q):
            logs.setdefault(r["column"], {}).setdefault(r["repeat"], {})[r["step"]] = math.log(q)
    out: dict[tuple[str, int], str] = {}
    for column, jobs in logs.items():
        jobs = {rep: steps for rep, steps in jobs.items() if len(steps) >= JOB_MIN_STEPS}
        if len(jobs) < JOB_MIN_JOBS:
            continue
        names = {step for steps in jobs.values() for step in steps}
        center = {
            step: statistics.median(steps[step] for steps in jobs.values() if step in steps)
            for step in names
        }
        factor = {
            rep: statistics.median(v - center[step] for step, v in steps.items())
            for rep, steps in jobs.items()
        }
        middle = statistics.median(factor.values())
        spread = 1.4826 * statistics.median(abs(f - middle) for f in factor.values())
        limit = max(JOB_K * spread, JOB_MIN)
        for rep, f in factor.items():
            if abs(f - middle) > limit:
                out[(column, rep)] = (
                    f"all {len(jobs[rep])} steps moved together, {math.exp(f - middle) - 1:+.0%} "
                    f"against the column's typical job (limit ±{math.exp(limit) - 1:.0%})"
                )
    return out


def measured(r: StepResultJson) -> bool:
    """A step result that measured something: not of the warm-up job, finished ok, and
    reported (whether or not the host disturbed it)."""
    return r.get("repeat", 1) != 0 and r.get("status") == "ok" and r.get("reported") is not False


def usable(
    results: Iterable[StepResultJson], disturbed: list[Disturbed] | None = None
) -> list[StepResultJson]:
    """The step results that are samples: not the warm-up job, not failed, reported, not
    disturbed by the host or in a job disturbed as a whole (those are appended to
    `disturbed`: one entry per disturbed step, one per disturbed job)."""
    results = list(results)
    whole = disturbed_jobs(results)
    if disturbed is not None:
        disturbed += [Disturbed(col, rep, "all steps", why) for (col, rep), why in whole.items()]
    out: list[StepResultJson] = []
    for r in results:
        if not measured(r):
            continue
        if (r["column"], r["repeat"]) in whole:
            continue
        why = disturbance(r)
        if why is not None:
            if disturbed is not None:
                disturbed.append(Disturbed(r["column"], r["repeat"], r["step"], why))
            continue
        out.append(r)
    return out


def _samples(
    record: RunJson,
    results: list[StepResultJson],
    value: Callable[[StepResultJson], float | None],
    ran: dict[str, list[str]] | None = None,
) -> dict[Key, tuple[list[float], list[float]]]:
    """(comparison, column, step) -> (base samples, column samples) for every non-base
    column and every step the base ran (`ran`: column -> its steps, counting those whose
    every repeat was left out, which then get no samples rather than no verdict)."""
    by_cell: dict[tuple[str, str], list[float]] = {}
    for r in results:
        v = value(r)
        if v is not None:
            by_cell.setdefault((r["column"], r["step"]), []).append(float(v))
    out: dict[Key, tuple[list[float], list[float]]] = {}
    for comp in record["comparisons"]:
        base, *others = comp["labels"]
        steps = list((ran or {}).get(base, []))  # in the order they ran
        steps += [s for (col, s) in by_cell if col == base and s not in steps]
        for label in others:
            for step in steps:
                out[(comp["name"], label, step)] = (
                    by_cell.get((base, step), []),
                    by_cell.get((label, step), []),
                )
    return out


def _paired(
    keys: Iterable[Key], results: list[StepResultJson], bases: Mapping[str, str]
) -> dict[Key, list[float | None]]:
    """Interleaved runs: per key, the paired ratio of each repeat whose base and column
    results are both usable (a disturbed side leaves its pair out). A result is paired
    at run time with its comparison's base (`paired.base`); where the key's comparison
    has another base (`bases`: comparison -> its base label, as the ledger's increments
    over the column before), the two results of the same round are paired as the run
    pairs them, slice by slice (analysis/paired.py pair_slices)."""
    by_job = {(r["column"], r["repeat"], r["step"]): r for r in results}
    out: dict[Key, list[float | None]] = {}
    for key in keys:
        comp, label, step = key
        ratios: list[float | None] = []
        for r in results:
            if r["column"] != label or r["step"] != step:
                continue
            pair = r.get("paired")
            own = bases.get(comp)
            base = JobId.parse(pair["base"]) if pair else None
            if pair and base and own in (None, base.label):
                if (base.label, base.repeat, step) in by_job:
                    ratios.append(pair.get("ratio"))
                continue
            other = by_job.get((own, r["repeat"], step)) if own else None
            if other is not None and "slices" in other and "slices" in r:
                ratios.append(pair_slices(other["slices"], r["slices"])["ratio"])
        out[key] = ratios
    return out


def _per_op(key: str) -> Callable[[StepResultJson], float | None]:
    """A step result's per-operation figure `key`."""
    return lambda r: r["per_op"].get(key)


def compare_run(
    record: RunJson,
    steps_by_job: dict[str, list[StepResultJson]],
    policy: VerdictPolicy | None = None,
) -> RunVerdicts:
    """Verdicts for every comparison of a run (pure: step results in, verdicts out):
    run.json and its step results by job, typed or as read (store/run.py)."""
    if policy is None:
        policy = VerdictPolicy.of_record(record)
    rule = Policy(alpha=policy.alpha, band=policy.band)
    disturbed: list[Disturbed] = []
    every = [r for rs in steps_by_job.values() for r in rs]
    results = usable(every, disturbed)
    ran: dict[str, list[str]] = {}
    for r in every:
        if measured(r):
            steps = ran.setdefault(r["column"], [])
            if r["step"] not in steps:
                steps.append(r["step"])
    qps_samples = _samples(record, results, lambda r: r["q"]["value"], ran)
    if record.get("schedule") == "interleaved":
        bases = {c["name"]: c["labels"][0] for c in record["comparisons"] if c["labels"]}
        qps = paired_all(_paired(qps_samples, results, bases), rule)
    else:
        qps = compare_all(qps_samples, rule, "higher")
    metrics = {
        m.key: compare_all(
            _samples(record, results, _per_op(m.key)),
            rule,
            m.better,
            metric=True,
        )
        for m in VERDICT_METRICS
    }
    paired = record.get("schedule") == "interleaved"
    io = sections(record, steps_by_job)
    return RunVerdicts(policy, qps, metrics, disturbed, paired=paired, io=io)
