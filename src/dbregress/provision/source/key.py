"""A source build's cache key and the inputs it is made of.

A cache hit must return a build made the same way, so the key covers everything that
changes what the compiler produces: the tree (the commit and its submodules' commits,
or a digest of every file and symlink of a tree built as it is on disk), the flavor and
its recipe (flags, options, patches' digests), both compilers' full identities, the
tools the build runs (cmake, make, bison), the options every flavor of the family gets,
the environment variables the build systems read, and for a flavor tuned to the host
CPU (`-march=native`, RocksDB's PORTABLE=OFF) that CPU. The inputs are written beside
the build (build-inputs.json) and printed by `dbregress fetch --why`.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

from dbregress.model.errors import BuildNotFound
from dbregress.provision.maven import sha256
from dbregress.provision.source.recipes import Recipe

# Bumped when the code that writes a family's command lines changes in a way the
# inputs below do not show (the order of steps, a target's name).
BUILDER_VERSION = 2
INPUTS_FILE = "build-inputs.json"
# What configure, cmake, make and the compilers read from the environment and would
# change the result: compilers and their flags, where headers, libraries and packages
# are found, and the MySQL family's boost.
BUILD_ENV = (
    "CC",
    "CXX",
    "CFLAGS",
    "CXXFLAGS",
    "CPPFLAGS",
    "LDFLAGS",
    "LIBS",
    "CPATH",
    "C_INCLUDE_PATH",
    "CPLUS_INCLUDE_PATH",
    "LIBRARY_PATH",
    "PKG_CONFIG_PATH",
    "PKG_CONFIG_LIBDIR",
    "CMAKE_PREFIX_PATH",
    "CMAKE_INCLUDE_PATH",
    "CMAKE_LIBRARY_PATH",
    "CMAKE_GENERATOR",
    "WITH_BOOST",
    "BOOST_ROOT",
    "OPENSSL_ROOT_DIR",
    "ROCKSDB_DISABLE_JEMALLOC",
    "PORTABLE",
    "DEBUG_LEVEL",
    "EXTRA_CXXFLAGS",
    "EXTRA_CFLAGS",
    "EXTRA_LDFLAGS",
)
# The Debian packages of libraries each family's build finds and uses when they are
# installed (configure's and cmake's checks): their versions, or their absence, are
# part of the key, so installing libaio-dev (InnoDB's native AIO) or a newer OpenSSL
# makes another build. Where dpkg is missing the key says so.
FAMILY_PACKAGES = {
    "postgres": (
        "libreadline-dev",
        "zlib1g-dev",
        "libssl-dev",
        "libicu-dev",
        "liblz4-dev",
        "libzstd-dev",
        "libxml2-dev",
        "libselinux1-dev",
        "libsystemd-dev",
    ),
    "mysql": (
        "liblzo2-dev",
        "libssl-dev",
        "zlib1g-dev",
        "libncurses-dev",
        "libpcre2-dev",
        "libfmt-dev",
        "libaio-dev",
        "liburing-dev",
        "libsnappy-dev",
        "liblz4-dev",
        "libzstd-dev",
        "libbz2-dev",
        "liblzma-dev",
        "libsystemd-dev",
        "libxml2-dev",
        "libcurl4-openssl-dev",
        "libtirpc-dev",
        "libudev-dev",
        "libnuma-dev",
        "libjemalloc-dev",
        "libedit-dev",
        "libboost-dev",
    ),
    "rocksdb": (
        "libsnappy-dev",
        "liblz4-dev",
        "libzstd-dev",
        "libbz2-dev",
        "zlib1g-dev",
        "liburing-dev",
        "libgflags-dev",
        "libjemalloc-dev",
        "libtbb-dev",
        "libnuma-dev",
    ),
}
# The tools besides the compilers whose version is part of the key, per family.
FAMILY_TOOLS = {
    "postgres": ("make", "bison", "flex", "ld", "ar"),
    "mysql": ("cmake", "make", "bison", "ld", "ar"),
    "rocksdb": ("cmake", "make", "ld", "ar"),
}
# What every build links against or includes whatever the family: the C library's and
# the kernel's headers, the C++ library's, binutils.
TOOLCHAIN_PACKAGES = ("libc6-dev", "linux-libc-dev", "libstdc++-12-dev", "binutils")


def _first_line(args: list[str]) -> str:
    """The first line a tool prints, run where it can write nothing of ours."""
    try:
        done = subprocess.run(
            args, capture_output=True, text=True, timeout=60, check=False, cwd="/"
        )
    except OSError as e:
        return f"cannot run: {e}"
    lines = [ln.strip() for ln in (done.stdout + done.stderr).splitlines() if ln.strip()]
    return lines[0] if lines else ""


def find_compiler(named: str, variable: str, default: str) -> str:
    """The compiler's path: the recipe's, else $CC or $CXX, else gcc or g++;
    BuildNotFound when it is not on PATH."""
    cc = named or os.environ.get(variable) or default
    path = shutil.which(cc)
    if path is None:
        hint = f"{cc}, or change the flavor" if named else f"{default}, or set {variable}"
        raise BuildNotFound(
            f"building from source needs a {'C++' if variable == 'CXX' else 'C'} compiler; "
            f"{cc!r} is not on PATH (apt-get install {hint})"
        )
    return path


def compiler_identity(path: str) -> dict[str, str]:
    """What says which compiler this is: the file it resolves to and its digest (two
    gcc 12.2.0 packages with different patches differ), its version line, the target
    it builds for and its full version (`-dumpfullversion`)."""
    real = Path(path).resolve()
    out = {
        "path": path,
        "resolved": str(real),
        "sha256": _digest(real),
        "version": _first_line([path, "--version"]),
        "target": _first_line([path, "-dumpmachine"]),
        "full_version": _first_line([path, "-dumpfullversion"]),
    }
    if real.name == "ccache":  # a ccache masquerade directory on PATH: the driver is ccache
        out["ccache_masquerade"] = "yes"
    # the programs that compile and link, not only the driver that runs them
    for prog in ("cc1", "cc1plus", "ld"):
        named = _first_line([path, f"-print-prog-name={prog}"])
        found = shutil.which(named) if named else None
        target = Path(found or named) if named else None
        if target is not None and target.is_file():
            out[f"{prog}_sha256"] = _digest(target.resolve())
    return out


def _digest(path: Path) -> str:
    """The file's sha256 (maven.sha256), or "unreadable: ..." when it cannot be read."""
    try:
        return sha256(path)
    except OSError as e:
        return f"unreadable: {e.strerror}"


def tool_versions(family: str) -> dict[str, str]:
    """The version line of each tool the family's build runs (absent: "not found")."""
    out = {}
    for tool in FAMILY_TOOLS.get(family, ()):
        path = shutil.which(tool)
        out[tool] = _first_line([path, "--version"]) if path else "not found"
    return out


def package_versions(family: str) -> dict[str, str]:
    """The installed version of each library package the family's build may use
    ("absent" when it is not installed)."""
    names = (*TOOLCHAIN_PACKAGES, *FAMILY_PACKAGES.get(family, ()))
    if not names or shutil.which("dpkg-query") is None:
        return {"dpkg": "not found"} if names else {}
    done = subprocess.run(
        ["dpkg-query", "-W", "-f=${Package}\t${Status}\t${Version}\n", *names],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    found = {}
    for line in done.stdout.splitlines():
        name, status, version = [*line.split("\t"), "", ""][:3]
        if status.endswith(" installed"):
            found[name.split(":")[0]] = version
    return {name: found.get(name, "absent") for name in names}


_NOT_PORTABLE = re.compile(r"-DPORTABLE(?::BOOL)?=(?:OFF|0|FALSE|NO)\b", re.IGNORECASE)


def native(how: Recipe) -> bool:
    """Whether the build tunes the code to the host CPU: `native` anywhere in the
    recipe's flags and options or in the compiler flags of the environment, or
    RocksDB's PORTABLE turned off."""
    texts = [
        str(how.get("cflags", "")),
        str(how.get("ldflags", "")),
        *how.get("cmake", []),
        *how.get("configure", []),
        *(os.environ.get(k, "") for k in ("CFLAGS", "CXXFLAGS", "CPPFLAGS")),
    ]
    return any("native" in text or _NOT_PORTABLE.search(text) for text in texts)


def host_cpu(cc: str = "") -> dict[str, str]:
    """The host CPU: its model as /proc/cpuinfo names it, and what -march=native means
    to the compiler (gcc's `-march=native -Q --help=target`: the architecture and
    every instruction set it enables), else a digest of /proc/cpuinfo's flags."""
    if cc:
        done = subprocess.run(
            [cc, "-march=native", "-Q", "--help=target"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        if done.returncode == 0 and "-march=" in done.stdout:
            return {
                "model": _cpuinfo()[0],
                "native_sha256": hashlib.sha256(done.stdout.encode()).hexdigest(),
            }
    model, flags = _cpuinfo()
    return {"model": model, "flags_sha256": hashlib.sha256(flags.encode()).hexdigest()}


def _cpuinfo() -> tuple[str, str]:
    model, flags = "", ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            name, _, value = line.partition(":")
            if name.strip() == "model name" and not model:
                model = value.strip()
            elif name.strip() == "flags" and not flags:
                flags = value.strip()
    except OSError:
        pass
    return model, flags


def build_env() -> dict[str, str]:
    """The environment variables the build reads, those that are set."""
    return {k: os.environ[k] for k in BUILD_ENV if k in os.environ}


def inputs(
    engine: str,
    family: str,
    tree: dict[str, Any],
    flavor: str,
    how: Recipe,
    compilers: dict[str, str],
    fixed_options: list[str],
) -> dict[str, Any]:
    """Everything the key is made of (JSON-ready)."""
    out: dict[str, Any] = {
        "builder_version": BUILDER_VERSION,
        "engine": engine,
        "family": family,
        "tree": tree,
        "flavor": flavor,
        "recipe": keyed_recipe(how),
        "compilers": {name: compiler_identity(path) for name, path in compilers.items()},
        "tools": tool_versions(family),
        "packages": package_versions(family),
        "fixed_options": fixed_options,
        "environment": build_env(),
    }
    if native(how):
        out["cpu"] = host_cpu(compilers.get("cc", ""))
    return out


def keyed_recipe(how: Recipe) -> dict[str, Any]:
    """The recipe as the key holds it: a patch by its file's name, range and digest,
    not its path (a lab folder moved elsewhere builds the same thing)."""
    out: dict[str, Any] = dict(how)
    if "patches" in how:
        out["patches"] = [
            {"name": Path(x["file"]).name, "versions": x["versions"], "sha256": x["sha256"]}
            for x in how["patches"]
        ]
    return out


def cache_key(inputs: dict[str, Any]) -> str:
    """The build's directory name: its tree and flavor to read, and a digest of all
    its inputs."""
    tree = inputs["tree"]
    tree_id = str(tree.get("commit") or "tree-" + str(tree.get("digest", "")))
    digest = hashlib.sha256(json.dumps(inputs, sort_keys=True).encode()).hexdigest()
    return f"src-{tree_id[:16]}-{inputs['flavor']}-{digest[:12]}"
