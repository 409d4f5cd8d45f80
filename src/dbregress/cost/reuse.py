"""When a stored counting replay (store/counted.py) may stand for one the cost lane
would count now, and how it is taken.

A replay's counts are a function of its build, the steps as it ran them, the counting
method and the windows it counted (their place, length and the writers' pace): replays
of one build agree to 0.0-0.3% whenever and wherever they ran. The store's key holds
the first three; the windows come from the run's time lane (each window sits at the
middle of the base's timed window, at the base's rate), which a new run measures anew
and a little differently. So the lane first adopts windows, per comparison:

- the windows it would choose now (`fresh`), and the window sets stored replays of the
  comparison's columns were counted at;
- a stored set is adopted when every step's window is one the lane could have chosen
  now (`incompatible` says why not): the same steps; a timed step's window inside the
  base's timed window at this run's rate (or within a window's length of the fresh
  one); a fixed-work step's within a window's length of the fresh one; a length within
  half to twice the fresh one; the writers' pace within PACE of this run's; the
  instrumented warm-up before it within half to twice; the hit rate it waits for
  within UNTIL;
- the set with the most stored replays wins (the newest on a tie); with none adopted,
  the fresh windows are used and nothing stored is taken. The pace matters only to a
  step with paced writers (`paced`).

A column counts anew, taking nothing, when it is `due`: the last recount_every - 1 runs
took its key's replays since the newest was counted, or none was counted on this host
class; the store records every take (CountStore.took).

Then, for each replay the lane is missing, it takes a stored one of the column's key at
the adopted windows that counted every step the missing one would, that no other column
of this run took and that this run did not count itself. Its counted state is judged
against this run's timed state (`rejudged`): one that met its own run's timed state but
misses this run's is refused, and a column takes its stored replays all or none. The
taken replay is written to the run folder as a replay of this run, with `reused`
naming where it was counted.
"""

from __future__ import annotations

import copy
import dataclasses
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from dbregress.analysis import state
from dbregress.engines.base import Sizes
from dbregress.explain.jobs import Choice
from dbregress.method import identity as method
from dbregress.model.errors import DbregressError
from dbregress.shapes.count_store import StoredWindow, StoreOrigin
from dbregress.shapes.replay import ReplayRecord, StoreUse
from dbregress.store import counted
from dbregress.store.build_names import build_key as build_key
from dbregress.store.counted import CountKey, CountStore, Stored

Notify = Callable[[str], None]
# A column's key made again for the engine sizes a replay ran with (cost/planning.py
# count_key): a fleet worker sizes the engine from its own memory.
KeyFor = Callable[[Sizes], CountKey | None]
# A build whose replays are taken from the store is counted anew at least once in this
# many runs (the lab's recount_every), so that a draw of the engine's state is not
# carried into every later run, and the history floor has independent counts.
RECOUNT_EVERY = 5

# How far the writers' pace of a stored window may be from this run's, as a ratio: none
# but rounding. A paced step's writers run at a pace pinned by its spec (benchmarks'
# counted_pace), the same in every run, so another pace is another counting method. At
# the base's time-lane rate (before) the pace moved with the host, and a ratio with it:
# PostgreSQL 17.2/12.20 qr1000 1.0542 at 8,224 queries/s, 1.0434 at 4,412, so a quarter
# of the band was a pace factor of 1.17, where 1.5 was allowed (docs/verdicts.md).
PACE = 1.000001
# The step fields that give it paced writers.
PACED = ("insert_rate", "writer_mb_per_s")


# How far the hit rate a stored window waited for may be from this run's (analysis/
# state.py until_rate): the state check judges what the window met in the end.
UNTIL = 0.02


def window_of(choice: Choice) -> StoredWindow:
    """A step's window as the store keeps it."""
    return {
        "index": choice.index,
        "skip_ops": choice.skip_ops,
        "ops": choice.ops,
        "q_per_s": round(choice.q_per_s, 6),
        "warm_ops": choice.warm_ops,
        "until_hit_rate": round(choice.until_hit_rate, 6),
    }


def windows_of(choices: Mapping[str, Choice]) -> dict[str, StoredWindow]:
    return {s: window_of(c) for s, c in sorted(choices.items())}


def incompatible(
    stored: Mapping[str, StoredWindow], fresh: Mapping[str, Choice], warmup_s: float
) -> str | None:
    """Why windows stored with a replay are not ones the lane could choose now (None:
    they are); `fresh`: the windows it would choose from this run's time lane."""
    if set(stored) != set(fresh):
        return f"other steps counted ({', '.join(sorted(stored))})"
    for step, now in fresh.items():
        w = stored[step]
        if w.get("index") != now.index:
            return f"{step} is step {w.get('index')} there, {now.index} here"
        ops, skip, pace = int(w["ops"]), int(w["skip_ops"]), float(w["q_per_s"])
        if not now.ops / 2 <= ops <= now.ops * 2:
            return f"{step}'s window of {ops} calls against {now.ops} now"
        if paced(now) and now.q_per_s > 0 and not 1 / PACE <= pace / now.q_per_s <= PACE:
            return f"{step}'s pace {pace:.0f}/s against {now.q_per_s:.0f}/s now"
        warm = int(w["warm_ops"])
        if bool(warm) != bool(now.warm_ops) or not now.warm_ops / 2 <= warm <= now.warm_ops * 2:
            return f"{step}'s {warm} instrumented calls before the window against {now.warm_ops}"
        until = float(w["until_hit_rate"])
        if bool(until) != bool(now.until_hit_rate) or abs(until - now.until_hit_rate) > UNTIL:
            return f"{step}'s window waits for a hit rate of {until} against {now.until_hit_rate}"
        near = abs(skip - now.skip_ops) <= max(ops, now.ops)
        duration = now.plan.duration_s
        inside = bool(duration) and (
            warmup_s * now.q_per_s <= skip and skip + ops <= (warmup_s + duration) * now.q_per_s
        )
        if not (near or inside):
            return f"{step}'s window after {skip} calls against {now.skip_ops} now"
    return None


def paced(choice: Choice) -> bool:
    """Whether the step has paced writers, whose writes per Q call the window's pace
    sets (the insert benchmark's q-steps, kv's *whilewriting steps); elsewhere the pace
    moves nothing."""
    section: Mapping[str, object] = choice.plan.section
    return any(section.get(k) for k in PACED)


def adopt(fresh: Mapping[str, Choice], windows: Mapping[str, StoredWindow]) -> dict[str, Choice]:
    """A column's choices at the stored `windows` (its own timed state kept)."""
    out = {}
    for step, c in fresh.items():
        w = windows[step]
        out[step] = dataclasses.replace(
            c,
            skip_ops=int(w["skip_ops"]),
            ops=int(w["ops"]),
            q_per_s=float(w["q_per_s"]),
            warm_ops=int(w["warm_ops"]),
            until_hit_rate=float(w["until_hit_rate"]),
        )
    return out


def rejudged(
    record: ReplayRecord, choices: Mapping[str, Choice], band: float
) -> tuple[ReplayRecord, str | None]:
    """A stored replay's record with each counted window's state judged against this
    run's timed state (the column's `choices`' `timed`) at this run's cost band, and
    why it cannot be used (None: it can): a window that met the timed state of the run
    that counted it but misses this run's (the time lane reached another state; a
    fresh count may meet it). A window that missed its own run's timed state and misses
    this run's is taken: its verdict is withheld, as a fresh count's would be (the
    quickstart's overwriteandwait counts a colder cache than it times in every run)."""
    out = copy.deepcopy(record)
    for step, figures in out["steps"].items():
        st = figures.get("engine_state")
        choice = choices.get(step)
        if st is None or choice is None:
            continue
        counted = state.CacheState.from_json(st["counted"])
        tol = state.tolerance(counted.kind, figures["per_op"], band)
        timed = choice.timed
        st["timed"] = timed.to_json() if timed is not None else None
        st["tolerance_misses_per_op"] = None if tol is None else round(tol, 6)
        before = figures.get("state_mismatch")
        why = (
            state.mismatch(counted.kind, counted.misses_per_op, timed, tol)
            if counted.looked_up
            else None
        )
        figures["state_mismatch"] = why
        if why is not None and before is None:
            return out, f"{step}: {why}"
    return out, None


def taken(
    stored: Stored, record: ReplayRecord, comparison: str, label: str, number: int
) -> ReplayRecord:
    """The stored replay as a replay of this run: its number and column here, and
    where it was counted."""
    out = copy.deepcopy(record)
    out.pop("schema_version", None)
    out.pop("kind", None)
    out["comparison"], out["column"], out["replay"] = comparison, label, number
    out["reused"] = {
        "entry": stored.entry,
        "run": stored.origin["run"],
        "column": stored.origin["column"],
        "replay": stored.origin["replay"],
        "stored_at": stored.stored_at,
    }
    return out


def covers(stored: Stored, steps: frozenset[str] | None, chosen: set[str]) -> bool:
    """Whether a stored replay counted every step a missing replay would count (`steps`,
    None: every chosen step)."""
    wanted = set(chosen) if steps is None else set(steps)
    return wanted <= stored.counted_steps


def due(
    store: CountStore, key: CountKey, run: str, every: int, host_class: str | None
) -> str | None:
    """Why a column of `key` counts anew in run `run` although the store may hold its
    replays (None: it may take them): the last `every` - 1 other runs took the key's
    stored replays since its newest was counted (every `every`th run counts anew, so no
    draw of the engine's state stands for every later run, and the history floor gets
    counts of its own; `every` 0: not asked), or none of them was counted on this run's
    host class (`host_class`, None: not known, not asked)."""
    stored = store.get(key)
    if not stored:
        return None
    if host_class is not None and all(s.origin.get("host_class") != host_class for s in stored):
        return f"none of its stored replays was counted on this host class ({host_class})"
    if every <= 0:  # not asked (a bisection's point)
        return None
    newest = max(s.stored_at for s in stored)
    since = {t["run"] for t in store.takes(key) if t["run"] != run and t["taken_at"] > newest}
    if len(since) >= every - 1:
        return (
            f"recount_every = {every}: the last {len(since)} run(s) took its stored "
            "replays since they were counted"
        )
    return None


class Reuse:
    """A cost lane's use of the count store: the key of each column's replays, the
    windows adopted per comparison, the stored replays taken, and what it counted put
    back. Nothing is taken under `recount`, nor by a column that is `due` to count
    anew; everything counted is put, keyed by the sizes it ran with (`key_for`)."""

    def __init__(
        self,
        run: Path,
        notify: Notify,
        recount: bool,
        band: float,
        every: int = RECOUNT_EVERY,
        host_class: str | None = None,
    ) -> None:
        self.run, self.notify, self.recount, self.band = run, notify, recount, band
        # a bisection's points share each build's counts on purpose: every point is
        # judged against the same counts of its ends (docs/bisect.md), so the count of
        # runs that took them (`due`) is not asked there
        self.every = 0 if counted.in_bisection(run) else every
        self.host_class = host_class
        self.store = CountStore(counted.root_for(run), notify)
        self.keys: dict[str, CountKey | None] = {}  # label -> the key its replays take
        self.key_for: dict[str, KeyFor] = {}  # label -> its key at a replay's sizes
        self.took: dict[str, list[str]] = {}  # label -> the entries it took this session
        self.claimed: set[str] = set()  # stored entries this run took
        self.adopted: dict[str, int] = {}  # comparison -> stored replays at its windows
        self.refused: dict[str, str] = {}  # comparison or label -> why nothing was taken
        self.barred: set[str] = set()  # columns that take nothing (`_usable`)
        self.told: set[str] = set()  # refusals said on stderr
        self.taken: list[tuple[str, str]] = []  # (label, run) taken, not yet told

    def keyed(self, label: str, key_for: KeyFor, sizes: Sizes | None) -> None:
        """A column's key at the sizes a replay ran with (`key_for`), and the key its
        stored replays are taken by: at `sizes`, those its replays will run with
        (None: not known here, a fleet's workers of unlike memory; none is taken)."""
        self.key_for[label] = key_for
        self.keys[label] = key_for(sizes) if sizes is not None else None

    def claimed_in(self, records: list[ReplayRecord]) -> None:
        """The entries a resumed run took before."""
        self.claimed |= {r["reused"]["entry"] for r in records if "reused" in r}

    def adopt(
        self,
        comparison: str,
        labels: list[str],
        choices: dict[str, dict[str, Choice]],
        warmup_s: float,
    ) -> None:
        """Set the comparison's columns' `choices` to the windows of their stored
        replays that this run could have chosen, the most replays first (the module's
        text); unchanged when none can be."""
        if self.recount or not labels:
            return
        groups: dict[str, tuple[dict[str, StoredWindow], int, float]] = {}
        seen: set[str] = set()  # columns of one build share their entries
        for label in labels:
            key = self.keys.get(label)
            for stored in self.store.get(key) if key is not None else []:
                if stored.entry in seen:
                    continue
                seen.add(stored.entry)
                name = counted.digest(stored.windows)
                _, n, newest = groups.get(name, (stored.windows, 0, 0.0))
                groups[name] = (stored.windows, n + 1, max(newest, stored.stored_at))
        fresh = choices[labels[0]]
        for kept, n, _ in sorted(groups.values(), key=lambda g: (-g[1], -g[2])):
            try:
                why = incompatible(kept, fresh, warmup_s)
            except (KeyError, TypeError, ValueError) as e:  # an entry of another shape
                why = f"stored windows unreadable ({type(e).__name__}: {e})"
            if why is None:
                for label in labels:
                    choices[label] = adopt(choices[label], kept)
                self.adopted[comparison] = n
                return
            self.refused.setdefault(comparison, f"stored windows not taken: {why}")

    def take(
        self,
        comparison: str,
        label: str,
        number: int,
        steps: frozenset[str] | None,
        choices: dict[str, Choice] | None,
    ) -> ReplayRecord | None:
        """A stored replay standing for replay `number` of column `label` (counting
        `steps`, None: every chosen one), as a replay of this run; None when none can.
        A column takes the stored replays of its key at its windows in the order they
        were stored, or none of them: where one of them misses this run's timed state,
        taking only the others would leave out what a fresh count of the build meets."""
        if self.recount or label in self.barred or not choices:
            return None
        found = self._usable(label, choices)
        if found is None:
            return None
        for stored, record in found:
            if stored.entry in self.claimed or not covers(stored, steps, set(choices)):
                continue
            self.claimed.add(stored.entry)
            self._took(label, stored.entry)
            if steps is not None:
                record["steps"] = {s: f for s, f in record["steps"].items() if s in steps}
                record["counts_only"] = sorted(steps)
            else:
                record.pop("counts_only", None)
            self.taken.append((label, str(stored.origin.get("run"))))
            return taken(stored, record, comparison, label, number)
        return None

    def _usable(
        self, label: str, choices: dict[str, Choice]
    ) -> list[tuple[Stored, ReplayRecord]] | None:
        """The stored replays of the column's key at its windows (but the run's own),
        each judged against this run's timed state; None, and the column refused, when
        any of them does not meet it or cannot be read."""
        key = self.keys.get(label)
        if key is None:
            return None
        why = due(self.store, key, self.run.name, self.every, self.host_class)
        if why is not None:
            self.refused[label] = why
            self.barred.add(label)
            return None
        windows = counted.digest(windows_of(choices))
        out = []
        for stored in self.store.get(key):
            if stored.origin.get("run") == self.run.name:
                continue
            if counted.digest(stored.windows) != windows:
                continue
            try:
                record, why = rejudged(stored.record, choices, self.band)
            except (KeyError, TypeError, ValueError, AttributeError) as e:
                self.notify(f"count store: ignoring {stored.path}: {type(e).__name__}: {e}")
                continue
            if why is not None:
                self.refused[label] = f"engine state: {why} (a stored replay of {stored.entry})"
                self.barred.add(label)
                return None
            out.append((stored, record))
        return out

    def put(
        self,
        label: str,
        build: str,
        number: int,
        record: ReplayRecord,
        choices: dict[str, Choice] | None,
    ) -> None:
        """A replay this run counted, into the store, keyed as it was counted: by the
        method, the build and the engine sizes of the host that counted it (told, never
        raised, when it cannot be written: the run has it)."""
        key = self._as_counted(label, record)
        identity = record.get("method_identity")
        count = method.count_key(identity) if identity is not None else None
        if key is None or not choices or count is None or "reused" in record:
            return
        origin: StoreOrigin = {
            "run": self.run.name,
            "column": label,
            "replay": number,
            "stored_at": time.time(),
            "host": record.get("host"),
            "host_class": self.host_class,
        }
        try:
            self.store.put(
                dataclasses.replace(key, count=count), build, windows_of(choices), record, origin
            )
        except DbregressError as e:
            self.notify(f"count store: replay {label}/c{number} not stored: {e}")

    def _as_counted(self, label: str, record: ReplayRecord) -> CountKey | None:
        """The key of a replay as it was counted: at the engine sizes it ran with (a
        fleet worker's, from its own memory), of the build as the counting host had
        it; None when they are not known here (a worker's replay that does not say its
        sizes is not stored)."""
        sizes, key_for = record.get("engine_sizes"), self.key_for.get(label)
        if sizes is not None and key_for is not None:
            key = key_for(Sizes(sizes["cache_mb"], sizes["wal_mb"], sizes["data_mb"]))
        elif "host" in record:
            return None
        else:
            key = self.keys.get(label)
        if key is not None and "build_identity" in record:  # as the counting host had it
            build_key_there = build_key(record["build_identity"])
            key = dataclasses.replace(key, build=build_key_there) if build_key_there else None
        return key

    def _took(self, label: str, entry: str) -> None:
        """Record in the store that this run's column took `entry` (`due` counts it)."""
        key = self.keys.get(label)
        if key is None:
            return
        self.took.setdefault(label, []).append(entry)
        try:
            self.store.took(key, self.run.name, label, self.took[label])
        except DbregressError as e:
            self.notify(f"count store: the take of {entry} by {label} not recorded: {e}")

    def tell(self) -> None:
        """One line per column whose replays were taken since the last time, and one
        per comparison or column whose stored replays were refused (never silent)."""
        for who, why in sorted(self.refused.items()):
            if who not in self.told:
                self.told.add(who)
                self.notify(f"cost lane: {who}: stored replays not taken, counted anew: {why}")
        by: dict[str, list[str]] = {}
        for label, run in self.taken:
            by.setdefault(label, []).append(run)
        for label, runs in sorted(by.items()):
            self.notify(
                f"cost lane: {label}: {len(runs)} replay(s) taken from the count store "
                f"(counted in {', '.join(sorted(set(runs)))})"
            )
        self.taken = []

    def record(self, replays: list[ReplayRecord]) -> StoreUse:
        """cost/lane.json `store`, with how many of each column's ok `replays` were
        counted in this run (`fresh`) and how many taken from the store."""
        ok = [r for r in replays if r.get("status") == "ok"]
        labels = sorted({r["column"] for r in ok})
        return {
            "path": str(self.store.root),
            "recount": self.recount,
            "adopted": dict(self.adopted),
            "refused": dict(self.refused),
            "fresh": {c: sum(r["column"] == c and "reused" not in r for r in ok) for c in labels},
            "taken": {c: sum(r["column"] == c and "reused" in r for r in ok) for c in labels},
            "recount_every": self.every,
        }
