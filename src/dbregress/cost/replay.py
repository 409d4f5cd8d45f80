"""One counting replay of the cost lane (cost/lane.py runs them): the replay a column
gets (`Replay`), running it under callgrind (`count_replay`, a worker of a fleet's lane
calls it too), what it keeps of each counted window, and the test hook's settings over
a column's. Apart from the lane so a single replay can be run, and its record read,
without the lane that plans and schedules them.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shutil
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import cast

from dbregress.analysis import state
from dbregress.benchmarks.plan import StepPlan
from dbregress.collect import valgrind
from dbregress.engines import process
from dbregress.explain import counting
from dbregress.explain.jobs import Choice, ColumnJob
from dbregress.lab.file import Column, Comparison, Lab, VerdictPolicy
from dbregress.method import identity as method
from dbregress.model.errors import DbregressError, LabError, is_bug, traceback_of
from dbregress.provision import Build
from dbregress.shapes.explain import CountFigures
from dbregress.shapes.replay import ReplayError, ReplayRecord, ReplayStep

# What a replay keeps of explain's figures for each step; of its function table only the
# costliest FUNCTIONS_IN_REPLAY functions' instructions per operation (`functions`).
FUNCTIONS_IN_REPLAY = 300  # as explain keeps (explain/count_figures.py FUNCTIONS_KEPT)
KEPT = (
    *("index", "unit", "ops", "rows", "divisor", "skip_ops", "files", "scope", "caches"),
    "wall_s",
    "objects",  # instructions per operation by object file (the server, libc, ...)
    # the engine's state over the counted and the timed window, and whether they differ
    # (analysis/state.py): a step with a state_mismatch gets no verdict
    "engine_state",
    "state_mismatch",
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


# Builds whose counting replay valgrind killed with SIGILL (an instruction it cannot
# run: the build's, on this host, every time), by build, with the error said: the
# column's other replays fail at once with it instead of spending minutes each.
_SIGILL: dict[str, str] = {}


def _known_sigill(build: Build) -> None:
    """ValgrindError with its line when a replay of `build` already died of SIGILL."""
    if known := _SIGILL.get(f"{build.spec}@{build.basedir}"):
        raise valgrind.ValgrindError(known)


def _valgrind_error(build: Build, work: Path, out: Path) -> str | None:
    """The one line a replay fails with when valgrind, not the engine, ended it: killed
    by SIGILL (which build, and why; kept for the build's other replays, _known_sigill)
    or valgrind giving up on the build (its own words). None when valgrind's logs say
    neither. The logs are where the count wrote them (the replay's `work`), or `out`."""
    if known := _SIGILL.get(f"{build.spec}@{build.basedir}"):
        return known
    why = valgrind.sigill(work) or valgrind.sigill(out)
    if why is None:
        gave_up = valgrind.gave_up(work) or valgrind.gave_up(out)
        return f"{build.spec}: {gave_up}" if gave_up else None
    line = (
        f"{build.spec}: killed by SIGILL under valgrind: the build uses {why}; "
        "count a build without it (for this CPU minus what valgrind lacks: "
        "-march=native -mno-avx512f -mno-avxvnni ..., as rocksdb@src:'s rel)"
    )
    _SIGILL[f"{build.spec}@{build.basedir}"] = line
    return line


def _failure(error: Exception, build: Build, work: Path, out: Path) -> str:
    """A failed replay's message; its valgrind logs and loadgen stderr copied into its
    folder of the run (`work`, its engine's data, is removed): what failed stays."""
    for log in [*work.rglob("valgrind.*.log"), *work.rglob("*.stderr")]:
        with contextlib.suppress(OSError):
            shutil.copy2(log, out / log.name)
    return _valgrind_error(build, work, out) or str(error)


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
            # never sets counts of two methods against each other (dbregress/method/identity.py)
            "method_identity": method.identity(),
        },
    )
    if replay.steps is not None:
        record["counts_only"] = sorted(replay.steps)
    try:
        _known_sigill(build)  # the same build already died of SIGILL under valgrind
        found = counting.count(job, lambda line: None)
        steps = {s: counted_step(f, lab, choices[s].plan, column) for s, f in found.items()}
        record["status"] = "ok"
        record["steps"] = steps
    except Exception as e:  # recorded: the other replays still run
        if cancelled.is_set():
            return None  # killed by Ctrl-C: not a finished replay
        why: ReplayError = {"type": type(e).__name__, "message": _failure(e, build, work, out)}
        record["status"] = "failed"
        record["error"] = _noted(e, why)
        record["steps"] = {}
    finally:
        shutil.rmtree(work, ignore_errors=True)
    record["took_s"] = round(time.monotonic() - t0, 1)
    return record


def _noted(error: Exception, why: ReplayError) -> ReplayError:
    """A failed replay's error with its traceback unless dbregress named it, and marked
    a bug in dbregress when it is one (errors.is_bug): exit 3 where the run is judged,
    never a replay that merely failed (2)."""
    if not isinstance(error, DbregressError):
        why["traceback"] = traceback_of(error)
    if is_bug(error):
        why["bug"] = True
    return why


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
    # the costliest functions' instructions per operation: where a change moved
    # (analysis/functions_moved.py), read from the same replays as the verdict
    out["functions"] = {
        f"{f['function']} ({Path(f['object']).name})": f["instructions"]
        for f in figures.get("functions", [])[:FUNCTIONS_IN_REPLAY]
    }
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
