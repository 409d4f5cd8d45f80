"""What the cost lane counts (cost/lane.py plans by it): the windows it sizes
(LANE_SIZING), the steps of a comparison it counts, the windows every session of a run
shares, how many replays a column wants (more where its replays disagree), and the
count store's key of a column's replays (store/counted.py). Apart from the lane: these
are pure functions of the lab, the run folder and the finished replays, read without
running anything.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import cast

from dbregress import benchmarks, configs
from dbregress.analysis.cost import needs_more
from dbregress.analysis.cost_methods import COST_METRICS, value_of
from dbregress.cost import reuse
from dbregress.cost.replay import KEPT, replay_column, step_key
from dbregress.engines.base import Sizes
from dbregress.engines.registry import engine_class
from dbregress.execution import prepare
from dbregress.explain.explainer import Sizing
from dbregress.explain.jobs import Choice
from dbregress.lab.file import Column, Comparison, Lab
from dbregress.method import identity as method
from dbregress.model.errors import ConfigRejected, LabError
from dbregress.shapes.count_store import EngineConfig
from dbregress.shapes.method import MethodIdentity
from dbregress.shapes.replay import ReplayRecord
from dbregress.shapes.run import RunJson
from dbregress.shapes.spec import EngineSpec
from dbregress.shapes.step_result import StepResultJson
from dbregress.store import counted
from dbregress.store import replays as replay_store
from dbregress.store.counted import CountKey
from dbregress.store.files import write_json

# The lane's windows: smaller than explain's (which reads function tables from them), so
# a replay of the quickstart's steps takes a minute or two under callgrind (50-100 times
# slower than native with the cache simulation on). A timed step: the Q calls of 50 ms
# of the run (50 to 1000; 20 ms windows of the q-steps were up to 1.7% apart between
# replays: their reader and paced writer interleave a little differently each time),
# centred on the middle of the time lane's measured window, after its warm-up's calls
# and half its measured ones (half as many as the window counts instrumented, the rest
# at valgrind's uninstrumented speed: explainer.timed_middle), so the engine's caches
# are as warm as when it was timed; a
# fixed-work step (loads, overwrites): the calls of 20 ms of
# the run (50 to 2000: l.i0's are batches of rows) from a quarter of its calls on, its
# counts repeat closely. The replays' agreement (docs/verdicts.md) says whether this is
# enough, and a column whose replays disagree gets more of them.
LANE_SIZING = Sizing(
    budget_s=0.05, min_ops=50, max_ops=1000, max_fixed_ops=2000, fixed_budget_s=0.02
)
# Failed replays run again, at most this many a column (a crash under valgrind that
# does not come back: EngineCrashed in one replay of an A/B whose others ran clean).
RETRIES = 2
# The metrics whose disagreement adds replays: the headline and instructions.
EXTEND_ON = COST_METRICS[:2]
# The lane's part of a stored replay's key (store/counted.py): how it sizes windows and
# what a replay keeps of them.
PROFILE = counted.digest(
    {
        "sizing": dataclasses.asdict(LANE_SIZING),
        "kept": KEPT,
        "replay_schema": replay_store.SCHEMA_VERSION,
    }
)


def same_windows(run: Path, choices: dict[str, dict[str, Choice]]) -> None:
    """Every session of a run counts at the same windows: the first stores them
    (cost/windows.json), a resumed one takes them, whatever the store holds by then."""
    path = run / replay_store.COST_DIR / "windows.json"
    if path.is_file():
        kept = json.loads(path.read_text())
        for label, windows in kept.items():
            mine = choices.get(label)
            if mine and set(windows) == set(mine):
                choices[label] = reuse.adopt(mine, windows)
        return
    write_json(path, {label: reuse.windows_of(c) for label, c in choices.items()})


def counted_steps(
    lab: Lab, comp: Comparison, results: list[StepResultJson], skipped: dict[str, str]
) -> list[str]:
    """The comparison's steps the lane counts or runs uncounted before one it counts:
    its reported steps measured in every column (the others named in `skipped`), as
    far as the lab's count_steps asks."""
    reported = [p.name for p in benchmarks.plans(comp) if p.reported]
    measured = {
        s
        for s in reported
        if all(
            any(r["column"] == c.label and r["step"] == s for r in results)
            for c in (comp.base, *comp.columns)
        )
    }
    for s in reported:
        if s not in measured:
            skipped[f"{comp.name}/{s}"] = "a column has no measured repeat to size its window from"
    steps = [s for s in reported if s in measured]
    if lab.count_steps:
        unknown = [s for s in lab.count_steps if s not in reported]
        if unknown and len(lab.comparisons) == 1:
            raise LabError(
                f"count_steps: {', '.join(unknown)} is not a reported step of "
                f"{comp.name}; its steps are {', '.join(reported)}"
            )
        wanted = set(lab.count_steps)
        # the steps before the last counted one run too, uncounted (Replay.steps)
        steps = [s for s in steps if s in wanted or _before(reported, s, wanted)]
        if not wanted & set(steps):
            steps = []
    return steps


def count_key(
    lab: Lab,
    comp: Comparison,
    column: Column,
    build: Mapping[str, object] | None,
    identity: MethodIdentity,
    sizes: Sizes | None = None,
) -> CountKey | None:
    """The store's key of a column's replays (store/counted.py); None for a build whose
    identity does not pin its code, or whose configuration cannot be rendered. Each
    step is named by its spec as a counting replay runs it, but for the engine's
    connection (the seed, clients, warm-up and injected slowdown with it), with its
    name as the lane counts it (the column's config and settings, a test hook's
    included), the engine's sizes the replay runs with (`sizes`: a fleet worker's are
    its own; None: this host's, a cache sized from its memory) and the configuration
    the engine starts with in a counting replay (`engine_config`)."""
    build_key = reuse.build_key(build)
    count = method.count_key(identity)
    if build_key is None or count is None:
        return None
    col = replay_column(column)
    sized = sizes if sizes is not None else prepare.engine_sizes(comp)
    config = engine_config(col, sized)
    if config is None:
        return None
    steps = []
    for index, plan in enumerate(benchmarks.plans(comp), start=1):
        spec = dict(prepare.spec_for(lab, comp, col, NO_ENGINE, index, plan, prepare.Mode.COUNT))
        spec.pop("engine", None)
        named = {"spec": spec, "name": step_key(plan, col), "sizes": dataclasses.asdict(sized)}
        steps.append(counted.digest({**named, "config": config}))
    return CountKey(build_key, count, tuple(steps), PROFILE)


def keys_for(
    lab: Lab, comp: Comparison, record: RunJson, identity: MethodIdentity
) -> dict[str, reuse.KeyFor]:
    """Per column of a comparison, its store key at the sizes a replay runs with, of
    its build as run.json records it."""
    builds: Mapping[str, Mapping[str, object]] = record.get("builds") or {}
    return {
        c.label: functools.partial(count_key, lab, comp, c, builds.get(c.label), identity)
        for c in comp.columns
    }


def engine_config(column: Column, sizes: Sizes) -> EngineConfig | None:
    """The configuration a counting replay of `column` starts its engine with, but for
    its paths: the column's profile (configs/<family>/<name>.conf) rendered with
    `sizes`, under the engine's counting settings and the column's own, and the digest
    of the code that turns them into the engine's configuration (`settings_code`: a
    version's own lines, RocksDB's option types). None when the profile cannot be
    rendered (the replay would fail on it, and a failed replay is never stored)."""
    engine = column.build.engine
    settings = {**engine_class(engine).COUNTING_SETTINGS, **column.settings}
    try:
        rendered = configs.render(configs.family_of(engine), column.config, sizes, settings)
    except ConfigRejected:
        return None
    return {"settings": rendered, "code": settings_code(engine)}


@functools.cache
def settings_code(engine: str) -> str:
    """The digest of the code that makes an engine's configuration of its settings: the
    modules of its Engine class and of the classes it derives from, the profiles' own
    module and the family's (configs/mysql's version lines)."""
    mro = engine_class(engine).__mro__
    modules = {c.__module__ for c in mro if c.__module__.startswith("dbregress.")}
    files = sorted(
        f for m in modules if (f := getattr(sys.modules[m], "__file__", None)) is not None
    )
    family = configs.CONFIG_ROOT / configs.family_of(engine) / "__init__.py"
    files += [str(configs.CONFIG_ROOT / "__init__.py")]
    files += [str(family)] if family.is_file() else []
    return counted.digest({Path(f).name: Path(f).read_text() for f in files})


# The connection of a step spec the store's key is made of: none (paths and sockets)
NO_ENGINE = cast(EngineSpec, {})


def wanted_replays(
    lab: Lab, label: str, chosen: set[str], finished: Callable[[str], list[ReplayRecord]]
) -> tuple[int, frozenset[str] | None]:
    """The replays wanted of a column (`chosen`: its steps with a window; `finished`:
    a column's finished replays) and the steps the added ones count (None: every step):
    count_replays; then, up to count_replays_max, replays counting the steps where the
    replays of any column of its comparison split into clusters or disagree beyond the
    cost band, or where a column against its base would be `undecided` once both have
    count_replays (analysis/cost.py needs_more). Both sides of such a step get the
    added replays: the verdict stays `undecided` until both have count_replays_max,
    and with that many the measured floor carries the states."""
    done = [r for r in finished(label) if r.get("status") == "ok"]
    if len(done) < lab.count_replays:
        return lab.count_replays, None
    peers = {
        c.label
        for comp in lab.comparisons
        if label in {c.label for c in comp.columns}
        for c in comp.columns
    }
    ok = {p: [r for r in finished(p) if r.get("status") == "ok"] for p in sorted(peers)}
    counted = set(lab.count_steps) or chosen
    loose = loose_steps(lab, label, counted & chosen, ok)
    if not loose:
        return lab.count_replays, None
    return lab.count_replays_max, frozenset(loose)


def loose_steps(
    lab: Lab, label: str, steps: set[str], finished: Mapping[str, list[ReplayRecord]]
) -> set[str]:
    """The steps of `steps` whose replays of a column of `label`'s comparisons (its ok
    ones, `finished`, by column) split into clusters or disagree beyond the cost band,
    or where a column against its base would be `undecided` once both have
    count_replays (analysis/cost.py needs_more)."""
    band = lab.verdict.cost_band
    # (base, column) of every comparison this column is in
    pairs = [
        (comp.columns[0].label, c.label)
        for comp in lab.comparisons
        if label in {c.label for c in comp.columns}
        for c in comp.columns[1:]
    ]
    loose = set()
    for step in steps:
        for metric in EXTEND_ON:
            sides = {
                p: [
                    v
                    for r in replays
                    if step in r["steps"]
                    and (v := value_of(r["steps"][step]["per_op"], metric)) is not None
                    and v > 0
                ]
                for p, replays in finished.items()
            }
            judged = [
                (sides[b], sides[c])
                for b, c in pairs
                if min(len(sides[b]), len(sides[c])) >= lab.count_replays
            ]
            alpha = lab.verdict.alpha
            if needs_more(list(sides.values()), band, judged, alpha):
                loose.add(step)
    return loose


def _before(order: list[str], step: str, wanted: set[str]) -> bool:
    """Whether `step` comes before the last of the `wanted` steps."""
    last = max((order.index(w) for w in wanted if w in order), default=-1)
    return order.index(step) < last


def warmed(choice: Choice) -> Choice:
    """A fixed-work step's window with the simulated caches warmed by as many calls as
    it counts, not by every call before it (a timed step's windows() sized already:
    up to the middle of the time lane's measured window, the last half-window of it
    instrumented)."""
    if choice.plan.duration_s:
        return choice
    return dataclasses.replace(choice, warm_ops=min(choice.skip_ops, choice.ops))
