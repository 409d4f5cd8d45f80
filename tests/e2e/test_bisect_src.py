"""dbregress bisect --src on a git history of Debian's PostgreSQL source (`make sources`
unpacks it), in a flavor whose configure fails on every commit: the bisection builds
its good end first, stops with configure's error and builds nothing else (seconds:
configure rejects the option before any compiling). The cases that compile PostgreSQL
(commits that do not build, the plain case) are measured by bench/bisect_src.py."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.e2e.conftest import dbregress
from tests.e2e.test_source_build import debian_postgres_tree

pytestmark = pytest.mark.engine

GIT = {
    "GIT_AUTHOR_NAME": "test",
    "GIT_AUTHOR_EMAIL": "test@dbregress",
    "GIT_COMMITTER_NAME": "test",
    "GIT_COMMITTER_EMAIL": "test@dbregress",
}


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(repo), *args],
        env={**os.environ, **GIT},
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip()


def test_a_flavor_whose_configure_fails_stops_after_the_good_end(
    tmp_path: Path, workdir: Path
) -> None:
    repo = tmp_path / "postgresql"
    shutil.copytree(debian_postgres_tree(), repo, symlinks=True)
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "PostgreSQL 15 as Debian ships it")
    for i in range(1, 6):
        with open(repo / "src/backend/utils/adt/misc.c", "a") as f:
            f.write(f"\n/* commit {i} */\n")
        git(repo, "commit", "-qam", f"misc.c: comment {i}")
    ids = git(repo, "rev-list", "--reverse", "HEAD").split()
    flavors = tmp_path / "flavors.toml"
    # PostgreSQL's pages are 1 to 32 kB, powers of two: configure refuses 3
    flavors.write_text('[flavors.postgres.badblocks]\nconfigure = ["--with-blocksize=3"]\n')
    out = dbregress(
        "bisect",
        "--src",
        str(repo),
        ids[0],
        ids[-1],
        "--step",
        "qp100",
        "--flavor",
        "badblocks",
        "--flavors",
        str(flavors),
        cwd=tmp_path,
        workdir=workdir,
    )
    assert out.returncode == 2, out.stderr
    error = out.stderr.strip().splitlines()[-1]
    assert error.startswith(f"Error: the good end 1/6 {ids[0][:12]} "), out.stderr
    assert "cannot be built" in error
    assert "configure failed" in error and "Invalid block size" in error
    assert "no other build was tried" in error
    # one build tried, the good end's; nothing measured
    building = [ln for ln in out.stderr.splitlines() if " building " in ln]
    assert len(building) == 1 and "building the good end 1/6" in building[0], out.stderr
    assert "PostgreSQL 15 as Debian ships it" in building[0]
    (root,) = (tmp_path / "results").glob("bisect-*")
    state = json.loads((root / "bisect.json").read_text())
    assert "Invalid block size" in state["stopped"] and state["points"] == []
    assert state["request"]["flavors"]["postgres"]["badblocks"]["configure"] == [
        "--with-blocksize=3"
    ]
    assert not (root / "runs").exists()
