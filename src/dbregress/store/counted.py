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
  step of its comparison, in order;
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
coordinator need no lock. An entry that cannot be read, is of another schema, whose key
does not match its folder or whose windows do not match their digest is ignored with
one line and never used.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from dbregress.errors import StoreError
from dbregress.shapes.replay import ReplayRecord
from dbregress.store.files import write_json

SCHEMA_VERSION = 1
KIND = "stored-replay"
# Where the store is: this environment variable, else FOLDER in the results folder.
ENV = "DBREGRESS_COUNT_STORE"
FOLDER = "count-store"

Notify = Callable[[str], None]


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

    def parts(self) -> dict[str, Any]:
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
    key: dict[str, Any]  # CountKey.parts()
    build: str  # as the lab named it (rocksdb@7.10.2), for people
    windows: dict[str, dict[str, Any]]  # step -> its window as counted
    record: ReplayRecord
    origin: dict[str, Any]  # run, column, replay, stored_at, host

    @property
    def entry(self) -> str:
        """The entry's name in the store: its key and file."""
        return f"{self.path.parent.name}/{self.path.stem}"

    @property
    def stored_at(self) -> float:
        return float(self.origin.get("stored_at") or 0.0)

    @property
    def counted_steps(self) -> set[str]:
        return set(self.record.get("steps") or {})


def root_for(run: Path) -> Path:
    """The store a run's cost lane uses: ENV's folder, else FOLDER beside the run folder
    in its results folder (for a bisection's point, the folder holding the bisection,
    so that every bisection there shares it)."""
    if os.environ.get(ENV, "").strip():
        return Path(os.environ[ENV]).expanduser()
    results = run.parent
    if results.name == "runs" and (results.parent / "bisect.json").is_file():
        results = results.parent.parent
    return results / FOLDER


class CountStore:
    def __init__(self, root: Path, notify: Notify | None = None) -> None:
        self.root = root
        self.notify = notify or (lambda line: None)

    def folder(self, key: CountKey) -> Path:
        name = key.name
        return self.root / name[:2] / name

    def put(
        self,
        key: CountKey,
        build: str,
        windows: Mapping[str, Mapping[str, Any]],
        record: ReplayRecord,
        origin: Mapping[str, Any],
    ) -> Path | None:
        """Store an ok replay (a failed one has no counts to give); its path."""
        if record.get("status") != "ok" or not record.get("steps"):
            return None
        entry = {
            "schema_version": SCHEMA_VERSION,
            "kind": KIND,
            "key": key.parts(),
            "build": build,
            "windows": {s: dict(w) for s, w in windows.items()},
            "windows_digest": digest({s: dict(w) for s, w in windows.items()}),
            "origin": {**origin, "stored_at": origin.get("stored_at") or time.time()},
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
            self.notify(f"count store: ignoring {path}: {e}")
            return None

    def entries(self) -> Iterator[tuple[Stored, int]]:
        """Every usable entry and its size in bytes."""
        if not self.root.is_dir():
            return
        for path in sorted(self.root.glob("*/*/*.json")):
            stored = self.read(path)
            if stored is not None:
                yield stored, path.stat().st_size

    def size(self) -> tuple[int, int]:
        """(entries, bytes) of every file in the store, usable or not."""
        files = [p for p in self.root.glob("*/*/*.json")] if self.root.is_dir() else []
        return len(files), sum(p.stat().st_size for p in files)

    def remove(self, stored: Stored) -> None:
        stored.path.unlink(missing_ok=True)
        for folder in (stored.path.parent, stored.path.parent.parent):
            try:
                folder.rmdir()
            except OSError:
                break


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
    return Stored(path, key, build, windows, cast(ReplayRecord, record), origin)
