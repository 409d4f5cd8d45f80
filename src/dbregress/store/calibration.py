"""A host's calibration (what `dbregress calibrate` measured), kept beside its runs in
<results>/calibration/<hostname>.json so later reports on that host can show it, and
the cost verdicts' calibration floor read from its A/A runs' counting replays
(`calibration_floor`)."""

from __future__ import annotations

import json
import socket
import sys
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from dbregress.analysis.cost_floors import Floors, replay_noise
from dbregress.analysis.cost_methods import Group, group_of
from dbregress.collect.host import host_facts
from dbregress.model.errors import StoreError
from dbregress.shapes.calibration import Calibration
from dbregress.shapes.replay import ReplayRecord
from dbregress.shapes.run import RunJson
from dbregress.store.files import write_json
from dbregress.store.replays import load_replays
from dbregress.store.run import read_record

FOLDER = "calibration"
SCHEMA_VERSION = 1


def calibration_path(results_root: Path, hostname: str | None = None) -> Path:
    return results_root / FOLDER / f"{hostname or socket.gethostname()}.json"


def save_calibration(results_root: Path, summary: Calibration) -> Path:
    path = calibration_path(results_root)
    write_json(
        path,
        {
            "schema_version": SCHEMA_VERSION,
            "kind": "calibration",
            "measured_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "host": host_facts(),
            **summary,
        },
    )
    return path


def load_calibration(results_root: Path, hostname: str) -> Calibration | None:
    """The host's latest calibration, or None (absent, unreadable or another version)."""
    try:
        value = json.loads(calibration_path(results_root, hostname).read_text())
    except (OSError, json.JSONDecodeError):
        return None
    if not isinstance(value, dict) or value.get("schema_version") != SCHEMA_VERSION:
        return None
    return cast(Calibration, value)  # as save_calibration wrote it


def calibrations(results_root: Path) -> list[Calibration]:
    """Every host's latest calibration under the root (unreadable ones left out)."""
    folder = results_root / FOLDER
    found = [load_calibration(results_root, p.stem) for p in sorted(folder.glob("*.json"))]
    return [c for c in found if c is not None]


# What a count of a step was made by and of: (count key, scope, step spec).
Counted = tuple[str | None, str | None, str | None]


def _counted(replays: Iterable[ReplayRecord]) -> dict[tuple[str, str], set[Counted]]:
    """(comparison, step) -> how the ok replays counted it."""
    out: dict[tuple[str, str], set[Counted]] = {}
    for r in replays:
        if r.get("status") != "ok":
            continue
        for step, figures in r["steps"].items():
            group: Group = group_of(r, step)
            out.setdefault((r["comparison"], step), set()).add((*group, figures.get("spec")))
    return out


def _alike(replay: ReplayRecord, wanted: Mapping[tuple[str, str], set[Counted]]) -> ReplayRecord:
    """The replay with only the steps it counted as this run counted them."""
    steps = {
        step: figures
        for step, figures in replay["steps"].items()
        if (*group_of(replay, step), figures.get("spec"))
        in wanted.get((replay["comparison"], step), set())
        and figures.get("spec")
    }
    return cast(ReplayRecord, {**replay, "steps": steps})


def warn(line: str) -> None:
    """A line for the user on stderr (a calibration run that cannot be read)."""
    print(f"warning: {line}", file=sys.stderr)


@dataclass
class _Read:
    """What the lab's A/A runs gave: each run's replays alike to this run's, the
    counting replays seen, the runs named, and those that could not be read (why)."""

    given: list[tuple[RunJson, list[ReplayRecord]]] = field(default_factory=list)
    counted: int = 0
    runs: int = 0
    unread: list[str] = field(default_factory=list)

    def note(self, why: str = "") -> str:
        """`why` there is no floor, with the runs not read; those alone when there is."""
        left = f"not read: {'; '.join(self.unread)}" if self.unread else ""
        return "; ".join(x for x in (why, left) if x)


def _read_runs(
    results_root: Path,
    mine: list[Calibration],
    wanted: Mapping[tuple[str, str], set[Counted]],
    notify: Callable[[str], None],
) -> _Read:
    """The lab's A/A runs read; one that cannot be read (its folder deleted, a damaged
    run.json or cost record) is told through `notify` and left out, the others kept."""
    out = _Read()
    for cal in mine:
        for placement in cal.get("placements", {}).values():
            run = results_root / str(placement.get("run_id"))
            out.runs += 1
            try:
                cal_replays = load_replays(run)
                cal_record = read_record(run)
            except StoreError as e:
                out.unread.append(str(e))
                notify(f"an A/A calibration run was left out of the calibration floor: {e}")
                continue
            out.counted += len(cal_replays)
            alike = [_alike(r, wanted) for r in cal_replays if r.get("status") == "ok"]
            if any(r["steps"] for r in alike):
                out.given.append((cal_record, alike))
    return out


def calibration_floor(
    results_root: Path,
    record: RunJson | Mapping[str, Any],
    replays: list[ReplayRecord],
    notify: Callable[[str], None] = warn,
) -> Floors:
    """The cost verdicts' calibration floor of a run: each step's spread over the
    counting replays of `dbregress calibrate`'s A/A runs of the run's lab (any host's:
    counts do not depend on the host's hardware), only where they counted the step as
    this run did: the same counting method (method.count_key), scope and step as
    counted (method.step_key). Each A/A run's base column and its copy are one build, so
    its spread is the step's own; runs are named in Floors.runs, and Floors.note says
    why there is none. An A/A run that cannot be read is told through `notify`, left
    out and named in the note ("not read: ..."); the others still give the floor."""
    lab = str(record.get("lab", ""))
    mine = [c for c in calibrations(results_root) if c.get("lab") == lab]
    if not mine:
        return Floors(note=f"none: no `dbregress calibrate` of lab {lab} in {results_root}")
    read = _read_runs(results_root, mine, _counted(replays), notify)
    given = read.given
    if not read.counted:
        if read.unread and read.runs == len(read.unread):  # none read: only why
            return Floors(note=read.note())
        return Floors(
            note=read.note(
                "none: the lab's calibration runs have no counting replays "
                "(count = false, or calibrated by an earlier dbregress)"
            )
        )
    noise = replay_noise(given)
    if not noise:
        return Floors(
            note=read.note(
                "none: the calibration's replays counted these steps by another method, "
                "scope or step spec than this run"
            )
        )
    runs: dict[str, set[str]] = {}
    for cal_record, alike in given:
        for r in alike:
            for step in r["steps"]:
                runs.setdefault(f"{r['comparison']}/{step}", set()).add(str(cal_record["run_id"]))
    return Floors(noise, {name: tuple(sorted(ids)) for name, ids in runs.items()}, read.note())
