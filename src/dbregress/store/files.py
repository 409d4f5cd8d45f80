"""Atomic file writes: a reader sees the old file or the whole new one, never a part."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from dbregress.model.errors import StoreError


def sibling(stem: Path, extension: str) -> Path:
    """stem + extension. Not Path.with_suffix: step names have dots (l.i0)."""
    return stem.parent / (stem.name + extension)


def write_atomic(path: Path, data: str | bytes) -> None:
    """Write `path` whole or not at all; a full disk or a read-only folder raises a
    StoreError naming the file, and the previous version of the file stays."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as e:
        raise StoreError(f"cannot write {path}: {e.strerror or e}") from e
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data.encode() if isinstance(data, str) else data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as e:
        Path(tmp).unlink(missing_ok=True)
        raise StoreError(f"cannot write {path}: {e.strerror or e}") from e
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_json(path: Path, value: Any) -> None:
    write_atomic(path, json.dumps(value, indent=1, sort_keys=False) + "\n")
