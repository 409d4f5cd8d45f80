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

- dbregress: `git describe --always --tags --dirty` of the checkout it runs from (a
  tree with uncommitted changes says so), else the package version;
- loadgen_sha256: the load generator binary's SHA-256 (its first 16 hex digits);
- valgrind: `valgrind --version` (None where it is not installed);
- libc: the C library's name and version;
- caches: the simulated cache geometry of the counting replays;
- cost_model: the estimated-cycles model and its weights;
- counting_profile: the named, versioned set of adjustments the counting replays make
  to engines and steps (COUNTING_PROFILE below; docs/verdicts.md says what they are);
- cpu_features: the processor valgrind presents to the programs it runs (`cpu_features`
  below). glibc picks its memcpy, strlen and friends by CPUID, RocksDB its CRC32C and
  hashing, so two hosts whose valgrind presents other features count other code.

The counts of a replay depend on all of these but `dbregress`: `count_key` names that
part (COUNT_FIELDS). With the build's identity (`build_key`) and the step as counted
(`step_key`) it says when two replays' counts may be set side by side whatever
dbregress version ran them: the cost verdict's history floor is keyed by it
(docs/history.md), so it survives a commit of dbregress and serves a bisection.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import platform
import shutil
import struct
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from dbregress import __version__
from dbregress.collect import valgrind
from dbregress.collect.host import read_text
from dbregress.collect.valgrind import CACHES
from dbregress.loadgen.client import find_binary
from dbregress.model.errors import DbregressError, LoadgenError
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
# v4: it opens only once a stretch of calls is within 0.02 point of that hit rate (was 1).
# v5: a paced step's writers at a pinned number of Q calls per write, its window placed
# and sized from that pace (benchmarks' counted_pace, explainer.pinned_window), not the
# base's time-lane rate; PostgreSQL 18+ counted with io_method=sync. With the step's
# spec (its writer rate), this version pins the writes per Q call in the count key.
COUNTING_PROFILE = "quiet-v5"
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
    "cpu_features",
)
# What a count depends on: every field but the version of dbregress itself (a change to
# how dbregress counts is a new COUNTING_PROFILE, COST_MODEL or cache geometry).
COUNT_FIELDS = tuple(f for f in FIELDS if f != "dbregress")
NAMES = {
    "dbregress": "dbregress version",
    "loadgen_sha256": "loadgen binary",
    "valgrind": "valgrind",
    "libc": "libc",
    "caches": "simulated caches",
    "cost_model": "cost model",
    "counting_profile": "counting-replay profile",
    "cpu_features": "CPU features valgrind presents",
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
    return describe(Path(__file__).resolve().parent)


def describe(checkout: Path) -> str | None:
    """`git describe --always --tags --dirty` of the checkout dbregress runs from, after
    the package version ("0.1.0+v0.1-3-g1a2b3c4-dirty"); None outside a git checkout. A
    tree with changes not committed says "-dirty": figures measured by code that no
    commit holds are not set beside those of the commit below it."""
    try:
        out = subprocess.run(
            ["git", "describe", "--always", "--tags", "--dirty"],
            cwd=checkout,
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
        "cpu_features": cpu_features(),
    }


def _digest(value: object, fields: tuple[str, ...] | None = None) -> str:
    if fields is not None and isinstance(value, Mapping):
        value = {f: value.get(f) for f in fields}
    text = json.dumps(value, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def key(method: MethodIdentity | Mapping[str, Any] | None) -> str | None:
    """A short stable name of an identity: equal keys, equal methods. None for a run
    that stored none (made before identities were stored, or imported)."""
    return _digest(method, FIELDS) if method else None


def count_key(method: MethodIdentity | Mapping[str, Any] | None) -> str | None:
    """The name of what a count depends on in an identity (COUNT_FIELDS: all of it but
    the dbregress version); None for none recorded."""
    return _digest(method, COUNT_FIELDS) if method else None


# What pins the code of a build found on the machine (`ENGINE@/path`, `ENGINE@system`):
# the digest of its server binary (provision/local.py) or library (provision/rocksdb.py),
# or the version of the package that installed it. A path and a version string do not:
# a basedir rebuilt at another commit keeps both.
LOCAL_SOURCES = ("path", "system")
PINS = ("binary_sha256", "sha256", "package_version")


def build_key(build: Mapping[str, Any] | None) -> str | None:
    """The name of a build's identity as run.json `builds` records it (its source, the
    file digest or commit and recipe, the version string); None for none recorded, and
    for a build found on the machine whose identity does not pin its code (PINS: one
    recorded before dbregress digested its binary), whose counts must not be taken for
    those of another build at the same path."""
    if not build:
        return None
    if build.get("source") in LOCAL_SOURCES and not any(build.get(p) for p in PINS):
        return None
    return _digest(dict(build))


def step_key(workload: Mapping[str, Any], config: str, settings: Mapping[str, Any]) -> str:
    """The name of a step as a counting replay counts it: what the loadgen is told to do
    (the step, its sizes and pace: the plan's workload) and the engine configuration it
    runs against (the column's config and settings). The window's place and length are
    the counting profile's (COUNTING_PROFILE), not part of it."""
    return _digest({"workload": dict(workload), "config": config, "settings": dict(settings)})


def differences(
    old: MethodIdentity | Mapping[str, Any] | None,
    new: MethodIdentity | Mapping[str, Any] | None,
    fields: tuple[str, ...] = FIELDS,
) -> list[str]:
    """What changed between two identities, in words: "loadgen binary 1a2b.. -> 3c4d..".
    A side that stored no identity is "not recorded". `fields`: the fields compared
    (COUNT_FIELDS: what counts depend on)."""
    if not old or not new:
        return ["method not recorded" + (" before" if not old else " now")]
    out = []
    for f in fields:
        a, b = old.get(f), new.get(f)
        if a != b:
            out.append(f"{NAMES[f]} {_short(a)} -> {_short(b)}")
    return out


def _short(v: object) -> str:
    text = str(v) if v is not None else "none"
    return text if len(text) <= 40 else text[:37] + "..."


# -- the CPU valgrind presents --------------------------------------------------------

# The dynamic loader's diagnostics (glibc 2.33 and later: `ld.so --list-diagnostics`)
# that describe the processor: its CPUID words as glibc read them, the features glibc
# found usable and the string-function thresholds it derived (x86.cpu_features.*,
# aarch64.cpu_features.*), the hardware capabilities and the platform name.
_CPU_LINES = (".cpu_features.", "dl_hwcap=", "dl_hwcap2=", "dl_hwcaps_subdirs_active=")
PT_INTERP = 3


def elf_interpreter(binary: Path) -> Path | None:
    """The program interpreter (the dynamic loader) a 64-bit little-endian ELF binary
    names, or None."""
    try:
        with open(binary, "rb") as f:
            head = f.read(64)
            if len(head) < 64 or head[:4] != b"\x7fELF" or head[4] != 2 or head[5] != 1:
                return None
            (phoff,) = struct.unpack_from("<Q", head, 0x20)
            phentsize, phnum = struct.unpack_from("<HH", head, 0x36)
            f.seek(phoff)
            table = f.read(phentsize * phnum)
            for i in range(phnum):
                kind, _, offset, _, _, size = struct.unpack_from("<IIQQQQ", table, i * phentsize)
                if kind == PT_INTERP:
                    f.seek(offset)
                    return Path(f.read(size).rstrip(b"\0").decode())
    except (OSError, struct.error, UnicodeDecodeError):
        return None
    return None


def _loader() -> Path | None:
    for binary in (Path("/bin/sh"), Path("/usr/bin/env")):
        found = elf_interpreter(binary)
        if found is not None and found.is_file():
            return found
    return None


def presented_cpu(diagnostics: str) -> str | None:
    """The processor a dynamic loader's diagnostics describe, as the identity names it:
    its platform, family and model and a digest of every line that describes it
    (_CPU_LINES); None when none does (a loader without --list-diagnostics)."""
    lines = sorted(
        line.strip()
        for line in diagnostics.splitlines()
        if any(mark in line for mark in _CPU_LINES) or line.startswith("dl_platform=")
    )
    if not any(".cpu_features." in line for line in lines):
        return None
    fields = dict(line.split("=", 1) for line in lines if "=" in line)
    arch = next((line.split(".", 1)[0] for line in lines if ".cpu_features." in line), "cpu")
    name = fields.get("dl_platform", "").strip('"') or arch
    detail = ""
    family, model = (fields.get(f"{arch}.cpu_features.basic.{k}") for k in ("family", "model"))
    if family and model:
        detail = f" family {int(family, 0)} model {int(model, 0)}"
    digest = hashlib.sha256("\n".join(lines).encode()).hexdigest()[:16]
    return f"{name}{detail}, cpuid {digest}"


def _host_flags() -> str:
    text = read_text("/proc/cpuinfo") or ""
    flags = next(
        (
            line.partition(":")[2]
            for line in text.splitlines()
            if line.startswith(("flags", "Features"))
        ),
        "",
    )
    digest = hashlib.sha256(" ".join(sorted(flags.split())).encode()).hexdigest()[:16]
    return f"host flags {digest}"


@functools.cache
def cpu_features() -> str | None:
    """The processor valgrind presents to the programs it counts, None where valgrind is
    not installed (no count can be made there).

    valgrind does not pass the host's CPUID through: it presents a processor of its own
    choosing, from the host's features, with what it cannot emulate taken out (on an AMD
    EPYC host valgrind 3.19 presents a Haswell: family 6 model 60, no AVX-512). What the
    counted code sees is therefore read under valgrind: the dynamic loader's diagnostics
    run under callgrind (a tenth of a second), which print the CPUID words glibc read,
    the features it found usable and the platform it chose its libraries by. Where the
    loader cannot print them (glibc before 2.33, musl), the host's /proc/cpuinfo flags
    stand in, named as such ("host flags ..."): valgrind's choice is a function of them
    and of its version (also in the identity), so equal flags mean equal presented
    features, only more hosts differ than need to. Why they stand in is said on stderr
    (once a process), not kept in the identity."""
    tool = shutil.which("valgrind")
    if tool is None:
        return None
    loader = _loader()
    why = "no dynamic loader found"
    if loader is not None:
        try:
            out = subprocess.run(
                [
                    tool,
                    "--tool=callgrind",
                    "--callgrind-out-file=/dev/null",
                    "-q",
                    str(loader),
                    "--list-diagnostics",
                ],
                capture_output=True,
                text=True,
                timeout=60,
                check=False,
            )
            found = presented_cpu(out.stdout) if out.returncode == 0 else None
            if found is not None:
                return found
            why = f"{loader} --list-diagnostics under valgrind gave none"
        except (OSError, subprocess.SubprocessError) as e:
            why = f"valgrind could not run {loader}: {e}"
    # Why is said, not kept: the identity names what is counted by, and an error's text
    # (a timeout on a loaded host) would make another identity of the same host.
    print(
        f"note: the CPU features valgrind presents were not read ({why}); the method "
        "identity names this host's /proc/cpuinfo flags instead",
        file=sys.stderr,
    )
    return _host_flags()
