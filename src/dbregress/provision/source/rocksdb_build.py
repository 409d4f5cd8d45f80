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
install component (`runtime`) and copies the headers. Trees older than RocksDB 5.16 are
refused with a clear message: the loadgen calls rocksdb_options_set_max_background_jobs,
which 5.16's C API was the first to have (and the cmake of trees before 5.8 installs into
lib64 and builds in none of LZ4, ZSTD, zlib and bzip2).
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
# The C API functions the loadgen cannot run without (loadgen/src/driver/rocksdb_api.rs,
# its `required` list and the bloom filter's constructor; a test keeps the two alike):
# a tree whose include/rocksdb/c.h lacks one is refused before anything is built.
REQUIRED_C_API: tuple[str, ...] = tuple(
    f"rocksdb_{name}"
    for name in (
        *("options_create", "options_destroy", "options_set_create_if_missing"),
        *("options_set_compression", "options_set_write_buffer_size"),
        *("options_set_max_background_jobs", "options_set_level0_file_num_compaction_trigger"),
        *("options_set_max_bytes_for_level_base", "options_set_target_file_size_base"),
        *("options_set_use_direct_reads", "options_set_use_direct_io_for_flush_and_compaction"),
        *("options_enable_statistics", "options_statistics_get_string"),
        *("options_set_block_based_table_factory", "block_based_options_create"),
        *("block_based_options_destroy", "block_based_options_set_block_size"),
        *("block_based_options_set_filter_policy", "block_based_options_set_block_cache"),
        *("cache_create_lru", "cache_destroy", "open", "close", "writebatch_create"),
        *("writebatch_destroy", "writebatch_clear", "writebatch_put", "write", "get_pinned"),
        *("pinnableslice_value", "pinnableslice_destroy", "create_iterator", "iter_destroy"),
        *("iter_seek", "iter_seek_for_prev", "iter_valid", "iter_next", "iter_prev"),
        *("iter_key", "iter_value", "iter_get_error", "readoptions_create"),
        *("readoptions_destroy", "writeoptions_create", "writeoptions_destroy"),
        *("writeoptions_disable_WAL", "writeoptions_set_sync", "flushoptions_create"),
        *("flushoptions_destroy", "flushoptions_set_wait", "flush", "compactoptions_create"),
        *("compactoptions_destroy", "compactoptions_set_exclusive_manual_compaction"),
        *("compactoptions_set_change_level", "compactoptions_set_target_level"),
        *("compact_range_opt", "property_value", "free", "filterpolicy_create_bloom_full"),
    )
)
# The oldest release whose C API has all of them (max_background_jobs: RocksDB 5.16).
OLDEST = "5.16"
ZLIB_MODULE = "cmake/modules/Findzlib.cmake"

# The cmake options every flavor gets. They are constants, so they are part of the cache
# key through this module's code rather than the recipe; PORTABLE follows the flavor's
# flags (portable_option), and a flavor's own `cmake` list comes after them all and wins.
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

# A flag choosing the CPU the code is for: the flavor then says the instruction sets.
_MARCH = re.compile(r"(?:^|\s)-march=\S+")
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
    files, every function of it the loadgen needs (REQUIRED_C_API: RocksDB 5.16 and
    newer), and a CMakeLists.txt with the shared target, GNUInstallDirs and every
    compression switch (5.8 and newer)."""
    spec = f"rocksdb@src:{tree}"
    missing = [f for f in TREE_FILES if not (tree / f).is_file()]
    if missing:
        raise BuildNotFound(
            f"{spec}: not a RocksDB source tree with the C API (no {', '.join(missing)}); "
            "give the top of the tree (where include/ and db/ are)"
        )
    version = tree_version(tree)
    named = f"RocksDB {'.'.join(map(str, version))}" if version else "this RocksDB tree"
    header = (tree / TREE_FILES[0]).read_text(errors="replace")
    lacking_api = [f for f in REQUIRED_C_API if not re.search(rf"\b{f}\s*\(", header)]
    if lacking_api:
        raise BuildNotFound(
            f"{spec}: {named}'s C API lacks {lacking_api[0]}"
            f"{f' (and {len(lacking_api) - 1} more)' if len(lacking_api) > 1 else ''}, "
            f"which the loadgen calls; dbregress runs RocksDB {OLDEST} and newer"
        )
    cmakelists = tree / "CMakeLists.txt"
    text = cmakelists.read_text(errors="replace") if cmakelists.is_file() else ""
    lacking = [word for word in CMAKE_NEEDS if word not in text]
    if lacking:
        has = "no CMakeLists.txt" if not text else f"a CMakeLists.txt without {lacking[0]}"
        raise BuildNotFound(
            f"{spec}: {named} has {has}; dbregress builds RocksDB {OLDEST} and newer with "
            "cmake. Build the library yourself (`make shared_lib` in the tree) and give "
            "it as rocksdb@/path/to/librocksdb.so"
        )


def portable_option(flags: str) -> str:
    """RocksDB's PORTABLE for a flavor's flags: 0 when they name the CPU (-march=...:
    the tree then adds its own -march=native, which the flavor's flags, coming after
    it, override with theirs, -mno-avx512f and the like included), else 1 (code for
    any x86-64). 1 and 0, not ON and OFF: RocksDB 8.3 to 8.6 read PORTABLE as a string
    in which only 1 means the baseline (ON would become -march=ON)."""
    return "-DPORTABLE=0" if _MARCH.search(flags) else "-DPORTABLE=1"


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
    their launcher when given, FIXED_OPTIONS, PORTABLE as the flags say
    (portable_option), the tree's own fixes (tree_options), and the flavor's own
    options last."""
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
    portable = portable_option(flags)
    flavor = [str(o) for o in how.get("cmake", [])]
    return [*options, *FIXED_OPTIONS, portable, *tree_fixes, *flavor]


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
    """(what, argv, cwd) of each step, to run in order: cmake with the tree as its
    source and `build` as its build directory (-S and -B: a CMakeCache.txt the user's
    own in-source build left in the tree is neither read nor rewritten), the shared
    library target only, its install component into `destdir` (lib/librocksdb.so*, the
    soname links kept as links) and the headers copied to destdir/include/rocksdb."""
    check_tree(tree)
    options = cmake_options(how, cc, cxx, ccache, tree_options(tree))
    return [
        ("cmake", ["cmake", "-S", str(tree), "-B", str(build), *options], build),
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
