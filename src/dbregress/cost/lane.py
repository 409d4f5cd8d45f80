"""The cost lane of a run: for every column, `count_replays` independent counting
replays (a fresh engine each), every reported step's window of Q operations counted
under callgrind, per operation (explain/counting.py does the counting; prepare.py the steps,
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

What it counts (steps, windows, how many replays) is planned in cost/planning.py; one
replay runs in cost/replay.py; this module schedules them and writes cost/lane.json.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from pathlib import Path

from dbregress import provision
from dbregress.benchmarks import insert
from dbregress.collect import valgrind
from dbregress.cost import reuse
from dbregress.cost.planning import (
    LANE_SIZING,
    RETRIES,
    counted_steps,
    keys_for,
    same_windows,
    wanted_replays,
    warmed,
)
from dbregress.cost.replay import (
    TEST_SETTINGS_ENV,
    Replay,
    count_replay,
    hook_settings,
    kill_below,
    replay_column,
)
from dbregress.engines.base import Sizes
from dbregress.engines.registry import engine_class
from dbregress.execution import prepare
from dbregress.execution.execute import run_work_dir
from dbregress.explain import count_figures
from dbregress.explain.explainer import sizing_results, windows
from dbregress.explain.jobs import Choice
from dbregress.explain.replay_changes import replay_changes
from dbregress.lab.file import Column, Comparison, Lab
from dbregress.method import identity as method
from dbregress.model import interrupts
from dbregress.model.errors import Interrupted
from dbregress.model.interrupts import hurrying, shielded
from dbregress.provision import Build
from dbregress.shapes.method import MethodIdentity
from dbregress.shapes.replay import CostLaneRecord, ReplayRecord
from dbregress.shapes.run import RunJson
from dbregress.store import replays as replay_store
from dbregress.store.history import host_fingerprint, index_into
from dbregress.store.run import read_run

Notify = Callable[[str], None]


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
        self.reuse = reuse.Reuse(run, notify, lab.recount, lab.verdict.cost_band, lab.recount_every)

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
            self._adopt(comp, data.record)
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

    def _counting_host(self, comp: Comparison, own: str | None) -> tuple[Sizes | None, str | None]:
        """The replays' engine sizes and their host's class: this host's (`own`)."""
        return prepare.engine_sizes(comp), own

    def _adopt(self, comp: Comparison, record: RunJson) -> None:
        sizes, self.reuse.host_class = self._counting_host(comp, host_fingerprint(record["host"]))
        for label, key_for in keys_for(self.lab, comp, record, self._count_method()).items():
            self.reuse.keyed(label, key_for, sizes)
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
        record["store"] = self.reuse.record(self._finished_all())
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


def _of(records: list[ReplayRecord], label: str) -> list[ReplayRecord]:
    return [r for r in records if r["column"] == label]


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
        "cycles_model": {"l1": 1, "ll": count_figures.CYCLES_LL, "ram": count_figures.CYCLES_RAM},
        "replay_settings": {
            "postgres": engine_class("postgres").COUNTING_SETTINGS,
            "mysql": engine_class("mysql").COUNTING_SETTINGS,
        },
        "lockstep_steps": list(insert.LOCKSTEP_STEPS),
        "skipped": skipped,
    }


def run_lane(run: Path, lab: Lab, notify: Notify, workers: int | None = None) -> None:
    Lane(run, lab, notify, workers).run_lane()
