"""The gate (`--fail-on`): which steps a lane judges, and whether each of them is decided.

A gate answers for steps, not lanes. It passes only when every step of every lane it
names is decided (`same` or `faster`): a step that is `undecided`, withheld for its
engine state, missing (its repeats or replays all failed), skipped by the cost lane, or
whose lane or run did not finish, makes it fail closed, named with its reason. A step
confirmed `slower` fails it with "slower found", a different status (cli/exits.py).

The steps a lane judges are the lab's reported steps (the run folder's lab.toml) of every
comparison's non-base columns; the cost lane's only those of `count_steps` when the lab
names some. A run without its lab file (an import, two runs compared) is judged on the
steps it holds.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from dbregress.analysis.compare import Key, RunVerdicts, lane_gaps
from dbregress.shapes.replay import CostLaneRecord, ReplayRecord
from dbregress.shapes.run import RunJson
from dbregress.shapes.step_result import StepResultJson

LANES = ("time", "cost")


@dataclass(frozen=True)
class Planned:
    """The steps each lane judges, per comparison (in the order they run)."""

    time: Mapping[str, list[str]]
    cost: Mapping[str, list[str]]

    def of(self, lane: str) -> Mapping[str, list[str]]:
        return self.time if lane == "time" else self.cost


@dataclass(frozen=True)
class Slower:
    lane: str
    key: Key
    ratio: float | None
    ci: tuple[float, float] | None


@dataclass(frozen=True)
class Gap:
    """A judged step that is not decided (key), or a lane that cannot be judged (key
    None), with why."""

    lane: str
    key: Key | None
    why: str


@dataclass(frozen=True)
class GateResult:
    lanes: tuple[str, ...]
    slower: list[Slower] = field(default_factory=list)
    gaps: list[Gap] = field(default_factory=list)  # what keeps the gate from passing
    allowed: list[Gap] = field(default_factory=list)  # let through by --allow-undecided
    judged: dict[str, tuple[int, int]] = field(default_factory=dict)  # lane -> (decided, of)


def _keys(record: RunJson, steps: Mapping[str, list[str]]) -> list[Key]:
    out: list[Key] = []
    for comp in record["comparisons"]:
        for label in comp["labels"][1:]:
            out += [(comp["name"], label, s) for s in steps.get(comp["name"], [])]
    return out


def held_steps(
    record: RunJson, verdicts: RunVerdicts, results: Iterable[StepResultJson]
) -> Planned:
    """A run without its lab file: the steps its results and verdicts hold, per
    comparison (a step that failed everywhere is still one the run tried)."""
    labels = {lb: comp["name"] for comp in record["comparisons"] for lb in comp["labels"]}
    time: dict[str, list[str]] = {}
    for r in results:
        comp = labels.get(r["column"])
        if comp is not None and r.get("repeat", 1) != 0 and r["step"] not in time.get(comp, []):
            time.setdefault(comp, []).append(r["step"])
    for comp, _col, step in verdicts.qps:
        if step not in time.get(comp, []):
            time.setdefault(comp, []).append(step)
    cost = {c: list(s) for c, s in time.items()}
    for comp, _col, step in verdicts.cost.headline() if verdicts.cost else {}:
        if step not in cost.get(comp, []):
            cost.setdefault(comp, []).append(step)
    return Planned(time, cost)


def _time_gap(
    key: Key, verdicts: RunVerdicts, record: RunJson, failed: Mapping[tuple[str, str], str]
) -> str | None:
    """Why a judged step of the time lane is not decided; None when it is."""
    found = verdicts.qps.get(key)
    comp, label, step = key
    if found is not None:
        return None if found.verdict != "undecided" else f"undecided: {found.reason}"
    base = next(c["labels"][0] for c in record["comparisons"] if c["name"] == comp)
    for side in (base, label):
        if (side, step) in failed:
            return f"not measured: {side}'s step failed ({failed[(side, step)]})"
    return f"not measured: no repeat of {base} ran it"


def _cost_gap(
    key: Key,
    verdicts: RunVerdicts,
    lane: CostLaneRecord | None,
    replays: list[ReplayRecord],
) -> str | None:
    """Why a judged step of the cost lane is not decided; None when it is."""
    comp, label, step = key
    found = verdicts.cost.headline().get(key) if verdicts.cost else None
    if found is not None:
        return None if found.verdict != "undecided" else f"undecided: {found.reason}"
    skipped = (lane or {}).get("skipped", {}).get(f"{comp}/{step}")
    if skipped:
        return f"not counted: {skipped}"
    errors = [
        r.get("error", {}).get("message", "")
        for r in replays
        if r["column"] == label and r.get("status") == "failed"
    ]
    if errors:
        first = errors[-1].splitlines()[0] if errors[-1] else "no message"
        return f"not counted: {len(errors)} replay(s) of {label} failed ({first})"
    return f"not counted: no counting replay of {label} or its base counted it"


def _failed_steps(results: Iterable[StepResultJson]) -> dict[tuple[str, str], str]:
    """(column, step) -> the error of a step that failed in some repeat."""
    out: dict[tuple[str, str], str] = {}
    for r in results:
        if r.get("status") not in (None, "ok") and r.get("repeat", 1) != 0:
            error = r.get("error")
            msg = str(error.get("message", "")) if isinstance(error, dict) else str(error or "")
            out[(r["column"], r["step"])] = (msg.splitlines() or ["no message"])[0][:160]
    return out


def _lane_unfinished(lane: str, record: RunJson, cost_lane: CostLaneRecord | None) -> str | None:
    """Why a lane as a whole cannot be judged beyond lane_gaps: the run, or the cost
    lane, did not finish."""
    status = record.get("status", "ok")
    if status == "failed":
        n = len(record.get("failures") or [])
        return f"the run failed ({n} failure(s) in run.json): its steps are not all measured"
    if status != "ok":
        return f"the run did not finish (status {status}): its steps are not all measured"
    planned = record.get("cost_lane")
    if lane == "cost" and cost_lane is None and planned and planned.get("planned"):
        return "the cost lane did not finish (no cost/lane.json: interrupted or failed)"
    return None


def drifted(
    verdicts: RunVerdicts,
    record: RunJson,
    planned: Planned,
    limit: float,
    already: Iterable[Slower] = (),
) -> tuple[list[Slower], list[Gap]]:
    """--fail-on drift:P%: the cost lane's judged steps whose change against their base
    is beyond `limit` (a fraction) the slower way with the whole interval, even inside
    the band (`same`, a small change); confirmed slower ones are named by `judge`
    already, an undecided or withheld one is a gap there, not a drift. A `same` that is
    not small, whose interval still lies beyond the limit (it did not clear the floor
    with "no change" rejected after BH) cannot be judged for drift: a gap, never a pass."""
    seen = {s.key for s in already if s.lane == "cost"}
    out: list[Slower] = []
    gaps: list[Gap] = []
    for key in _keys(record, planned.cost):
        c = verdicts.cost_for(key)
        if c is None or c.verdict != "same" or c.ci is None or key in seen:
            continue
        if c.ci[0] > 1 + limit:
            if c.small:
                out.append(Slower("cost", key, c.ratio, c.ci))
            else:
                why = (
                    "beyond the drift limit but not a small change (inside the floor, or "
                    "not rejected after BH): too close to call for drift"
                )
                gaps.append(Gap("cost", key, why))
    return out, gaps


def judge(
    verdicts: RunVerdicts,
    record: RunJson,
    lanes: tuple[str, ...],
    planned: Planned,
    results: Iterable[StepResultJson] = (),
    cost_lane: CostLaneRecord | None = None,
    replays: list[ReplayRecord] | None = None,
    allow_undecided: bool = False,
) -> GateResult:
    """Every judged step of each named lane: confirmed slower, or not decided and why.
    With `allow_undecided`, only a lane that gave no verdict at all blocks (the per-step
    gaps are listed as let through)."""
    failed = _failed_steps(results)
    out = GateResult(lanes)
    whole = lane_gaps(verdicts, record)
    for lane in lanes:
        keys = _keys(record, planned.of(lane))
        # what blocks even with --allow-undecided: a lane that gave no verdict at all
        blocking = [Gap(lane, None, whole[lane])] if lane in whole else []
        if not keys and lane not in whole:
            blocking.append(Gap(lane, None, "the lab has no step this lane judges"))
        unfinished = _lane_unfinished(lane, record, cost_lane)
        soft = [Gap(lane, None, unfinished)] if unfinished else []
        silent = 0  # steps with no verdict where the lane's own gap says why for them all
        for key in keys:
            given = verdicts.qps.get(key) if lane == "time" else verdicts.cost_for(key)
            if given is not None and given.verdict == "slower":
                out.slower.append(Slower(lane, key, given.ratio, given.ci))
            if given is None and lane in whole:
                silent += 1
                continue
            if lane == "time":
                why = _time_gap(key, verdicts, record, failed)
            else:
                why = _cost_gap(key, verdicts, cost_lane, replays or [])
            if why is not None:
                soft.append(Gap(lane, key, why))
        steps = sum(g.key is not None for g in soft)
        out.judged[lane] = (len(keys) - steps - silent, len(keys))
        out.gaps.extend(blocking)
        (out.allowed if allow_undecided else out.gaps).extend(soft)
    return out


def bugs(
    record: RunJson, results: Iterable[StepResultJson] = (), replays: Iterable[ReplayRecord] = ()
) -> list[str]:
    """A line per bug in dbregress the run recorded (model/errors.is_bug): in a job or a
    step (run.json's failures, or a step result of a run without them: compare's merged
    run) and in a counting replay, each with where its traceback is. Any of them makes a
    gate exit 3 (cli/exits.py) unless a step is confirmed slower: the run's figures came
    through code that failed."""
    out: list[str] = []
    said: set[str] = set()
    for f in record.get("failures") or []:
        if f.get("bug"):
            said.add(f["where"])
            first = (f["message"].splitlines() or [""])[0][:160]
            out.append(f"{f['where']}: {f['type']}: {first} (traceback in run.json's failures)")
    for r in results:
        error = r.get("error")
        where = f"{r['column']}/r{r.get('repeat', 1)} {r['step']}"
        if error is not None and error.get("bug") and where not in said:
            first = (error["message"].splitlines() or [""])[0][:160]
            out.append(f"{where}: {error['type']}: {first} (traceback in the step's .json)")
    for p in replays:
        why = p.get("error")
        if p.get("status") == "failed" and why is not None and why.get("bug"):
            first = (why["message"].splitlines() or [""])[0][:160]
            where = f"replay {p['column']}/c{p['replay']}"
            out.append(
                f"{where}: {why['type']}: {first} (traceback in "
                f"cost/{p['column']}/r{p['replay']}.json)"
            )
    return out
