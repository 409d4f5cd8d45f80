"""explain/explain.json in a run folder: what `dbregress explain` measured, so reports
can be regenerated without measuring again. Written atomically; versioned."""

from __future__ import annotations

import json
from pathlib import Path
from typing import cast

from dbregress.model.errors import StoreError
from dbregress.shapes.explain import ExplainRecord
from dbregress.store.files import write_json

EXPLAIN_DIR = "explain"
FILE = "explain.json"
SCHEMA_VERSION = 1


def path_of(run: Path) -> Path:
    return run / EXPLAIN_DIR / FILE


def save(run: Path, record: ExplainRecord) -> Path:
    path = path_of(run)
    write_json(path, {"schema_version": SCHEMA_VERSION, "kind": "explain", **record})
    return path


def load(run: Path) -> ExplainRecord | None:
    """The run's explanations, or None if it has none."""
    path = path_of(run)
    if not path.is_file():
        return None
    try:
        value = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError, UnicodeDecodeError) as e:
        raise StoreError(f"cannot read {path}: {e}") from e
    if not isinstance(value, dict) or value.get("kind") != "explain":
        raise StoreError(f"{path} is not an explain record")
    if value.get("schema_version") != SCHEMA_VERSION:
        raise StoreError(
            f"{path} has explain schema version {value.get('schema_version')}; this dbregress "
            f"reads {SCHEMA_VERSION}: run dbregress explain again"
        )
    return cast(ExplainRecord, value)  # as save() wrote it
