"""`rocksdb@src:`'s RocksDB part (provision/source/rocksdb_build.py): the tree's version,
the cmake options and steps of each flavor, where the installed library is, and the
clear refusal of trees too old for cmake or for the loadgen's C API. One test runs the
steps for real on a stand-in tree of a few lines of CMake (a `rocksdb-shared` target
with RocksDB's install rules); Debian's RocksDB is built for real by hand
(docs/engines.md gives the figures)."""

from __future__ import annotations

import re
import shutil
import subprocess
import tomllib
from importlib import resources
from pathlib import Path

import pytest

from dbregress.model.errors import BuildNotFound, ProvisionError
from dbregress.provision.source import rocksdb_build as rocksdb_src
from dbregress.provision.source.recipes import recipe
from dbregress.provision.source.rocksdb_build import build_steps, installed_library, tree_version

ROOT = Path(__file__).resolve().parents[2]
DEBIAN_TREE = Path("/var/cache/dbregress/debian-src/rocksdb-7.8.3")
VERSION_H = """#pragma once
#define ROCKSDB_MAJOR {major}
#define ROCKSDB_MINOR 8
#define ROCKSDB_PATCH 3
#define __ROCKSDB_MAJOR__ ROCKSDB_MAJOR
"""
# A stand-in for RocksDB's CMakeLists.txt: its shared target, version and soname, and
# its install rule (the `runtime` component), around a one-function C library.
CMAKELISTS = """cmake_minimum_required(VERSION 3.10)
project(rocksdb VERSION 7.8.3 LANGUAGES C CXX)
include(GNUInstallDirs)
option(WITH_LZ4 "lz4" OFF)
option(WITH_ZSTD "zstd" OFF)
option(WITH_BZ2 "bzip2" OFF)
add_library(rocksdb STATIC db/c.c)
add_library(rocksdb-shared SHARED db/c.c)
set_target_properties(rocksdb-shared PROPERTIES VERSION 7.8.3 SOVERSION 7.8
                      OUTPUT_NAME rocksdb)
install(TARGETS rocksdb COMPONENT devel ARCHIVE DESTINATION "${CMAKE_INSTALL_LIBDIR}")
install(TARGETS rocksdb-shared COMPONENT runtime
        LIBRARY DESTINATION "${CMAKE_INSTALL_LIBDIR}")
"""
REL = {"cflags": "-O2 -DNDEBUG", "ldflags": "", "build_type": "Release", "cmake": []}
# The C API as a tree's include/rocksdb/c.h declares it: every function the loadgen needs.
C_H = "".join(f"extern void {name}(void* x);\n" for name in rocksdb_src.REQUIRED_C_API)


def make_tree(path: Path, major: int = 7, cmakelists: str | None = CMAKELISTS) -> Path:
    (path / "include/rocksdb").mkdir(parents=True)
    (path / "db").mkdir()
    (path / "include/rocksdb/c.h").write_text(C_H)
    (path / "include/rocksdb/version.h").write_text(VERSION_H.format(major=major))
    (path / "db/c.cc").write_text("// the C API\n")
    (path / "db/c.c").write_text("int rocksdb_open(void) { return 0; }\n")
    if cmakelists is not None:
        (path / "CMakeLists.txt").write_text(cmakelists)
    return path


def cmake_args(tmp: Path, how: dict[str, object], ccache: str | None = None) -> list[str]:
    """The cmake step's argv for a stand-in tree under `tmp`."""
    tree = make_tree(tmp / "tree")
    return build_steps(tree, tmp / "b", tmp / "d", how, "/cc", "/cxx", ccache, 2)[0][1]


def test_tree_version_reads_version_h(tmp_path: Path) -> None:
    assert tree_version(make_tree(tmp_path / "t")) == (7, 8, 3)
    (tmp_path / "t/include/rocksdb/version.h").write_text("#define ROCKSDB_MAJOR 7\n")
    assert tree_version(tmp_path / "t") is None
    assert tree_version(tmp_path / "nothing") is None


@pytest.mark.skipif(not DEBIAN_TREE.is_dir(), reason="Debian's RocksDB source is not unpacked")
def test_tree_version_of_debians_tree() -> None:
    assert tree_version(DEBIAN_TREE) == (7, 8, 3)
    rocksdb_src.check_tree(DEBIAN_TREE)  # new enough for cmake


def test_rel_steps_build_only_the_shared_target_with_the_flavors_flags(tmp_path: Path) -> None:
    tree = make_tree(tmp_path / "t")
    steps = build_steps(tree, tmp_path / "b", tmp_path / "d", REL, "/cc", "/cxx", None, 3)
    assert [what for what, _, _ in steps] == [
        "cmake",
        "build rocksdb-shared",
        "install the library",
        "copy the headers",
    ]
    assert all(cwd == tmp_path / "b" for _, _, cwd in steps)
    cmake = steps[0][1]
    assert cmake[:5] == ["cmake", "-S", str(tree), "-B", str(tmp_path / "b")]
    for option in (
        "-DCMAKE_BUILD_TYPE=Release",
        "-DCMAKE_C_COMPILER=/cc",
        "-DCMAKE_CXX_COMPILER=/cxx",
        "-DCMAKE_C_FLAGS_RELEASE=-O2 -DNDEBUG",
        "-DCMAKE_CXX_FLAGS_RELEASE=-O2 -DNDEBUG",
        "-DPORTABLE=1",
        "-DFAIL_ON_WARNINGS=OFF",
        "-DWITH_ZSTD=ON",
        "-DWITH_TESTS=OFF",
    ):
        assert option in cmake
    assert not [a for a in cmake if "LAUNCHER" in a]  # no ccache: no launcher
    assert steps[1][1] == ["cmake", "--build", ".", "--target", "rocksdb-shared", "-j", "3"]
    assert steps[2][1][-4:] == ["--component", "runtime", "--prefix", str(tmp_path / "d")]
    assert steps[3][1][-2:] == [str(tree / "include/rocksdb"), str(tmp_path / "d/include/rocksdb")]


def test_a_flavors_own_portable_comes_last_and_ccache_launches(tmp_path: Path) -> None:
    how = {**REL, "cflags": "-O3 -DNDEBUG", "ldflags": "-Wl,-O1", "cmake": ["-DPORTABLE=0"]}
    cmake = cmake_args(tmp_path, how, ccache="/usr/bin/ccache")
    portable = [a for a in cmake if a.startswith("-DPORTABLE=")]
    assert portable == ["-DPORTABLE=1", "-DPORTABLE=0"]  # cmake: the last one wins
    assert cmake[-1] == "-DPORTABLE=0"
    assert "-DCMAKE_CXX_FLAGS_RELEASE=-O3 -DNDEBUG" in cmake
    assert "-DCMAKE_SHARED_LINKER_FLAGS=-Wl,-O1" in cmake
    assert "-DCMAKE_C_COMPILER_LAUNCHER=/usr/bin/ccache" in cmake
    assert "-DCMAKE_CXX_COMPILER_LAUNCHER=/usr/bin/ccache" in cmake
    assert "-DCCACHE_FOUND=OFF" in cmake  # RocksDB's own ccache hook stays out


def test_a_debug_build_type_gets_the_flags_as_its_own(tmp_path: Path) -> None:
    cmake = cmake_args(
        tmp_path, {"cflags": "-O0 -g", "ldflags": "", "build_type": "Debug", "cmake": []}
    )
    assert "-DCMAKE_BUILD_TYPE=Debug" in cmake
    assert "-DCMAKE_CXX_FLAGS_DEBUG=-O0 -g" in cmake
    assert not [a for a in cmake if a.startswith("-DCMAKE_CXX_FLAGS_RELEASE")]


def test_fixed_options_are_constants_before_the_flavors(tmp_path: Path) -> None:
    cmake = cmake_args(tmp_path, {**REL, "cmake": ["-DWITH_JEMALLOC=ON"]})
    fixed = list(rocksdb_src.FIXED_OPTIONS)
    start = cmake.index(fixed[0])
    assert cmake[start : start + len(fixed)] == fixed
    assert cmake[-1] == "-DWITH_JEMALLOC=ON"


def test_installed_library_is_the_real_file_beside_its_links(tmp_path: Path) -> None:
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "librocksdb.so.7.8.3").write_bytes(b"\x7fELF")
    (lib / "librocksdb.so.7.8").symlink_to("librocksdb.so.7.8.3")
    (lib / "librocksdb.so").symlink_to("librocksdb.so.7.8")
    assert installed_library(tmp_path) == lib / "librocksdb.so.7.8.3"


def test_installed_library_missing_says_what_was_found(tmp_path: Path) -> None:
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib/librocksdb.a").write_bytes(b"!<arch>")
    with pytest.raises(ProvisionError, match=r"no librocksdb\.so\*.*found: nothing"):
        installed_library(tmp_path)


def test_a_tree_without_cmakelists_names_its_version_and_the_workaround(tmp_path: Path) -> None:
    tree = make_tree(tmp_path / "t", major=4, cmakelists=None)
    with pytest.raises(BuildNotFound) as e:
        build_steps(tree, tmp_path / "b", tmp_path / "d", REL, "/cc", "/cxx", None, 2)
    message = str(e.value)
    assert "RocksDB 4.8.3 has no CMakeLists.txt" in message
    assert "rocksdb@/path/to/librocksdb.so" in message
    assert "make shared_lib" in message


def test_a_cmakelists_too_old_is_refused(tmp_path: Path) -> None:
    old = CMAKELISTS.replace("include(GNUInstallDirs)\n", "")  # RocksDB 5.2-5.7: lib64
    tree = make_tree(tmp_path / "t", major=5, cmakelists=old)
    with pytest.raises(BuildNotFound, match=r"5\.8\.3 has a CMakeLists\.txt without GNUInstall"):
        rocksdb_src.check_tree(tree)


def test_not_a_rocksdb_tree(tmp_path: Path) -> None:
    with pytest.raises(BuildNotFound, match=r"not a RocksDB source tree .*include/rocksdb/c\.h"):
        rocksdb_src.check_tree(tmp_path)


def test_the_steps_install_the_library_with_its_soname_links(tmp_path: Path) -> None:
    tree = make_tree(tmp_path / "t")
    build, dest = tmp_path / "build", tmp_path / "dest"
    build.mkdir()
    cc, cxx = shutil.which("gcc") or "gcc", shutil.which("g++") or "g++"
    for what, argv, cwd in build_steps(tree, build, dest, REL, cc, cxx, None, 2):
        done = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, check=False)
        assert done.returncode == 0, f"{what}: {done.stdout[-2000:]}{done.stderr[-2000:]}"
    lib = dest / "lib"
    assert (lib / "librocksdb.so").is_symlink()
    assert (lib / "librocksdb.so.7.8").is_symlink()
    assert installed_library(dest) == lib / "librocksdb.so.7.8.3"
    assert not (lib / "librocksdb.a").exists()  # the static target was never built
    assert (dest / "include/rocksdb/c.h").is_file()


def test_a_tree_asking_for_a_zlib_module_it_lacks_is_built_without_zlib(tmp_path: Path) -> None:
    """RocksDB 6.0 and 6.1: find_package(zlib) without their Findzlib.cmake."""
    broken = CMAKELISTS + "find_package(zlib REQUIRED)\n"
    tree = make_tree(tmp_path / "t", major=6, cmakelists=broken)
    assert rocksdb_src.tree_options(tree) == ["-DWITH_ZLIB=OFF"]
    cmake = build_steps(tree, tmp_path / "b", tmp_path / "d", REL, "/cc", "/cxx", None, 2)[0][1]
    assert cmake.index("-DWITH_ZLIB=OFF") > cmake.index("-DWITH_ZLIB=ON")  # it wins
    (tree / "cmake/modules").mkdir(parents=True)
    (tree / "cmake/modules/Findzlib.cmake").write_text("# RocksDB 5.8-5.18 had one\n")
    assert rocksdb_src.tree_options(tree) == []
    assert rocksdb_src.tree_options(make_tree(tmp_path / "new")) == []


def test_portable_follows_the_flavors_flags(tmp_path: Path) -> None:
    """A flavor naming an -march is native (PORTABLE=0: RocksDB's own -march=native
    comes first, the flavor's flags after it win); one without is portable."""
    native = cmake_args(tmp_path / "n", {**REL, "cflags": "-O2 -march=native -mno-avx512f"})
    assert [a for a in native if a.startswith("-DPORTABLE=")] == ["-DPORTABLE=0"]
    portable = cmake_args(tmp_path / "p", REL)
    assert [a for a in portable if a.startswith("-DPORTABLE=")] == ["-DPORTABLE=1"]


# The instruction sets valgrind 3.19 cannot run (a replay using one dies of SIGILL),
# each tried under valgrind on an AVX-512 host: every AVX-512 subset, AVX-VNNI, VAES,
# VPCLMULQDQ (256-bit), GFNI, SHA.
NOT_UNDER_VALGRIND = re.compile(r"^-m(avx512\w*|avxvnni|vaes|vpclmulqdq|gfni|sha)$")


def test_the_default_flavor_is_the_developers_build_minus_what_valgrind_cannot_run() -> None:
    rel = recipe("rocksdb", "rel")
    flags = rel["cflags"].split()
    assert {"-O2", "-DNDEBUG", "-march=native"} <= set(flags)  # DEBUG_LEVEL=0, native
    assert rocksdb_src.portable_option(rel["cflags"]) == "-DPORTABLE=0"
    off = {f.removeprefix("-mno-") for f in flags if f.startswith("-mno-")}
    assert {"avx512f", "avx512bw", "avx512vl", "avx512fp16", "avxvnni", "gfni", "sha"} <= off
    portable = recipe("rocksdb", "rel_portable")
    assert rocksdb_src.portable_option(portable["cflags"]) == "-DPORTABLE=1"
    assert "-DNDEBUG" in portable["cflags"].split()
    lto = recipe("rocksdb", "rel_clang_lto")
    assert (lto.get("cc"), lto.get("cxx")) == ("clang", "clang++")
    assert "-flto" in lto["cflags"].split() and lto["ldflags"] == "-flto"
    assert set(flags) <= set(lto["cflags"].split())  # rel's flags, with clang and LTO
    shipped = tomllib.loads(
        resources.files("dbregress.provision").joinpath("flavors.toml").read_text()
    )["rocksdb"]
    for name, r in shipped.items():  # every native flavor leaves the same sets out
        if "-march=native" in r["cflags"]:
            assert {f for f in r["cflags"].split() if f.startswith("-mno-")} == {
                f for f in flags if f.startswith("-mno-")
            }, name


@pytest.mark.skipif(shutil.which("gcc") is None, reason="no gcc")
def test_the_native_flags_enable_nothing_valgrind_cannot_run() -> None:
    """What gcc makes of rel's flags on this host: no instruction set valgrind lacks is
    left on (without the -mno- flags, an AVX-512 host has several)."""
    flags = [f for f in recipe("rocksdb", "rel")["cflags"].split() if f.startswith("-m")]
    done = subprocess.run(
        ["gcc", *flags, "-Q", "--help=target"], capture_output=True, text=True, check=True
    )
    enabled = [
        line.split()[0] for line in done.stdout.splitlines() if line.split()[1:2] == ["[enabled]"]
    ]
    assert "-mavx2" in enabled or "-msse4.2" not in enabled  # native: the host's sets
    assert [f for f in enabled if NOT_UNDER_VALGRIND.match(f)] == []


def test_the_c_api_the_loadgen_needs_is_the_loadgens_list() -> None:
    """REQUIRED_C_API is loadgen/src/driver/rocksdb_api.rs's `required` list and the
    bloom filter's constructor, the functions without which the loadgen stops."""
    rust = (ROOT / "loadgen/src/driver/rocksdb_api.rs").read_text()
    table = rust[rust.index("api! {") :]
    required = table[table.index("required {") : table.index("optional {")]
    names = re.findall(r"^\s+(\w+): fn", required, re.MULTILINE)
    assert len(names) > 50
    assert set(rocksdb_src.REQUIRED_C_API) == {
        *(f"rocksdb_{n}" for n in names),
        "rocksdb_filterpolicy_create_bloom_full",
    }


def test_a_tree_older_than_the_loadgens_c_api_is_refused_before_building(tmp_path: Path) -> None:
    """RocksDB 5.8 to 5.15 have cmake enough but no max_background_jobs in their C API."""
    tree = make_tree(tmp_path / "t", major=5)
    header = tree / "include/rocksdb/c.h"
    header.write_text(header.read_text().replace("rocksdb_options_set_max_background_jobs", "x"))
    with pytest.raises(BuildNotFound) as e:
        build_steps(tree, tmp_path / "b", tmp_path / "d", REL, "/cc", "/cxx", None, 2)
    message = str(e.value)
    assert "\n" not in message
    assert "RocksDB 5.8.3's C API lacks rocksdb_options_set_max_background_jobs" in message
    assert "RocksDB 5.16 and newer" in message


def test_an_in_source_cmake_cache_is_neither_read_nor_rewritten(tmp_path: Path) -> None:
    """The user configured the tree in place once: `cmake TREE` would take TREE for an
    existing build directory and rewrite its CMakeCache.txt; -S and -B do not."""
    tree = make_tree(tmp_path / "t")
    cache = "# the user's own in-source configuration\nCMAKE_HOME_DIRECTORY:INTERNAL=/else\n"
    (tree / "CMakeCache.txt").write_text(cache)
    build = tmp_path / "build"
    build.mkdir()
    cc, cxx = shutil.which("gcc") or "gcc", shutil.which("g++") or "g++"
    _, argv, cwd = build_steps(tree, build, tmp_path / "d", REL, cc, cxx, None, 2)[0]
    done = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert (tree / "CMakeCache.txt").read_text() == cache
    assert (build / "CMakeCache.txt").is_file()
    assert not (tree / "CMakeFiles").exists()


def test_a_rocksdb_tree_whose_compression_headers_are_missing_is_refused_before_cmake(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A user's RocksDB checkout on a machine without Snappy's headers stopped a minute
    into cmake ("Could NOT find Snappy"): the RocksDB family's packages are checked
    before configuring, in one line naming the header, its package and the make target."""
    from types import SimpleNamespace

    from dbregress.provision.source import build, needs

    absent = ("dbregress-test/snappy.h", "libsnappy-dev")  # no compiler finds it
    monkeypatch.setattr(needs, "ROCKSDB", (*needs.ROCKSDB, absent))
    plan = SimpleNamespace(
        family="rocksdb", spec="rocksdb@src:/t", cc=shutil.which("gcc"), cxx=shutil.which("g++")
    )
    with pytest.raises(BuildNotFound) as e:
        build.check_packages(plan, make_tree(tmp_path / "t"))  # type: ignore[arg-type]
    message = str(e.value)
    assert "\n" not in message
    assert "needs dbregress-test/snappy.h, which" in message
    assert "apt-get install libsnappy-dev" in message and "`make rocksdb-source`" in message
    # with the header where the compiler looks (CPATH), the check passes
    include = tmp_path / "include/dbregress-test"
    include.mkdir(parents=True)
    (include / "snappy.h").write_text("")
    monkeypatch.setenv("CPATH", str(tmp_path / "include"))
    monkeypatch.setattr(needs, "ROCKSDB", (absent,))
    build.check_packages(plan, make_tree(tmp_path / "t2"))  # type: ignore[arg-type]
