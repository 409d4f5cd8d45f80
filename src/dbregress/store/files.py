"""Atomic file writes: a reader sees the old file or the whole new one, never a part."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any


def sibling(stem: Path, extension: str) -> Path:
    """stem + extension. Not Path.with_suffix: step names have dots (l.i0)."""
    return stem.parent / (stem.name + extension)


def write_atomic(path: Path, data: str | bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data.encode() if isinstance(data, str) else data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_json(path: Path, value: Any) -> None:
    write_atomic(path, json.dumps(value, indent=1, sort_keys=False) + "\n")
