"""Dropping the kernel's page cache before each job and each of its later steps, for
workloads that read from storage, so every job and step starts equally cold rather than
with what the previous job or the load left behind."""

from __future__ import annotations

import os
from pathlib import Path

DROP_CACHES = Path("/proc/sys/vm/drop_caches")


def drop_page_cache(control: Path = DROP_CACHES) -> str | None:
    """Writes dirty pages back, then drops clean page cache, dentries and inodes.
    Returns None when done, else why not (it needs root), which the run records."""
    os.sync()
    try:
        control.write_text("3\n")
    except OSError as e:
        return f"cannot drop the page cache ({control}: {e.strerror}); run as root"
    return None
