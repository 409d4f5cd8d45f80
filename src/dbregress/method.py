"""How a run was measured: its method identity.

A figure in the history is a property of the build *and* of the instrument that
measured it. A new load generator binary, another valgrind, another libc (the cost lane
counts the libc code the engine calls), another simulated cache, another cycle model or
another way of preparing the counting replays can move every step at once, and a series
that crosses such a change would show a change point in every build. So each run stores
its method identity (run.json `method_identity`, each counting replay too); the history keeps it
per row, `dbregress history` draws a boundary where it changes and looks for change
points only between runs of one identity, and a report's "against this lab's history"
says that the method differs instead of reporting moves (docs/history.md).

The identity's fields, all of which form its key:

- dbregress: `git describe` of the checkout it runs from, else the package version;
- loadgen_sha256: the load generator binary's SHA-256 (its first 16 hex digits);
- valgrind: `valgrind --version` (None where it is not installed);
- libc: the C library's name and version;
- caches: the simulated cache geometry of the counting replays;
- cost_model: the estimated-cycles model and its weights;
- counting_profile: the named, versioned set of adjustments the counting replays make
  to engines and steps (COUNTING_PROFILE below; docs/verdicts.md says what they are).
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import platform
import subprocess
from pathlib import Path

from dbregress import __version__
from dbregress.collect import valgrind
from dbregress.collect.valgrind import CACHES
from dbregress.errors import DbregressError, LoadgenError
from dbregress.loadgen import find_binary
from dbregress.shapes.method import MethodIdentity

# The counting replays' adjustments (engine settings that keep timed background work out
# of the windows, the insert workload's lockstep, settled write steps, paced writers on
# the query thread, the window's sizes and warm-up). A change to any of them is a new
# version of the profile: tests/unit/test_method.py holds a digest of the settings and
# fails until the version here is raised with it.
# v1: as of the first recorded identities. v2: a timed step's window at the middle of its
# timed window (the block cache as warm as the time lane's), and RocksDB counted as the
# loadgen's calls into its library only. v3: that window opens earlier once the block
# cache is as warm as the base's timed window had it (analysis/state.py, until_rate).
COUNTING_PROFILE = "quiet-v3"
# The estimated-cycles model (explain/jobs.py estimated_cycles): L1 hits + 5 x
# last-level hits + 35 x RAM accesses. tests/unit/test_method.py checks the weights.
COST_MODEL = "l1+5ll+35ram"
FIELDS = (
    "dbregress",
    "loadgen_sha256",
    "valgrind",
    "libc",
    "caches",
    "cost_model",
    "counting_profile",
)
NAMES = {
    "dbregress": "dbregress version",
    "loadgen_sha256": "loadgen binary",
    "valgrind": "valgrind",
    "libc": "libc",
    "caches": "simulated caches",
    "cost_model": "cost model",
    "counting_profile": "counting-replay profile",
}


@functools.cache
def _sha256(path: str, mtime_ns: int, size: int) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()[:16]


def loadgen_sha256(binary: Path | None = None) -> str | None:
    """None where no loadgen binary is found (a run cannot start there anyway)."""
    try:
        path = binary or find_binary()
    except LoadgenError:
        return None
    try:
        st = path.stat()
        return _sha256(str(path), st.st_mtime_ns, st.st_size)
    except OSError as e:
        raise DbregressError(f"cannot read the loadgen binary {path}: {e}") from e


@functools.cache
def _git_describe() -> str | None:
    here = Path(__file__).resolve().parent
    try:
        out = subprocess.run(
            ["git", "describe", "--always", "--tags"],
            cwd=here,
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    text = out.stdout.strip()
    return f"{__version__}+{text}" if out.returncode == 0 and text else None


@functools.cache
def valgrind_version() -> str | None:
    """`valgrind --version` (collect/valgrind.py), None where valgrind is missing."""
    try:
        return valgrind.version() or None
    except OSError:
        return None


def libc() -> str:
    try:
        found = os.confstr("CS_GNU_LIBC_VERSION")
    except (ValueError, OSError):
        found = None
    if found:
        return found
    name, version = platform.libc_ver()
    return f"{name} {version}".strip() or "unknown"


def identity(binary: Path | None = None) -> MethodIdentity:
    """This process's method identity (see the module's text)."""
    return {
        "dbregress": _git_describe() or __version__,
        "loadgen_sha256": loadgen_sha256(binary),
        "valgrind": valgrind_version(),
        "libc": libc(),
        "caches": " ".join(CACHES),
        "cost_model": COST_MODEL,
        "counting_profile": COUNTING_PROFILE,
    }


def key(method: MethodIdentity | None) -> str | None:
    """A short stable name of an identity: equal keys, equal methods. None for a run
    that stored none (made before identities were stored, or imported)."""
    if not method:
        return None
    text = json.dumps({f: method.get(f) for f in FIELDS}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def differences(old: MethodIdentity | None, new: MethodIdentity | None) -> list[str]:
    """What changed between two identities, in words: "loadgen binary 1a2b.. -> 3c4d..".
    A side that stored no identity is "not recorded"."""
    if not old or not new:
        return ["method not recorded" + (" before" if not old else " now")]
    out = []
    for f in FIELDS:
        a, b = old.get(f), new.get(f)
        if a != b:
            out.append(f"{NAMES[f]} {_short(a)} -> {_short(b)}")
    return out


def _short(v: object) -> str:
    text = str(v) if v is not None else "none"
    return text if len(text) <= 40 else text[:37] + "..."
