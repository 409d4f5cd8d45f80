"""A source build's cache key and the inputs it is made of.

A cache hit must return a build made the same way, so the key covers everything that
changes what the compiler produces: the tree (the commit and its submodules' commits,
or a digest of every file and symlink of a tree built as it is on disk), the flavor and
its recipe (flags, options, patches' digests), both compilers' full identities, the
tools the build runs (cmake, make, bison), every linker the compiler may choose, the
packages of the libraries the build may use and of the C++ headers the compiler
includes, the libraries and headers under /usr/local (which no package manager knows),
the options every flavor of the family gets, the environment variables the build
systems read, and for a flavor tuned to the host CPU (`-march=native`, RocksDB's
PORTABLE=0) that CPU as the flavor's flags see it. The inputs are written beside
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

from dbregress.model.errors import BuildNotFound
from dbregress.provision.maven import sha256
from dbregress.provision.source.recipes import Recipe
from dbregress.shapes.source_build import (
    BuildInputs,
    CompilerIdentity,
    CpuInputs,
    CxxHeaders,
    KeyedRecipe,
    TreeInputs,
)

# Bumped when the code that writes a family's command lines changes in a way the
# inputs below do not show (the order of steps, a target's name).
BUILDER_VERSION = 3
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
# the kernel's headers, binutils. The C++ headers' package is the one that owns the
# headers the C++ compiler includes (cxx_headers), not a fixed name.
TOOLCHAIN_PACKAGES = ("libc6-dev", "linux-libc-dev", "binutils")
# The linkers a compiler may be told to use (-fuse-ld=bfd, gold, lld): MySQL 8.0's cmake
# links with lld when it finds ld.lld (its USE_LD_LLD option, on by default), with gold
# where it is told to; ld is the default.
LINKERS = ("ld", "ld.bfd", "ld.gold", "ld.lld")
# Where configure and cmake look for libraries and headers before the system's own,
# which dpkg does not know: their files' digests are part of the key.
LOCAL_DIRS = ("/usr/local/include", "/usr/local/lib", "/usr/local/lib64")
# What under LOCAL_DIRS a build may find: libraries, pkg-config and cmake package
# files, headers (anything under include/). Python's and others' trees are not read.
_LOCAL_FILE = re.compile(r"^lib.*\.(?:so(?:\.[0-9.]+)?|a)$|\.pc$|\.cmake$")
_LOCAL_SKIP = re.compile(r"^(?:python[0-9.]*|site-packages|node_modules|perl[0-9.]*)$")


def _first_line(args: list[str], ok_only: bool = False) -> str:
    """The first line a tool prints, run where it can write nothing of ours; with
    `ok_only`, "" unless it exited 0."""
    try:
        done = subprocess.run(
            args, capture_output=True, text=True, timeout=60, check=False, cwd="/"
        )
    except OSError as e:
        return f"cannot run: {e}"
    if ok_only and done.returncode != 0:
        return ""
    lines = [ln.strip() for ln in (done.stdout + done.stderr).splitlines() if ln.strip()]
    return lines[0] if lines else ""


def _full_version(path: str) -> str:
    """gcc's -dumpfullversion (12.2.0 where -dumpversion may say 12); clang has no such
    option (it prints "no input files"), and its -dumpversion is already the full one."""
    return _first_line([path, "-dumpfullversion"], ok_only=True) or _first_line(
        [path, "-dumpversion"]
    )


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


def _prog_digest(path: str, prog: str) -> str | None:
    """The digest of the program the compiler runs as `prog` (cc1, cc1plus, ld), None
    when it names none that is a file."""
    named = _first_line([path, f"-print-prog-name={prog}"])
    found = shutil.which(named) if named else None
    target = Path(found or named) if named else None
    if target is not None and target.is_file():
        return _digest(target.resolve())
    return None


def compiler_identity(path: str) -> CompilerIdentity:
    """What says which compiler this is: the file it resolves to and its digest (two
    gcc 12.2.0 packages with different patches differ), its version line, the target
    it builds for and its full version (`-dumpfullversion`), and the digests of the
    programs that compile and link, not only of the driver that runs them."""
    real = Path(path).resolve()
    out: CompilerIdentity = {
        "path": path,
        "resolved": str(real),
        "sha256": _digest(real),
        "version": _first_line([path, "--version"]),
        "target": _first_line([path, "-dumpmachine"]),
        "full_version": _full_version(path),
    }
    if real.name == "ccache":  # a ccache masquerade directory on PATH: the driver is ccache
        out["ccache_masquerade"] = "yes"
    if (cc1 := _prog_digest(path, "cc1")) is not None:
        out["cc1_sha256"] = cc1
    if (cc1plus := _prog_digest(path, "cc1plus")) is not None:
        out["cc1plus_sha256"] = cc1plus
    if (ld := _prog_digest(path, "ld")) is not None:
        out["ld_sha256"] = ld
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


def linkers(cc: str) -> dict[str, str]:
    """Each linker the compiler may choose (LINKERS, found where the compiler finds
    them: its own directories, then PATH): its version line and digest, or "absent"."""
    out = {}
    for name in LINKERS:
        named = _first_line([cc, f"-print-prog-name={name}"]) or name
        found = shutil.which(named)
        if found is None:
            out[name] = "absent"
            continue
        out[name] = f"{_first_line([found, '--version'])}; sha256 {_digest(Path(found).resolve())}"
    return out


def _dpkg_owner(path: Path) -> tuple[str, str] | None:
    """(package, version) of the Debian package that owns `path`, None where dpkg does
    not know it (or there is no dpkg)."""
    if shutil.which("dpkg-query") is None:
        return None
    for candidate in dict.fromkeys((path, path.resolve())):
        done = subprocess.run(
            ["dpkg-query", "-S", str(candidate)],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        if done.returncode == 0 and ":" in done.stdout:
            package = done.stdout.split(":", 1)[0].split(",")[0].strip()
            versions = package_query([package])
            return package, versions.get(package, "absent")
    return None


def cxx_headers(cxx: str, flags: str = "") -> CxxHeaders:
    """The C++ standard library headers `cxx` includes with the flavor's flags (libstdc++
    of the GCC that g++, or clang's chosen GCC installation, belongs to; libc++ with
    -stdlib=libc++): the file <vector> resolves to, and the package owning it with its
    version, else the header's own digest."""
    try:
        done = subprocess.run(
            [cxx, *flags.split(), "-x", "c++", "-M", "-"],
            input="#include <vector>\n",
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
            cwd="/",
        )
    except OSError as e:
        return {"header": f"cannot run {cxx}: {e}", "package": "unknown", "version": ""}
    words = done.stdout.replace("\\\n", " ").split()
    header = next((w for w in words if w.endswith("/vector")), "")
    if not header:
        return {"header": "not found", "package": "unknown", "version": ""}
    owner = _dpkg_owner(Path(header))
    if owner is None:
        return {"header": header, "package": "none", "version": f"sha256 {_digest(Path(header))}"}
    return {"header": header, "package": owner[0], "version": owner[1]}


def package_query(names: list[str]) -> dict[str, str]:
    """The installed version of each package named ("absent" when it is not
    installed); {"dpkg": "not found"} without dpkg."""
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


def package_versions(family: str) -> dict[str, str]:
    """The installed version of each library package the family's build may use
    ("absent" when it is not installed)."""
    return package_query([*TOOLCHAIN_PACKAGES, *FAMILY_PACKAGES.get(family, ())])


def local_digests() -> dict[str, str]:
    """Per directory of LOCAL_DIRS, a digest of the names, symlink targets and contents
    of what a build may find there (every file under include/; libraries, .pc and
    .cmake files under lib/), or "empty"."""
    out = {}
    for top in LOCAL_DIRS:
        h = hashlib.sha256()
        seen = 0
        for root, subdirs, files in os.walk(top):
            subdirs[:] = sorted(d for d in subdirs if not _LOCAL_SKIP.match(d))
            for name in sorted(files):
                if not top.endswith("include") and not _LOCAL_FILE.search(name):
                    continue
                path = os.path.join(root, name)
                h.update(os.fsencode(os.path.relpath(path, top)) + b"\0")
                if os.path.islink(path):
                    h.update(b"symlink\0" + os.fsencode(os.readlink(path)) + b"\0")
                else:
                    h.update(_digest(Path(path)).encode() + b"\0")
                seen += 1
        out[top] = f"{seen} files, sha256 {h.hexdigest()}" if seen else "empty"
    return out


_NOT_PORTABLE = re.compile(r"-DPORTABLE(?::BOOL)?=(?:OFF|0|FALSE|NO)\b", re.IGNORECASE)
_TURNED_OFF = re.compile(r"(?:^|\s)-mno-([a-z0-9.-]+)")


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


def host_cpu(cc: str = "", flags: str = "") -> CpuInputs:
    """The host CPU as the flavor sees it: its model as /proc/cpuinfo names it, and what
    the flavor's target flags mean to the compiler (gcc's `-Q --help=target` of its
    -march and -m flags, -march=native when it names none: the architecture and every
    instruction set enabled, so `-march=native -mno-avx512f` is not `-march=native`),
    else a digest of /proc/cpuinfo's flags; and the instruction sets the flags turn
    off (-mno-...), said in the key as they are in the flavor."""
    target = [f for f in flags.split() if f.startswith("-m")]
    if not any(f.startswith("-march=") for f in target):
        target.insert(0, "-march=native")
    turned_off = sorted(set(_TURNED_OFF.findall(flags)))
    if cc:
        done = subprocess.run(
            [cc, *target, "-Q", "--help=target"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        if done.returncode == 0 and "-march=" in done.stdout:
            return {
                "model": _cpuinfo()[0],
                "native_sha256": hashlib.sha256(done.stdout.encode()).hexdigest(),
                "turned_off": turned_off,
            }
    model, cpu_flags = _cpuinfo()
    return {
        "model": model,
        "flags_sha256": hashlib.sha256(cpu_flags.encode()).hexdigest(),
        "turned_off": turned_off,
    }


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
    tree: TreeInputs,
    flavor: str,
    how: Recipe,
    compilers: dict[str, str],
    fixed_options: list[str],
) -> BuildInputs:
    """Everything the key is made of (JSON-ready)."""
    out: BuildInputs = {
        "builder_version": BUILDER_VERSION,
        "engine": engine,
        "family": family,
        "tree": tree,
        "flavor": flavor,
        "recipe": keyed_recipe(how),
        "compilers": {name: compiler_identity(path) for name, path in compilers.items()},
        "tools": tool_versions(family),
        "linkers": linkers(compilers["cc"]),
        "packages": package_versions(family),
        "local": local_digests(),
        "fixed_options": fixed_options,
        "environment": build_env(),
    }
    if "cxx" in compilers:
        out["cxx_headers"] = cxx_headers(compilers["cxx"], how.get("cflags", ""))
    if native(how):
        out["cpu"] = host_cpu(compilers.get("cc", ""), how.get("cflags", ""))
    return out


def keyed_recipe(how: Recipe) -> KeyedRecipe:
    """The recipe as the key holds it: a patch by its file's name, range and digest,
    not its path (a lab folder moved elsewhere builds the same thing)."""
    out: KeyedRecipe = {"cflags": how["cflags"], "ldflags": how["ldflags"]}
    if "configure" in how:
        out["configure"] = list(how["configure"])
    if "cmake" in how:
        out["cmake"] = list(how["cmake"])
    if "build_type" in how:
        out["build_type"] = how["build_type"]
    if "cc" in how:
        out["cc"] = how["cc"]
    if "cxx" in how:
        out["cxx"] = how["cxx"]
    if "lto" in how:
        out["lto"] = how["lto"]
    if "myrocks" in how:
        out["myrocks"] = how["myrocks"]
    if "patches" in how:
        out["patches"] = [
            {"name": Path(x["file"]).name, "versions": x["versions"], "sha256": x["sha256"]}
            for x in how["patches"]
        ]
    return out


def cache_key(inputs: BuildInputs) -> str:
    """The build's directory name: its tree and flavor to read, and a digest of all
    its inputs."""
    tree = inputs["tree"]
    tree_id = str(tree.get("commit") or "tree-" + str(tree.get("digest", "")))
    digest = hashlib.sha256(json.dumps(inputs, sort_keys=True).encode()).hexdigest()
    return f"src-{tree_id[:16]}-{inputs['flavor']}-{digest[:12]}"
