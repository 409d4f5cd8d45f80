"""The cost lane of a run: for every column, `count_replays` independent counting
replays (a fresh engine each), every reported step's window of Q operations counted
under callgrind, per operation (explain/jobs.py does the counting; prepare.py the steps,
so the replays run the time lane's steps, with the adjustments explain/jobs.py makes for
counting: docs/verdicts.md, "What the counting replays change").

It runs after the time lane's last job, never beside it. Counts do not depend on CPU
contention (valgrind runs one thread at a time and counts events, not time), so the
replays run side by side, one per CPU, unpinned. Where the replays of some column split
into clusters or disagree beyond the cost band in a step (its count depends on what
background work left at the window), every column of that comparison gets more replays
of the step, up to `count_replays_max`, all of the same procedure; with that many the
verdict rests on the Welch interval with its measured noise floor (analysis/cost.py).

Each replay is written to cost/<column>/r<N>.json the moment it ends. Ctrl-C kills the
replays under way (counting replays are not finished steps) and keeps the finished ones;
`dbregress run --resume` runs only the missing ones.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import shutil
import threading
import time
import traceback
from collections.abc import Callable, Mapping
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from typing import cast

from dbregress import benchmarks, interrupts, method, prepare, provision
from dbregress.analysis import state
from dbregress.analysis.cost import COST_METRICS, needs_more, value_of
from dbregress.benchmarks import insert
from dbregress.benchmarks.plan import StepPlan
from dbregress.collect import valgrind
from dbregress.cost import reuse
from dbregress.engines import process
from dbregress.engines.registry import engine_class
from dbregress.errors import DbregressError, Interrupted, LabError
from dbregress.execute import run_work_dir
from dbregress.explain import jobs
from dbregress.explain.explainer import Sizing, sizing_results, windows
from dbregress.explain.jobs import Choice, ColumnJob
from dbregress.explain.replay_changes import replay_changes
from dbregress.interrupts import hurrying, shielded
from dbregress.lab import Column, Comparison, Lab, VerdictPolicy
from dbregress.provision import Build
from dbregress.shapes.explain import CountFigures
from dbregress.shapes.method import MethodIdentity
from dbregress.shapes.replay import (
    CostLaneRecord,
    ReplayError,
    ReplayRecord,
    ReplayStep,
)
from dbregress.shapes.spec import EngineSpec
from dbregress.shapes.step_result import StepResultJson
from dbregress.store import counted
from dbregress.store import replays as replay_store
from dbregress.store.counted import CountKey
from dbregress.store.files import write_json
from dbregress.store.history import index_into
from dbregress.store.run import read_run

Notify = Callable[[str], None]

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
# What a replay keeps of explain's figures for each step: no function tables.
KEPT = (
    *("index", "unit", "ops", "rows", "divisor", "skip_ops", "files", "scope", "caches"),
    "wall_s",
    "objects",  # instructions per operation by object file (the server, libc, ...)
    # the engine's state over the counted and the timed window, and whether they differ
    # (analysis/state.py): a step with a state_mismatch gets no verdict
    "engine_state",
    "state_mismatch",
)
# The lane's part of a stored replay's key (store/counted.py): how it sizes windows and
# what a replay keeps of them.
PROFILE = counted.digest(
    {
        "sizing": dataclasses.asdict(LANE_SIZING),
        "kept": KEPT,
        "replay_schema": replay_store.SCHEMA_VERSION,
    }
)


@dataclass(frozen=True)
class Replay:
    comparison: Comparison
    column: Column
    number: int  # from 1
    # The steps it counts (None: all). An added replay counts only the steps whose
    # replays disagree; it runs the others exactly as a counting replay does, uncounted,
    # up to the last step it counts, so the state each counted window meets is the same.
    steps: frozenset[str] | None = None

    @property
    def name(self) -> str:
        return f"{self.column.label}/c{self.number}"


class Lane:
    def __init__(self, run: Path, lab: Lab, notify: Notify, workers: int | None = None) -> None:
        self.run, self.lab, self.notify = run, lab, notify
        self.workers = max(1, workers or os.cpu_count() or 1)
        # Short names: a server's socket lives below and must fit in 107 bytes.
        self.root = run_work_dir(run.name, "cost")
        self.cancelled = threading.Event()
        self.builds: dict[str, Build] = {}
        self.choices: dict[str, dict[str, Choice]] = {}  # label -> step -> window
        self.skipped: dict[str, str] = {}  # step (comparison/step) -> why not counted
        self._lock = threading.Lock()
        self._done = 0
        self._planned = 0
        # the store of counting replays (store/counted.py, cost/reuse.py)
        self.reuse = reuse.Reuse(run, notify, lab.recount, lab.verdict.cost_band)

    # -- planning ---------------------------------------------------------------------

    def _plan(self) -> None:
        data = read_run(self.run)
        results = sizing_results(data)
        for comp in self.lab.comparisons:
            steps = counted_steps(self.lab, comp, results, self.skipped)
            for column in comp.columns:
                self._fetch(column)
                # The base's pace for every column: the paced writers of the q-steps
                # and *whilewriting steps then do as many writes per Q call in every
                # build. With each column's own time-lane rate, a build 12% slower in
                # time counted fewer writes per query (qr500 moved 1,500 instructions).
                found = windows(
                    comp, steps, column.label, results, sizing=LANE_SIZING, own_pace=False
                )
                self.choices[column.label] = {
                    step: warmed(choice) for step, choice in found.items()
                }
            self._adopt(comp, data.record.get("builds") or {})
        self.reuse.claimed_in(self._finished_all())
        same_windows(self.run, self.choices)

    def _fetch(self, column: Column) -> None:
        """The column's build, here (a fleet's lane has its workers fetch it)."""
        self.builds[column.label] = provision.fetch(column.build)

    def _finished_all(self) -> list[ReplayRecord]:
        return replay_store.load_replays(self.run)  # as count_replay() made them

    def _finished(self, label: str) -> list[ReplayRecord]:
        return _of(self._finished_all(), label)

    # -- the store of counting replays (cost/reuse.py) --------------------------------

    def _count_method(self) -> MethodIdentity:
        """The method identity the lane's replays count by (this host's)."""
        return method.identity()

    def _adopt(self, comp: Comparison, builds: Mapping[str, object]) -> None:
        for column in comp.columns:
            build = cast(Mapping[str, object] | None, builds.get(column.label))
            key = count_key(self.lab, comp, column, build, self._count_method())
            self.reuse.keys[column.label] = key
        labels = [c.label for c in comp.columns if self.choices.get(c.label)]
        self.reuse.adopt(comp.name, labels, self.choices, comp.sizes.warmup())

    def _claim(self, todo: list[Replay]) -> list[Replay]:
        """The replays of `todo` no stored replay stands for; those it does are written
        to the run as its own, with where they were counted (cost/reuse.py)."""
        rest = []
        for replay in todo:
            label = replay.column.label
            record = self.reuse.take(
                replay.comparison.name, label, replay.number, replay.steps, self.choices.get(label)
            )
            if record is None:
                rest.append(replay)
                continue
            replay_store.save_replay(self.run, label, replay.number, record)
            self._index(record)
        return rest

    def _wanted(self, label: str) -> tuple[int, frozenset[str] | None]:
        records = self._finished_all()
        return wanted_replays(
            self.lab, label, set(self.choices.get(label, {})), lambda p: _of(records, p)
        )

    def _missing(self) -> list[Replay]:
        """The replays still to count: those _needed lists that no stored replay stands
        for (_claim), asked again after each replay taken from the store (the replays
        taken may leave a step loose: more are wanted)."""
        while True:
            todo = self._needed()
            rest = self._claim(todo)
            if len(rest) == len(todo):
                return rest

    def _needed(self) -> list[Replay]:
        """The replays still to run: up to the column's wanted number of ok ones
        (_wanted), each failed replay run again under a new number (at most
        RETRIES a column: an engine that crashed once under valgrind gets another
        chance; one that always crashes stays failed, with its error stored). A replay
        that stands for a failed one of the first count_replays counts every step."""
        todo = []
        for comp in self.lab.comparisons:
            for column in comp.columns:
                if not self.choices.get(column.label):
                    continue
                finished = self._finished(column.label)
                have = {r["replay"] for r in finished}
                ok = [r for r in finished if r.get("status") == "ok"]
                retries = min(len(finished) - len(ok), RETRIES)
                wanted, steps = self._wanted(column.label)
                first = frozenset(self.lab.count_steps) or None
                full = sum(1 for r in ok if not r.get("counts_only"))
                whole = max(0, self.lab.count_replays - full)
                numbers = [n for n in range(1, wanted + retries + 1) if n not in have]
                todo += [
                    Replay(comp, column, n, first if i < whole else steps)
                    for i, n in enumerate(numbers)
                ]
        return todo

    # -- running ----------------------------------------------------------------------

    def _require(self) -> None:
        valgrind.require()

    def run_lane(self) -> None:
        self._require()
        if hook := hook_settings():
            self.notify(
                f"cost lane: test hook {TEST_SETTINGS_ENV} sets "
                f"{', '.join(f'{k}={v}' for k, v in hook.items())} in every counting replay: "
                "its engines are not the time lane's"
            )
        started = time.monotonic()
        self._plan()
        todo = self._missing()
        self._planned = len(todo)
        self.reuse.tell()
        if todo:
            self.notify(
                f"cost lane: {len(todo)} counting replay(s) of {len(self.choices)} column(s) "
                f"under valgrind, {self.workers} at a time"
            )
        while todo:  # a second round adds replays where a column's disagree
            self._run_all(todo)
            todo = self._missing()
            self.reuse.tell()
            if todo:
                self._planned += len(todo)
                self.notify(
                    f"cost lane: {len(todo)} more replay(s) of "
                    f"{', '.join(sorted({r.column.label for r in todo}))}: a replay failed, "
                    f"or their replays of some step disagree beyond "
                    f"±{self.lab.verdict.cost_band:.0%} or leave it undecided"
                )
        with contextlib.suppress(OSError):  # left if a killed replay's files remain
            self.root.rmdir()
        took_s = round(time.monotonic() - started, 1)
        record = lane_record(self.lab, self.workers, took_s, self.skipped)
        record["store"] = self.reuse.record()
        # what the replays changed, as the reports disclose it (explain/replay_changes.py),
        # from the columns as the replays ran them (a test hook's settings included)
        record["replay_changes"] = replay_changes(
            self.lab, LANE_SIZING, self.choices, self.builds, replay_column
        )
        replay_store.save_lane(self.run, record)
        index_into(
            self.run.parent, lambda h: h.index_run(self.run), self.notify, existing_only=True
        )

    def _run_all(self, todo: list[Replay]) -> None:
        # Ctrl-C while the replays are being handed to the pool is caught too: raised out
        # of the `with`, it would leave the pool waiting for every replay already handed
        # over to run to its end (a bisection's test once waited past two minutes there).
        futures: set[Future[None]] = set()
        with hurrying(self._kill_all), ThreadPoolExecutor(self.workers) as pool:
            try:
                interrupts.check()
                for replay in todo:
                    futures.add(pool.submit(self._one, replay))
                pending = set(futures)
                while pending:
                    _, pending = wait(pending, timeout=0.5, return_when=FIRST_COMPLETED)
                    interrupts.check()
            except KeyboardInterrupt as e:
                self.cancelled.set()
                with shielded():
                    while any(not f.done() for f in futures):
                        self._kill_all()
                        time.sleep(0.2)
                name = e.args[0] if e.args else "SIGINT"
                raise Interrupted(
                    f"interrupted ({name}) in the cost lane; finished replays are in "
                    f"{self.run / replay_store.COST_DIR}; continue with `dbregress run --resume "
                    f"{self.run}`"
                ) from None

    def _kill_all(self) -> None:
        """SIGKILL every process of the lane's replays."""
        kill_below(self.root)

    def _one(self, replay: Replay) -> None:
        if self.cancelled.is_set():
            return
        label = replay.column.label
        column = [c.label for c in self.lab.columns].index(label)
        work = self.root / f"{column}.{replay.number}"
        out = self.run / replay_store.COST_DIR / label / f"r{replay.number}"
        record = count_replay(
            self.lab, replay, self.builds[label], self.choices[label], work, out, self.cancelled
        )
        if record is not None:
            self._keep(replay, record)

    def _index(self, record: ReplayRecord) -> None:
        index_into(
            self.run.parent,
            lambda h: h.index_replay(self.run, record),
            self.notify,
            existing_only=True,
        )

    def _keep(self, replay: Replay, record: ReplayRecord) -> None:
        """A finished replay's record: stored, indexed, told."""
        label = replay.column.label
        replay_store.save_replay(self.run, label, replay.number, record)
        self.reuse.put(
            replay.column.label,
            str(replay.column.build),
            replay.number,
            record,
            self.choices.get(replay.column.label),
        )
        self._index(record)
        with self._lock:
            self._done += 1
            done = self._done
        what = "counted" if record["status"] == "ok" else f"FAILED ({record['error']['message']})"
        where = f" on {record['host']}" if record.get("host") else ""
        self.notify(
            f"cost lane: {replay.name} {what}{where} in {record['took_s']:.0f} s "
            f"({done}/{self._planned})"
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
) -> CountKey | None:
    """The store's key of a column's replays (store/counted.py); None for a build whose
    identity does not pin its code. Each step is named by its spec as a counting replay
    runs it, but for the engine's connection (the seed, clients, warm-up and injected
    slowdown with it), with its name as the lane counts it (the column's config and
    settings, a test hook's included) and the engine's sizes on this host (a cache
    sized from the host's memory)."""
    build_key = reuse.build_key(build)
    count = method.count_key(identity)
    if build_key is None or count is None:
        return None
    col = replay_column(column)
    sizes = dataclasses.asdict(prepare.engine_sizes(comp))
    steps = []
    for index, plan in enumerate(benchmarks.plans(comp), start=1):
        spec = dict(prepare.spec_for(lab, comp, col, NO_ENGINE, index, plan, prepare.Mode.COUNT))
        spec.pop("engine", None)
        steps.append(counted.digest({"spec": spec, "name": step_key(plan, col), "sizes": sizes}))
    return CountKey(build_key, count, tuple(steps), PROFILE)


# The connection of a step spec the store's key is made of: none (paths and sockets)
NO_ENGINE = cast(EngineSpec, {})


def _of(records: list[ReplayRecord], label: str) -> list[ReplayRecord]:
    return [r for r in records if r["column"] == label]


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


def lane_record(lab: Lab, workers: int, took_s: float, skipped: dict[str, str]) -> CostLaneRecord:
    """cost/lane.json: how the lane counted."""
    return {
        "kind": "cost-lane",
        "took_s": took_s,
        "workers": workers,
        "replays_per_column": lab.count_replays,
        "replays_max": lab.count_replays_max,
        "valgrind": valgrind.version(),
        "method": "callgrind --cache-sim=yes --branch-sim=yes --collect-systime=yes "
        "over a window of each step's Q operations, zeroed and dumped through vgdb",
        "caches": list(valgrind.CACHES),
        "cycles_model": {"l1": 1, "ll": jobs.CYCLES_LL, "ram": jobs.CYCLES_RAM},
        "replay_settings": {
            "postgres": engine_class("postgres").COUNTING_SETTINGS,
            "mysql": engine_class("mysql").COUNTING_SETTINGS,
        },
        "lockstep_steps": list(insert.LOCKSTEP_STEPS),
        "skipped": skipped,
    }


def kill_below(root: Path) -> None:
    """SIGKILL every process whose command line or working directory lies in `root`
    (a replay's engine and loadgen, run in sessions of their own)."""
    text = str(root)
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().decode(errors="replace")
            cwd = os.readlink(entry / "cwd")
        except OSError:
            continue
        if text in cmdline or cwd.startswith(text):
            process.kill(int(entry.name))


def count_replay(
    lab: Lab,
    replay: Replay,
    build: Build,
    choices: dict[str, Choice],
    work: Path,
    out: Path,
    cancelled: threading.Event,
) -> ReplayRecord | None:
    """One counting replay in `work` (its engine's data), its files in `out`; the record
    to store, or None when it was cancelled (not a finished replay)."""
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    for d in (work, work.parent):
        d.chmod(0o755)
    out.mkdir(parents=True, exist_ok=True)
    if replay.steps is not None:
        last = max(c.index for s, c in choices.items() if s in replay.steps)
        choices = {
            s: c if s in replay.steps else dataclasses.replace(c, counted=False)
            for s, c in choices.items()
            if c.index <= last
        }
    column = replay_column(replay.column)  # the test hook's settings over its own; unpinned
    job = ColumnJob(lab, replay.comparison, column, build, choices, work, out, False, False)
    t0 = time.monotonic()
    # Built in the order it is stored; complete (status, steps, took_s) once it ran.
    record = cast(
        ReplayRecord,
        {
            "comparison": replay.comparison.name,
            "column": replay.column.label,
            "replay": replay.number,
            "build": str(replay.column.build),
            "build_identity": dict(build.identity),  # the count store's key (a worker's own)
            # how this replay counted (the host's loadgen, valgrind, libc, ...): history
            # never sets counts of two methods against each other (dbregress/method.py)
            "method_identity": method.identity(),
        },
    )
    if replay.steps is not None:
        record["counts_only"] = sorted(replay.steps)
    try:
        found = jobs.count(job, lambda line: None)
        steps = {s: counted_step(f, lab, choices[s].plan, column) for s, f in found.items()}
        record["status"] = "ok"
        record["steps"] = steps
    except Exception as e:  # recorded: the other replays still run
        if cancelled.is_set():
            return None  # killed by Ctrl-C: not a finished replay
        why: ReplayError = {"type": type(e).__name__, "message": str(e)}
        if not isinstance(e, DbregressError):
            why["traceback"] = "".join(traceback.format_exception(e)).strip()
        record["status"] = "failed"
        record["error"] = why
        record["steps"] = {}
    finally:
        shutil.rmtree(work, ignore_errors=True)
    record["took_s"] = round(time.monotonic() - t0, 1)
    return record


def counted_step(figures: CountFigures, lab: Lab, plan: StepPlan, column: Column) -> ReplayStep:
    """What a replay keeps of a counted window (_kept), with the step as counted
    (`step_key`, of the column as counted: the test hook's settings too), the history
    floor's key."""
    step = _kept(figures, lab.verdict.cost_band)
    step["spec"] = step_key(plan, column)
    return step


def step_key(plan: StepPlan, column: Column) -> str:
    """The name of a step as this lane counts it (method.step_key): the plan's workload
    and the column's engine configuration."""
    workload = {"name": plan.name, "step": plan.step, **plan.section}
    workload |= {"duration_s": plan.duration_s, "work": plan.work}
    return method.step_key(workload, column.config, column.settings)


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


def _kept(figures: CountFigures, band: float = VerdictPolicy.cost_band) -> ReplayStep:
    """What a replay keeps of a window's figures: KEPT's (those it has, in KEPT's
    order), then the figures per operation; its engine state judged against the timed
    window's with the tolerance its count gives at the cost band `band`
    (analysis/state.py settle)."""
    given: Mapping[str, object] = figures
    out = cast(ReplayStep, {k: given[k] for k in KEPT if k in given})
    out["per_op"] = figures["per_op"]
    if "background_per_op" in figures:
        out["background_per_op"] = figures["background_per_op"]
    if "client_per_op" in figures:  # an embedded engine's
        out["client_per_op"] = figures["client_per_op"]
    state.settle(cast(state.Counted, out), band)
    return out


# A test hook, read by the counting replays only: settings over each column's in every
# counting replay (never in the time lane), "name=value" pairs separated by commas, as a
# column's `settings` in the lab file take them. It makes a replay's engine differ from
# the one the time lane timed on purpose: a tiny `shared_buffers`, say, gives counted
# windows a colder cache than the timed ones, which the state check must catch
# (tests/e2e/test_cost_state.py). Never set it to measure anything.
TEST_SETTINGS_ENV = "DBREGRESS_TEST_REPLAY_SETTINGS"


def hook_settings() -> dict[str, str]:
    """The test hook's settings (TEST_SETTINGS_ENV), {} when unset."""
    raw = os.environ.get(TEST_SETTINGS_ENV, "").strip()
    out = {}
    for part in filter(None, (p.strip() for p in raw.split(","))):
        name, sep, value = part.partition("=")
        if not sep or not name.strip() or not value.strip():
            raise LabError(
                f"{TEST_SETTINGS_ENV}: {part!r} is not name=value (pairs separated by commas, "
                "e.g. shared_buffers=1MB); unset it to count the lab's own settings"
            )
        out[name.strip()] = value.strip()
    return out


def replay_column(column: Column) -> Column:
    """The column as a counting replay runs it: with the test hook's settings over its
    own (hook_settings)."""
    extra = hook_settings()
    if not extra:
        return column
    return dataclasses.replace(column, settings={**column.settings, **extra})


def run_lane(run: Path, lab: Lab, notify: Notify, workers: int | None = None) -> None:
    Lane(run, lab, notify, workers).run_lane()
