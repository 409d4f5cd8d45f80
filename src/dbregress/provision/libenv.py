"""The environment a build's programs run in: its own lib/ first on LD_LIBRARY_PATH.

Shared by local.py (PostgreSQL), mysql.py (the MySQL family) and the engines; it imports
nothing of dbregress, so every provision module can use it without an import cycle.
"""

from __future__ import annotations

import os
from pathlib import Path


def library_env(basedir: Path) -> dict[str, str]:
    """The environment to run a build's binaries: its lib/ first on LD_LIBRARY_PATH."""
    env = dict(os.environ)
    lib = basedir / "lib"
    if lib.is_dir():
        env["LD_LIBRARY_PATH"] = os.pathsep.join(
            p for p in (str(lib), env.get("LD_LIBRARY_PATH", "")) if p
        )
    return env
