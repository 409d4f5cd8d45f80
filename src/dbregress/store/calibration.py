"""A host's calibration (what `dbregress calibrate` measured), kept beside its runs in
<results>/calibration/<hostname>.json so later reports on that host can show it."""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path
from typing import cast

from dbregress.collect.host import host_facts
from dbregress.shapes.calibration import Calibration
from dbregress.store.files import write_json

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
