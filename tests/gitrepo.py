"""Small real git repositories for tests: one `git` helper with a fixed author, no
system config, and local paths allowed as submodule urls."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

ENV = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@e",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@e",
    "GIT_CONFIG_NOSYSTEM": "1",
}


def git(repo: Path, *args: str) -> str:
    """`git -C repo ARGS`' output; protocol.file.allow: `submodule add` and `update`
    of a local path need it."""
    done = subprocess.run(
        ["git", "-c", "protocol.file.allow=always", "-C", str(repo), *args],
        env={**os.environ, **ENV},
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip()
