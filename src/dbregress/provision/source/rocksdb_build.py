"""`rocksdb@src:PATH[#REF][+FLAVOR]`: RocksDB's shared library, with its C API, built
from a source tree with the tree's own CMakeLists.txt.

build.py does what every source build shares (the tree at a commit, patches, a build
directory, ccache's environment, one log, the DESTDIR-style install into a temporary
directory renamed into the cache). This module says what is RocksDB's: what makes a
directory a RocksDB tree, which version it is, the cmake options, and the steps that
leave `lib/librocksdb.so*` (the soname links as links) and `include/rocksdb/` in the
install directory.

Only the `rocksdb-shared` target is built: RocksDB's default targets also compile every
source file a second time for the static library, and its tools and tests. `make
install` would need the static library, so the install takes the shared library's own
install component (`runtime`) and copies the headers. Trees older than RocksDB 5.8 are
refused with a clear message: their cmake installs into lib64 and builds in none of
LZ4, ZSTD, zlib and bzip2.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from dbregress.model.errors import BuildNotFound, ProvisionError
from dbregress.provision.versioning import version_key

# What makes a directory a RocksDB tree: the C API the loadgen calls (its header and
# its implementation).
TREE_FILES = ("include/rocksdb/c.h", "db/c.cc")
VERSION_HEADER = "include/rocksdb/version.h"
SHARED_TARGET = "rocksdb-shared"
# What a tree's CMakeLists.txt must mention to be built here, each first in RocksDB 5.8
# (September 2017): the shared library target (5.2), GNUInstallDirs (installs into
# lib/, not a fixed lib64) and the compression switches beyond Snappy.
CMAKE_NEEDS = (SHARED_TARGET, "GNUInstallDirs", "WITH_LZ4", "WITH_ZSTD", "WITH_BZ2")
OLDEST = "5.8"
ZLIB_MODULE = "cmake/modules/Findzlib.cmake"

# The cmake options every flavor gets. They are constants, so they are part of the cache
# key through this module's code rather than the recipe; a flavor's own `cmake` list
# comes after them and wins (rel_native: -DPORTABLE=0).
FIXED_OPTIONS: tuple[str, ...] = (
    # The shared library (the loadgen dlopens it); on by default, explicit since 6.7.
    "-DROCKSDB_BUILD_SHARED=ON",
    # The compression libraries the rocksdbjni jars have, so a database or a benchmark
    # setting works the same against a jar's library and one built here.
    "-DWITH_SNAPPY=ON",
    "-DWITH_LZ4=ON",
    "-DWITH_ZLIB=ON",
    "-DWITH_ZSTD=ON",
    "-DWITH_BZ2=ON",
    # Nothing but the library: gflags is for the tools, which are not built; the tests
    # and tools are off so cmake neither looks for their dependencies nor defines them.
    "-DWITH_GFLAGS=OFF",
    "-DWITH_TESTS=OFF",
    "-DWITH_BENCHMARK_TOOLS=OFF",
    "-DWITH_CORE_TOOLS=OFF",
    "-DWITH_TOOLS=OFF",
    "-DWITH_TRACE_TOOLS=OFF",
    # io_uring only when liburing-dev happens to be installed would make the library
    # depend on the machine; the jars do not use it either.
    "-DWITH_LIBURING=OFF",
    # Code for any x86-64, not this CPU's (-march=native); 1 rather than ON because
    # RocksDB 8.3 to 8.6 read PORTABLE as a string in which only 1 means baseline.
    "-DPORTABLE=1",
    # Newer compilers warn on older trees; RocksDB's default turns warnings into errors.
    "-DFAIL_ON_WARNINGS=OFF",
    # RocksDB 6.3+ puts ccache in front of every compile and link when it finds one on
    # PATH; ccache is build.py's decision (its directory, its launcher), not the tree's.
    "-DCCACHE_FOUND=OFF",
    # GNUInstallDirs picks lib64 on some distributions; installed_library looks in lib/.
    "-DCMAKE_INSTALL_LIBDIR=lib",
    # CMake 4 refuses trees declaring cmake_minimum_required below 3.5 (RocksDB < 6.7).
    "-DCMAKE_POLICY_VERSION_MINIMUM=3.5",
    # cmake seeds these from $CFLAGS and $CXXFLAGS: the flavor says the flags, not the
    # environment of whoever runs dbregress.
    "-DCMAKE_C_FLAGS=",
    "-DCMAKE_CXX_FLAGS=",
)

_VERSION_PART = re.compile(r"^\s*#\s*define\s+ROCKSDB_(MAJOR|MINOR|PATCH)\s+(\d+)", re.MULTILINE)


def tree_version(tree: Path) -> tuple[int, int, int] | None:
    """The version include/rocksdb/version.h states (ROCKSDB_MAJOR, _MINOR, _PATCH);
    None when the file or one of the three is missing."""
    header = tree / VERSION_HEADER
    if not header.is_file():
        return None
    parts = dict(_VERSION_PART.findall(header.read_text(errors="replace")))
    if len(parts) != 3:
        return None
    return int(parts["MAJOR"]), int(parts["MINOR"]), int(parts["PATCH"])


def check_tree(tree: Path) -> None:
    """BuildNotFound unless `tree` is a RocksDB tree this module can build: the C API's
    files, and a CMakeLists.txt with the shared target, GNUInstallDirs and every
    compression switch (RocksDB 5.8 and newer)."""
    spec = f"rocksdb@src:{tree}"
    missing = [f for f in TREE_FILES if not (tree / f).is_file()]
    if missing:
        raise BuildNotFound(
            f"{spec}: not a RocksDB source tree with the C API (no {', '.join(missing)}); "
            "give the top of the tree (where include/ and db/ are)"
        )
    cmakelists = tree / "CMakeLists.txt"
    text = cmakelists.read_text(errors="replace") if cmakelists.is_file() else ""
    lacking = [word for word in CMAKE_NEEDS if word not in text]
    if lacking:
        version = tree_version(tree)
        named = f"RocksDB {'.'.join(map(str, version))}" if version else "this RocksDB tree"
        has = "no CMakeLists.txt" if not text else f"a CMakeLists.txt without {lacking[0]}"
        raise BuildNotFound(
            f"{spec}: {named} has {has}; dbregress builds RocksDB {OLDEST} and newer with "
            "cmake. Build the library yourself (`make shared_lib` in the tree) and give "
            "it as rocksdb@/path/to/librocksdb.so"
        )


def tree_options(tree: Path) -> list[str]:
    """Options for a tree whose CMakeLists.txt cannot take FIXED_OPTIONS as they are.
    RocksDB 6.0 and 6.1 ask for `find_package(zlib REQUIRED)` after deleting their own
    Findzlib.cmake (CMake's module is FindZLIB), so WITH_ZLIB=ON stops cmake: those
    trees are built without zlib (a flavor may still say -DWITH_ZLIB=ON, after these)."""
    cmakelists = tree / "CMakeLists.txt"
    text = cmakelists.read_text(errors="replace") if cmakelists.is_file() else ""
    if "find_package(zlib REQUIRED)" in text and not (tree / ZLIB_MODULE).is_file():
        return ["-DWITH_ZLIB=OFF"]
    return []


def cmake_options(
    how: Mapping[str, Any], cc: str, cxx: str, ccache: str | None, tree_fixes: Sequence[str] = ()
) -> list[str]:
    """The cmake options of a build: its build type with the flavor's flags as that
    type's C and C++ flags (replacing cmake's -O3 or -O2 -g), the compilers, ccache as
    their launcher when given, FIXED_OPTIONS, the tree's own fixes (tree_options), and
    the flavor's own options last."""
    kind = str(how.get("build_type") or "Release")
    upper = kind.upper()
    flags = str(how.get("cflags", "-O2 -DNDEBUG"))
    options = [
        f"-DCMAKE_BUILD_TYPE={kind}",
        f"-DCMAKE_C_COMPILER={cc}",
        f"-DCMAKE_CXX_COMPILER={cxx}",
        f"-DCMAKE_C_FLAGS_{upper}={flags}",
        f"-DCMAKE_CXX_FLAGS_{upper}={flags}",
        f"-DCMAKE_SHARED_LINKER_FLAGS={how.get('ldflags', '')}",
    ]
    if ccache:
        options += [f"-DCMAKE_{lang}_COMPILER_LAUNCHER={ccache}" for lang in ("C", "CXX")]
    return [*options, *FIXED_OPTIONS, *tree_fixes, *(str(o) for o in how.get("cmake", []))]


def build_steps(
    tree: Path,
    build: Path,
    destdir: Path,
    how: Mapping[str, Any],
    cc: str,
    cxx: str,
    ccache: str | None,
    jobs: int,
) -> list[tuple[str, list[str], Path]]:
    """(what, argv, cwd) of each step, to run in order: cmake in `build`, the shared
    library target only, its install component into `destdir` (lib/librocksdb.so*, the
    soname links kept as links) and the headers copied to destdir/include/rocksdb."""
    check_tree(tree)
    return [
        (
            "cmake",
            ["cmake", str(tree), *cmake_options(how, cc, cxx, ccache, tree_options(tree))],
            build,
        ),
        (
            f"build {SHARED_TARGET}",
            ["cmake", "--build", ".", "--target", SHARED_TARGET, "-j", str(max(1, jobs))],
            build,
        ),
        (
            "install the library",
            ["cmake", "--install", ".", "--component", "runtime", "--prefix", str(destdir)],
            build,
        ),
        (
            "copy the headers",
            [
                "cmake",
                "-E",
                "copy_directory",
                str(tree / "include" / "rocksdb"),
                str(destdir / "include" / "rocksdb"),
            ],
            build,
        ),
    ]


def installed_library(root: Path) -> Path:
    """The library under root/lib to load: the real file (librocksdb.so.X.Y.Z; its
    name says the version), the newest if there are several; else the unversioned
    link. ProvisionError when there is neither."""
    lib = root / "lib"
    found = sorted(lib.glob("librocksdb.so*"), key=lambda p: version_key(p.name))
    files = [p for p in found if p.is_file() and not p.is_symlink()]
    if files:
        return files[-1]
    link = lib / "librocksdb.so"
    if link.exists():
        return link
    raise ProvisionError(
        f"{root}: the RocksDB build installed no librocksdb.so* into {lib} "
        f"(found: {', '.join(p.name for p in found) or 'nothing'})"
    )
