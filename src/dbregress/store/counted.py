"""The store of counting replays: every finished replay of every run, kept by what its
counts depend on, so that a later run, a bisection point or a fleet's coordinator takes
it instead of counting the same thing again (cost/reuse.py says when a stored replay
may stand for a new one).

What a replay's counts depend on (its key, `CountKey`):
- the build: its identity as run.json records it (method.build_key: the binary's digest,
  or the commit, recipe and source-build key of a source build); a build whose identity
  does not pin its code has no key and is never stored;
- the steps as the replay runs them: the step key (method.step_key: the workload with
  its sizes and pace, the column's config and settings, a test hook's included) of every
  step of its comparison, in order, with the engine's sizes the replay ran with (a
  fleet worker's own) and the configuration the engine started with (the profile's
  content rendered, the counting settings, the code that writes it: cost/planning.py
  count_key);
- the counting method: method.count_key (loadgen binary, valgrind, libc, simulated
  caches, cost model, counting profile, the CPU features valgrind presents; not the
  dbregress version);
- the lane's profile: its window sizing and what a replay keeps (cost/reuse.py
  PROFILE).
Each entry also keeps the windows it counted (where each step's window opened, its
length, the writers' pace): a run takes an entry only at the windows it adopts, and
every replay of a column it takes was counted at the same ones.

Layout: ROOT/<key[:2]>/<key>/<run>.<column>.r<N>.json, one file per replay, written
atomically under a name no other replay has, so concurrent runs and a fleet's
coordinator need no lock; ROOT/<key[:2]>/<key>/taken/<run>.<column>.json, a run's
column that took the key's replays (`took`: the rule that recounts a reused build every
N runs reads them). An entry that cannot be read, is of another schema or shape, whose
key does not match its folder or whose windows do not match their digest is ignored
with one line and never used. `dbregress store` (cli/store.py, docs/count-store.md) lists,
sizes and prunes the store: `survey` sees every file, usable or not, and `Prune` says
which ones go.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final, cast

from dbregress.model.errors import StoreError
from dbregress.shapes.count_store import (
    CountKeyParts,
    StoredEntry,
    StoredWindow,
    StoreOrigin,
    StoreTake,
)
from dbregress.shapes.replay import ReplayRecord
from dbregress.store.files import write_json

SCHEMA_VERSION = 1
KIND: Final = "stored-replay"
# A key's folder of takes (shapes/count_store.py StoreTake): which runs took its
# replays instead of counting, read by the rule that recounts a reused build every N
# runs (cost/reuse.py).
TAKEN = "taken"
TAKE_KIND: Final = "store-take"
# A stored window's fields and their types.
WINDOW_INTS = ("index", "skip_ops", "ops", "warm_ops")
WINDOW_FLOATS = ("q_per_s", "until_hit_rate")
# Where the store is: this environment variable, else FOLDER in the results folder.
ENV = "DBREGRESS_COUNT_STORE"
FOLDER = "count-store"

Notify = Callable[[str], None]
# The shortest start of a build's key `dbregress store prune --build` matches by (a digit
# or two would match builds at random).
MIN_PREFIX = 8


def digest(value: object) -> str:
    """A stable name of a JSON value."""
    text = json.dumps(value, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:24]


@dataclass(frozen=True)
class CountKey:
    """What a replay's counts depend on (see the module's text)."""

    build: str  # method.build_key
    count: str  # method.count_key
    steps: tuple[str, ...]  # method.step_key of each step the replay runs, in order
    profile: str  # cost/reuse.py PROFILE's digest

    def parts(self) -> CountKeyParts:
        return {
            "build": self.build,
            "count": self.count,
            "steps": list(self.steps),
            "profile": self.profile,
        }

    @property
    def name(self) -> str:
        return digest(self.parts())


@dataclass(frozen=True)
class Stored:
    """One stored replay."""

    path: Path
    key: CountKeyParts  # CountKey.parts()
    build: str  # as the lab named it (rocksdb@7.10.2), for people
    windows: dict[str, StoredWindow]  # step -> its window as counted
    record: ReplayRecord
    origin: StoreOrigin

    @property
    def entry(self) -> str:
        """The entry's name in the store: its key and file."""
        return f"{self.path.parent.name}/{self.path.stem}"

    @property
    def stored_at(self) -> float:
        return float(self.origin["stored_at"])

    @property
    def counted_steps(self) -> set[str]:
        return set(self.record.get("steps") or {})


def configured_root() -> Path | None:
    """The store ENV names, None when it names none."""
    if os.environ.get(ENV, "").strip():
        return Path(os.environ[ENV]).expanduser()
    return None


def results_root(results: Path) -> Path:
    """The store of a results folder, whatever ENV says (`dbregress store --results`)."""
    return results / FOLDER


def root_for(run: Path) -> Path:
    """The store a run's cost lane uses: ENV's folder, else FOLDER beside the run folder
    in its results folder (for a bisection's point, the folder holding the bisection,
    so that every bisection there shares it)."""
    configured = configured_root()
    if configured is not None:
        return configured
    results = run.parent
    # a bisection's runs (and those of its commits phase, further in): the folder
    # holding the outermost bisection
    for folder in _bisections(run):
        results = folder.parent
    return results / FOLDER


def in_bisection(run: Path) -> bool:
    """Whether a run is a bisection's point (of its commits phase too)."""
    return bool(_bisections(run))


def _bisections(run: Path) -> list[Path]:
    """The bisection folders holding a run, innermost first."""
    return [f for f in list(run.parents)[:4] if (f / "bisect.json").is_file()]


class CountStore:
    def __init__(self, root: Path, notify: Notify | None = None) -> None:
        self.root = root
        self.notify = notify or (lambda line: None)
        self.told: set[Path] = set()  # unusable entries said (once each)

    def folder(self, key: CountKey) -> Path:
        name = key.name
        return self.root / name[:2] / name

    def put(
        self,
        key: CountKey,
        build: str,
        windows: Mapping[str, StoredWindow],
        record: ReplayRecord,
        origin: StoreOrigin,
    ) -> Path | None:
        """Store an ok replay (a failed one has no counts to give); its path."""
        if record.get("status") != "ok" or not record.get("steps"):
            return None
        entry: StoredEntry = {
            "schema_version": SCHEMA_VERSION,
            "kind": KIND,
            "key": key.parts(),
            "build": build,
            "windows": dict(windows),
            "windows_digest": digest(dict(windows)),
            "origin": origin,
            "record": record,
        }
        name = f"{origin['run']}.{origin['column']}.r{origin['replay']}.json"
        path = self.folder(key) / name.replace("/", "_")
        write_json(path, entry)
        return path

    def get(self, key: CountKey) -> list[Stored]:
        """The usable entries of `key`, oldest first."""
        folder = self.folder(key)
        if not folder.is_dir():
            return []
        found = [s for p in sorted(folder.glob("*.json")) if (s := self.read(p)) is not None]
        return sorted(found, key=lambda s: (s.stored_at, s.path.name))

    def read(self, path: Path) -> Stored | None:
        """An entry, or None (told in one line) when it cannot be used."""
        try:
            return _parse(path)
        except StoreError as e:
            if path not in self.told:
                self.told.add(path)
                self.notify(f"count store: ignoring {path}: {e}")
            return None

    def size(self) -> tuple[int, int]:
        """(entries, bytes) of every file in the store, usable or not."""
        files = [p for p in self.root.glob("*/*/*.json")] if self.root.is_dir() else []
        sizes = []
        for path in files:
            try:
                sizes.append(path.stat().st_size)
            except OSError:  # removed by a concurrent prune
                continue
        return len(sizes), sum(sizes)

    def survey(self) -> list[Found]:
        """Every file of the store, usable or not, with what `dbregress store` lists and
        prunes it by; quiet (an unusable file says why in `Found.why`, not in a line). A
        file that goes while it is read (another prune) is left out."""
        out = []
        for path in sorted(self.root.glob("*/*/*.json")) if self.root.is_dir() else []:
            try:
                size = path.stat().st_size
            except OSError:
                continue
            try:
                out.append(Found.usable_entry(_parse(path), size))
            except StoreError as e:
                out.append(Found.unusable_entry(path, size, str(e)))
        return out

    def remove(self, stored: Stored) -> None:
        self.discard(stored.path)

    def discard(self, path: Path) -> None:
        """Remove an entry's file, usable or not, and its folders once they are empty
        (a key's takes go with its last entry: they count takes of its replays)."""
        path.unlink(missing_ok=True)
        if not any(path.parent.glob("*.json")):
            for take in path.parent.glob(f"{TAKEN}/*.json"):
                take.unlink(missing_ok=True)
        for folder in (path.parent / TAKEN, path.parent, path.parent.parent):
            try:
                folder.rmdir()
            except OSError:
                if folder.name != TAKEN:
                    break

    def took(self, key: CountKey, run: str, column: str, entries: list[str]) -> None:
        """Record that `run`'s `column` took the key's stored replays `entries` instead
        of counting (rewritten as it takes more: one file a run and column)."""
        take: StoreTake = {
            "schema_version": SCHEMA_VERSION,
            "kind": TAKE_KIND,
            "run": run,
            "column": column,
            "entries": sorted(entries),
            "taken_at": time.time(),
        }
        write_json(self.folder(key) / TAKEN / f"{run}.{column}.json".replace("/", "_"), take)

    def takes(self, key: CountKey) -> list[StoreTake]:
        """The takes of the key's stored replays (`took`); one that cannot be read is
        left out with one line."""
        out = []
        for path in sorted(self.folder(key).glob(f"{TAKEN}/*.json")):
            try:
                value = json.loads(path.read_text())
                if not isinstance(value, dict) or value.get("kind") != TAKE_KIND:
                    raise ValueError("not a take of stored replays")
                take = cast(StoreTake, value)
                if not isinstance(take["run"], str) or not _number(take["taken_at"]):
                    raise ValueError("no run or time")
            except (OSError, UnicodeDecodeError, ValueError, KeyError) as e:
                self.notify(f"count store: ignoring {path}: {type(e).__name__}: {e}")
                continue
            out.append(take)
        return out


@dataclass(frozen=True)
class Found:
    """A file of the store as `dbregress store` sees it: usable (`stored`) or not
    (`why`), and what is known of its build, counting method and age. Of an unusable
    file, whatever of that it still holds is read loosely (a truncated file holds
    nothing); its age is then its modification time."""

    path: Path
    size: int
    stored: Stored | None
    why: str | None  # why the store ignores it; None: usable
    build: str | None  # as the lab named it
    build_key: str | None  # CountKey.build
    count_key: str | None  # CountKey.count
    stored_at: float

    @classmethod
    def usable_entry(cls, stored: Stored, size: int) -> Found:
        build_key, count_key = stored.key.get("build"), stored.key.get("count")
        return cls(
            stored.path,
            size,
            stored,
            None,
            stored.build,
            str(build_key) if build_key is not None else None,
            str(count_key) if count_key is not None else None,
            stored.stored_at or _mtime(stored.path),
        )

    @classmethod
    def unusable_entry(cls, path: Path, size: int, why: str) -> Found:
        value = _loose(path)
        key, origin = _part(value, "key"), _part(value, "origin")
        stored_at = origin.get("stored_at")
        if not isinstance(stored_at, int | float) or not stored_at:
            stored_at = _mtime(path)
        return cls(
            path,
            size,
            None,
            why,
            _text(value.get("build")),
            _text(key.get("build")),
            _text(key.get("count")),
            float(stored_at),
        )


@dataclass(frozen=True)
class Prune:
    """Which entries `dbregress store prune` removes: every criterion given must hold
    (AND); none given selects nothing, so that a slip never empties the store."""

    older_than_s: float | None = None  # stored more than this many seconds ago
    build: str | None = None  # the build as named (rocksdb@7.10.2), or its key's start
    identity: str | None = None  # the start of the counting method's key (CountKey.count)
    unusable: bool = False  # only entries the store ignores

    def given(self) -> bool:
        return (
            self.older_than_s is not None
            or self.build is not None
            or self.identity is not None
            or self.unusable
        )

    def matches(self, found: Found, now: float) -> bool:
        if not self.given():
            return False
        if self.unusable and found.why is None:
            return False
        if self.older_than_s is not None and now - found.stored_at <= self.older_than_s:
            return False
        if self.build is not None and not (
            found.build == self.build
            or (
                len(self.build) >= MIN_PREFIX
                and found.build_key is not None
                and found.build_key.startswith(self.build)
            )
        ):
            return False
        return self.identity is None or (
            found.count_key is not None and found.count_key.startswith(self.identity)
        )


def _parse(path: Path) -> Stored:
    try:
        value = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise StoreError(f"unreadable ({type(e).__name__}: {e})") from e
    if not isinstance(value, dict) or value.get("kind") != KIND:
        raise StoreError("not a stored replay")
    if value.get("schema_version") != SCHEMA_VERSION:
        raise StoreError(f"schema version {value.get('schema_version')}, not {SCHEMA_VERSION}")
    try:
        key = dict(value["key"])
        windows = {str(s): dict(w) for s, w in dict(value["windows"]).items()}
        record = dict(value["record"])
        origin = dict(value["origin"])
        build = str(value["build"])
        steps = dict(record["steps"])
    except (KeyError, TypeError, ValueError) as e:
        raise StoreError(f"incomplete ({type(e).__name__}: {e})") from e
    if digest(key) != path.parent.name:
        raise StoreError("its key does not match its folder")
    if digest(windows) != value.get("windows_digest"):
        raise StoreError("its windows do not match their digest")
    if record.get("status") != "ok" or not steps:
        raise StoreError("not an ok replay with counts")
    why = _shape_problem(windows, steps, origin)
    if why is not None:
        raise StoreError(f"of another shape ({why})")
    return Stored(
        path,
        cast(CountKeyParts, key),
        build,
        cast(dict[str, StoredWindow], windows),
        cast(ReplayRecord, record),
        cast(StoreOrigin, origin),
    )


def _shape_problem(
    windows: Mapping[str, Mapping[str, object]],
    steps: Mapping[str, object],
    origin: Mapping[str, object],
) -> str | None:
    """What in an entry is not of the shape the cost lane reads (None: nothing): its
    windows' numbers, each counted step's figures, its engine state, its origin's time."""
    for step, window in windows.items():
        for name in (*WINDOW_INTS, *WINDOW_FLOATS):
            number = window.get(name)
            if not _number(number) or (name in WINDOW_INTS and not isinstance(number, int)):
                return f"window of {step}: {name} is {number!r}, not a number"
    for step, figures in steps.items():
        if not isinstance(figures, dict):
            return f"step {step}: {type(figures).__name__}, not an object"
        per_op = figures.get("per_op")
        if not isinstance(per_op, dict) or not all(map(_number, per_op.values())):
            return f"step {step}: per_op is not an object of numbers"
        st = figures.get("engine_state")
        counted = st.get("counted") if isinstance(st, dict) else None
        if st is not None and not (isinstance(counted, dict) and _number(counted.get("ops"))):
            return f"step {step}: engine_state has no counted state"
    if not _number(origin.get("stored_at")):
        return "origin has no stored_at"
    return None


def _number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _loose(path: Path) -> Mapping[str, object]:
    """What an unusable file still holds, as a JSON object ({} when it holds none)."""
    try:
        value = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, ValueError):
        return {}
    return cast(Mapping[str, object], value) if isinstance(value, dict) else {}


def _part(value: Mapping[str, object], name: str) -> Mapping[str, object]:
    part = value.get(name)
    return cast(Mapping[str, object], part) if isinstance(part, dict) else {}


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _mtime(path: Path) -> float:
    """A file's modification time; 0 (as old as can be) for one that went."""
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0
