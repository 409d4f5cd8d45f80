"""cost/ in a run folder: one file per counting replay (cost/<column>/r<N>.json, written
atomically the moment the replay ends, so an interrupted lane keeps every finished
replay) and cost/lane.json, how the lane counted. Versioned."""

from __future__ import annotations

import json
from pathlib import Path
from typing import cast

from dbregress.model.errors import StoreError
from dbregress.shapes.replay import CostLaneRecord, ReplayRecord
from dbregress.store.files import write_json

COST_DIR = "cost"
SCHEMA_VERSION = 1


def replay_path(run: Path, label: str, number: int) -> Path:
    return run / COST_DIR / label / f"r{number}.json"


def save_replay(
    run: Path,
    label: str,
    number: int,
    record: ReplayRecord,
) -> Path:
    path = replay_path(run, label, number)
    write_json(path, {"schema_version": SCHEMA_VERSION, "kind": "cost-replay", **record})
    return path


def save_lane(run: Path, record: CostLaneRecord) -> None:
    write_json(run / COST_DIR / "lane.json", {"schema_version": SCHEMA_VERSION, **record})


def _read(path: Path) -> dict[str, object]:
    """A cost record as json.loads reads it, checked for its schema version only."""
    try:
        value = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError, UnicodeDecodeError) as e:
        raise StoreError(f"cannot read {path}: {e}") from e
    if not isinstance(value, dict) or value.get("schema_version") != SCHEMA_VERSION:
        raise StoreError(
            f"{path} is not a cost record of schema version {SCHEMA_VERSION}: run the lab again"
        )
    return value


def load_lane(run: Path) -> CostLaneRecord | None:
    path = run / COST_DIR / "lane.json"
    return cast(CostLaneRecord, _read(path)) if path.is_file() else None


def load_replays(run: Path) -> list[ReplayRecord]:
    """Every finished replay of the run (ok or failed), in (column, number) order."""
    root = run / COST_DIR
    if not root.is_dir():
        return []
    found = [cast(ReplayRecord, _read(p)) for p in sorted(root.glob("*/r*.json"))]
    return sorted(found, key=lambda r: (r["column"], r["replay"]))
