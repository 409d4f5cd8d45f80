"""The MySQL family's cmake recipe (provision/source/cmake.py): which kind of tree a
directory is, and the command line each kind gets. The trees are skeletons holding only
the files the recipe reads (the marker files, cmake/boost.cmake in its real line format,
the top CMakeLists.txt's WITH_LTO option); Debian's MariaDB tree, when this machine has
it, is told apart for real."""

from __future__ import annotations

import tomllib
from importlib import resources
from pathlib import Path

import pytest

from dbregress.model.errors import BuildNotFound
from dbregress.provision.source import cmake as cmake_recipe
from dbregress.provision.source.cmake import (
    FIXED_OPTIONS,
    boost_needed,
    cmake_command,
    kind_evidence,
    tree_kind,
)
from dbregress.provision.source.recipes import normalized
from dbregress.provision.source.recipes import recipe as shipped_recipe

DEBIAN_MARIADB = Path("/var/cache/dbregress/debian-src/mariadb-10.11.18")

# cmake/boost.cmake as MySQL 8.0 writes it (Boost from WITH_BOOST) and as MySQL 8.4
# does (always the copy in extra/boost)
BOOST_80 = """# Invoke with -DWITH_BOOST=<directory> or set WITH_BOOST in environment.
SET(BOOST_PACKAGE_NAME "boost_1_77_0")
SET(BOOST_TARBALL "${BOOST_PACKAGE_NAME}.tar.bz2")
IF(DEFINED ENV{WITH_BOOST} AND NOT DEFINED WITH_BOOST)
  SET(WITH_BOOST "$ENV{WITH_BOOST}")
ENDIF()
"""
BOOST_84 = """SET(BOOST_PACKAGE_NAME "boost_1_84_0")

# Always use the bundled version.
SET(BOOST_SOURCE_DIR ${CMAKE_SOURCE_DIR}/extra/boost)
SET(BOOST_INCLUDE_DIR ${BOOST_SOURCE_DIR}/${BOOST_PACKAGE_NAME})
"""
MYSQL_CMAKELISTS = """OPTION(WITH_LTO
  "Enable the link-time optimizer. Currently works for gcc7/gcc8/gcc9/macos only."
  ${WITH_LTO_DEFAULT}
  )
"""
RELEASE = {"cflags": "-O2 -g1 -DNDEBUG", "ldflags": "", "cmake": [], "build_type": "Release"}


def write(path: Path, text: str = "") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def mysql_tree(root: Path, boost: str = BOOST_80) -> Path:
    write(root / "MYSQL_VERSION", "MYSQL_VERSION_MAJOR=8\nMYSQL_VERSION_MINOR=0\n")
    write(root / "CMakeLists.txt", MYSQL_CMAKELISTS)
    write(root / "sql/mysqld.cc")
    write(root / "cmake/boost.cmake", boost)
    return root


def mariadb_tree(root: Path) -> Path:
    write(root / "VERSION", "MYSQL_VERSION_MAJOR=10\nMYSQL_VERSION_MINOR=11\n")
    write(root / "CMakeLists.txt", 'SET(MYSQL_MAINTAINER_MODE "AUTO" CACHE STRING "")\n')
    write(root / "sql/mysqld.cc")
    (root / "storage/maria").mkdir(parents=True)
    return root


def percona_tree(root: Path) -> Path:
    mysql_tree(root)
    write(root / "build-ps/build-binary.sh")
    return root


def fbmysql_tree(root: Path) -> Path:
    mysql_tree(root)
    write(root / ".gitmodules", '[submodule "rocksdb"]\n\tpath = rocksdb\n')
    return root


def rocksdb_sources(root: Path) -> None:
    write(root / "include/rocksdb/db.h")


@pytest.fixture(autouse=True)
def empty_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A cache root of the test's own: no Boost is found in the machine's cache."""
    cache = tmp_path / "cache"
    monkeypatch.setenv("DBREGRESS_CACHE", str(cache))
    return cache


def command(
    tree: Path, ccache: str | None = None, env: dict[str, str] | None = None, **how: object
) -> list[str]:
    return cmake_command(
        tree,
        Path("/opt/b"),
        {**RELEASE, **how},
        "/usr/bin/gcc",
        "/usr/bin/g++",
        ccache,
        env or {},
    )


def named(args: list[str], option: str) -> list[str]:
    """The arguments that set `option` (-D<option>=...)."""
    return [a for a in args if a.startswith(f"-D{option}=")]


def test_each_kind_is_told_apart_by_its_own_files(tmp_path: Path) -> None:
    assert tree_kind(mysql_tree(tmp_path / "my")) == "mysql"
    assert tree_kind(mariadb_tree(tmp_path / "ma")) == "mariadb"
    assert tree_kind(percona_tree(tmp_path / "ps")) == "percona"
    assert tree_kind(fbmysql_tree(tmp_path / "fb")) == "fbmysql"
    kind, why = kind_evidence(percona_tree(tmp_path / "ps2"))
    assert (kind, why.split()[0]) == ("percona", "build-ps/")


def test_the_other_markers(tmp_path: Path) -> None:
    """Percona by its TokuDB, its plugins or its release number; FB MySQL by MyRocks'
    cmake; MariaDB first, though 10.0 to 10.5 also carry storage/tokudb."""
    tokudb = mysql_tree(tmp_path / "a")
    (tokudb / "storage/tokudb").mkdir(parents=True)
    assert tree_kind(tokudb) == "percona"
    pam = mysql_tree(tmp_path / "b")
    (pam / "plugin/percona-pam-for-mysql").mkdir(parents=True)
    assert kind_evidence(pam) == ("percona", "plugin/percona-pam-for-mysql (a Percona plugin)")
    numbered = mysql_tree(tmp_path / "c")
    write(numbered / "VERSION", "MYSQL_VERSION_MAJOR=5\nMYSQL_VERSION_EXTRA=-42\n")
    assert tree_kind(numbered) == "percona"
    rc = mysql_tree(tmp_path / "d")
    write(rc / "VERSION", "MYSQL_VERSION_MAJOR=8\nMYSQL_VERSION_EXTRA=-rc\n")
    assert tree_kind(rc) == "mysql"
    fb = mysql_tree(tmp_path / "e")
    write(fb / "storage/rocksdb/CMakeLists.txt", "SET(ROCKSDB_ROOT ${CMAKE_SOURCE_DIR}/rocksdb)\n")
    assert tree_kind(fb) == "fbmysql"
    ps_rocks = percona_tree(tmp_path / "f")
    write(
        ps_rocks / "storage/rocksdb/CMakeLists.txt", "SET(R ${CMAKE_CURRENT_SOURCE_DIR}/rocksdb)\n"
    )
    assert tree_kind(ps_rocks) == "percona"
    old_mariadb = mariadb_tree(tmp_path / "g")
    (old_mariadb / "storage/tokudb").mkdir(parents=True)
    assert tree_kind(old_mariadb) == "mariadb"


@pytest.mark.skipif(not DEBIAN_MARIADB.is_dir(), reason="no Debian MariaDB tree here")
def test_debians_mariadb_tree_is_mariadb() -> None:
    assert kind_evidence(DEBIAN_MARIADB)[0] == "mariadb"


def test_mysql_gets_mysqls_options_and_none_of_mariadbs(tmp_path: Path) -> None:
    args = command(mysql_tree(tmp_path / "my"), env={"WITH_BOOST": str(tmp_path)})
    assert "-DMYSQL_MAINTAINER_MODE=OFF" in args
    for option in ("WITH_ROUTER", "WITH_MYSQLX", "WITH_UNIT_TESTS", "WITH_NDB"):
        assert named(args, option) == [f"-D{option}=OFF"]
    assert "-DWITHOUT_GROUP_REPLICATION=ON" in args
    assert "-DDOWNLOAD_BOOST=OFF" in args
    mariadb_only = ("WITHOUT_DYNAMIC_PLUGINS", "PLUGIN_", "WITH_PCRE", "WITH_LIBFMT", "WITH_WSREP")
    assert [a for a in args if a.startswith(tuple(f"-D{o}" for o in mariadb_only))] == []
    # -S and -B: a CMakeCache.txt of an in-source build in the tree is not the build's
    tree_args = ["cmake", "-S", str(tmp_path / "my"), "-B", "."]
    assert args[:6] == [*tree_args, "-DCMAKE_BUILD_TYPE=Release"]
    assert "-DCMAKE_C_FLAGS_RELEASE=-O2 -g1 -DNDEBUG" in args
    assert "-DCMAKE_CXX_FLAGS_RELEASE=-O2 -g1 -DNDEBUG" in args
    assert "-DCMAKE_INSTALL_PREFIX=/opt/b" in args


def test_mariadb_gets_todays_list_and_none_of_mysqls(tmp_path: Path) -> None:
    args = command(mariadb_tree(tmp_path / "ma"))
    assert "-DWITHOUT_DYNAMIC_PLUGINS=ON" in args
    assert "-DPLUGIN_ROCKSDB=NO" in args
    assert "-DWITH_PCRE=system" in args
    mysql_only = (
        "WITH_ROUTER",
        "WITH_MYSQLX",
        "DOWNLOAD_BOOST",
        "WITHOUT_GROUP_REPLICATION",
        "WITH_NDB",
        "WITH_BOOST",
        "WITH_LTO",
        "WITH_ROCKSDB",
        "WITH_TOKUDB",
    )
    assert [a for a in args if a.split("=")[0][2:] in mysql_only] == []


def test_percona_and_fb_mysql_get_mysqls_options(tmp_path: Path) -> None:
    env = {"WITH_BOOST": str(tmp_path)}
    ps = command(percona_tree(tmp_path / "ps"), env=env)
    fb = command(fbmysql_tree(tmp_path / "fb"), env=env)
    assert set(FIXED_OPTIONS["mysql"]) <= set(ps) and set(FIXED_OPTIONS["mysql"]) <= set(fb)
    assert "-DWITH_TOKUDB=OFF" in ps and "-DWITH_TOKUDB=OFF" not in fb
    assert "-DWITH_ROCKSDB=OFF" in ps
    assert "-DWITHOUT_ROCKSDB_STORAGE_ENGINE=ON" in fb


def test_lto_is_the_trees_own_option_where_it_has_one(tmp_path: Path) -> None:
    my = command(mysql_tree(tmp_path / "my"), env={"WITH_BOOST": str(tmp_path)}, lto=True)
    assert "-DWITH_LTO=ON" in my
    assert not [a for a in my if "-flto" in a]
    ma = command(mariadb_tree(tmp_path / "ma"), lto=True)
    assert named(ma, "WITH_LTO") == []
    assert "-DCMAKE_C_FLAGS_RELEASE=-O2 -g1 -DNDEBUG -flto=auto" in ma
    assert "-DCMAKE_CXX_FLAGS_RELEASE=-O2 -g1 -DNDEBUG -flto=auto" in ma
    for linker in ("EXE", "SHARED", "MODULE"):
        assert named(ma, f"CMAKE_{linker}_LINKER_FLAGS") == [
            f"-DCMAKE_{linker}_LINKER_FLAGS=-flto=auto"
        ]
    given = command(
        mariadb_tree(tmp_path / "ma2"), lto=True, cflags="-O2 -flto=4", ldflags="-flto=4"
    )
    assert "-DCMAKE_C_FLAGS_RELEASE=-O2 -flto=4" in given
    assert "-DCMAKE_EXE_LINKER_FLAGS=-flto=4" in given
    old = mysql_tree(tmp_path / "57")
    write(old / "CMakeLists.txt", "PROJECT(MySQL)\n")
    assert "-DWITH_LTO=ON" not in command(old, env={"WITH_BOOST": str(tmp_path)}, lto=True)
    plain = command(mysql_tree(tmp_path / "no"), env={"WITH_BOOST": str(tmp_path)})
    assert named(plain, "WITH_LTO") == []


def test_myrocks_per_kind(tmp_path: Path) -> None:
    with pytest.raises(BuildNotFound, match="MySQL has no MyRocks; use FB MySQL, Percona"):
        command(mysql_tree(tmp_path / "my"), myrocks=True)
    ma = mariadb_tree(tmp_path / "ma")
    rocksdb_sources(ma / "storage/rocksdb/rocksdb")
    args = command(ma, myrocks=True)
    assert "-DPLUGIN_ROCKSDB=YES" in args and "-DWITHOUT_DYNAMIC_PLUGINS=OFF" in args
    assert "-DWITHOUT_DYNAMIC_PLUGINS=ON" not in args and "-DPLUGIN_ROCKSDB=NO" not in args
    assert "-DPLUGIN_ARCHIVE=NO" in args and "-DPLUGIN_MROONGA=NO" in args
    ps = percona_tree(tmp_path / "ps")
    rocksdb_sources(ps / "storage/rocksdb/rocksdb")
    ps_args = command(ps, env={"WITH_BOOST": str(tmp_path)}, myrocks=True)
    assert "-DWITH_ROCKSDB=FORCE" in ps_args and "-DWITH_ROCKSDB=OFF" not in ps_args
    fb = fbmysql_tree(tmp_path / "fb")
    rocksdb_sources(fb / "rocksdb")
    fb_args = command(fb, env={"WITH_BOOST": str(tmp_path)}, myrocks=True)
    assert named(fb_args, "WITHOUT_ROCKSDB_STORAGE_ENGINE") == [
        "-DWITHOUT_ROCKSDB_STORAGE_ENGINE=OFF"
    ]


def test_myrocks_without_rocksdbs_sources_names_the_submodule(tmp_path: Path) -> None:
    with pytest.raises(BuildNotFound, match=r"no RocksDB sources in rocksdb/.*submodule"):
        command(fbmysql_tree(tmp_path / "fb"), env={"WITH_BOOST": str(tmp_path)}, myrocks=True)
    with pytest.raises(BuildNotFound, match="storage/rocksdb/rocksdb/"):
        command(mariadb_tree(tmp_path / "ma"), myrocks=True)


def test_boost_the_tree_carries(tmp_path: Path) -> None:
    tarball = mysql_tree(tmp_path / "tarball")  # a mysql-boost tarball: boost/<name>
    (tarball / "boost/boost_1_77_0").mkdir(parents=True)
    assert boost_needed(tarball) is None
    assert named(command(tarball), "WITH_BOOST") == [
        f"-DWITH_BOOST={tarball / 'boost/boost_1_77_0'}"
    ]
    extra = mysql_tree(tmp_path / "extra")
    (extra / "extra/boost/boost_1_77_0").mkdir(parents=True)
    assert named(command(extra), "WITH_BOOST") == [
        f"-DWITH_BOOST={extra / 'extra/boost/boost_1_77_0'}"
    ]
    always = mysql_tree(tmp_path / "84", boost=BOOST_84)
    assert boost_needed(always) is None
    assert named(command(always), "WITH_BOOST") == []
    assert boost_needed(mariadb_tree(tmp_path / "ma")) is None


def test_boost_from_the_environment_or_the_cache(tmp_path: Path, empty_cache: Path) -> None:
    tree = mysql_tree(tmp_path / "my")
    assert boost_needed(tree) == "boost_1_77_0"
    given = tmp_path / "boost_1_77_0"
    given.mkdir()
    assert named(command(tree, env={"WITH_BOOST": str(given)}), "WITH_BOOST") == [
        f"-DWITH_BOOST={given}"
    ]
    with pytest.raises(BuildNotFound, match="WITH_BOOST=/nowhere: no such file"):
        command(tree, env={"WITH_BOOST": "/nowhere"})
    cached = empty_cache / "boost/boost_1_77_0"
    cached.mkdir(parents=True)
    assert named(command(tree), "WITH_BOOST") == [f"-DWITH_BOOST={cached}"]


def test_missing_boost_names_the_version_and_how_to_give_it(tmp_path: Path) -> None:
    tree = mysql_tree(tmp_path / "my")
    with pytest.raises(BuildNotFound) as e:
        command(tree)
    message = str(e.value)
    assert "Boost 1.77.0 (boost_1_77_0" in message
    assert "WITH_BOOST=/path/to/boost_1_77_0" in message
    assert '"-DWITH_BOOST=/path/to/boost_1_77_0"' in message
    # a flavor that names its Boost needs nothing else
    args = command(tree, cmake=["-DWITH_BOOST=/mine"])
    assert named(args, "WITH_BOOST") == ["-DWITH_BOOST=/mine"]


def test_the_flavors_options_come_last(tmp_path: Path) -> None:
    mine = ["-DWITH_UNIT_TESTS=ON", "-DMYSQL_MAINTAINER_MODE=ON"]
    for tree in (mariadb_tree(tmp_path / "ma"), mysql_tree(tmp_path / "my")):
        args = command(
            tree,
            env={"WITH_BOOST": str(tmp_path)},
            ccache="/usr/bin/ccache",
            ldflags="-Wl,-O1",
            cmake=mine,
        )
        assert args[-2:] == mine
        assert args.index("-DWITH_UNIT_TESTS=OFF") < args.index("-DWITH_UNIT_TESTS=ON")


def test_ccache_is_the_launcher_only_when_there_is_one(tmp_path: Path) -> None:
    tree = mariadb_tree(tmp_path / "ma")
    with_ccache = command(tree, ccache="/usr/bin/ccache")
    assert "-DCMAKE_C_COMPILER_LAUNCHER=/usr/bin/ccache" in with_ccache
    assert "-DCMAKE_CXX_COMPILER_LAUNCHER=/usr/bin/ccache" in with_ccache
    assert not [a for a in command(tree) if "LAUNCHER" in a]
    assert not [a for a in command(tree) if "LINKER_FLAGS" in a]


def test_a_debug_build_sets_the_debug_flags(tmp_path: Path) -> None:
    args = command(mariadb_tree(tmp_path / "ma"), build_type="Debug", cflags="-O0 -g")
    assert "-DCMAKE_BUILD_TYPE=Debug" in args
    assert "-DCMAKE_C_FLAGS_DEBUG=-O0 -g" in args
    assert not [a for a in args if a.startswith("-DCMAKE_C_FLAGS_RELEASE")]


def test_every_release_flavor_keeps_line_tables() -> None:
    shipped = tomllib.loads(
        resources.files("dbregress.provision").joinpath("flavors.toml").read_text()
    )
    assert set(shipped) == {"postgres", "mysql", "rocksdb"}
    for family, flavors in shipped.items():
        for name, recipe in flavors.items():
            flags = recipe["cflags"].split()
            assert ("-g" if name == "debug" else "-g1") in flags, (family, name)
    mysql = shipped["mysql"]
    assert mysql["rel_native_lto"]["lto"] is True
    assert "-march=native" in mysql["rel_native_lto"]["cflags"]
    assert "-flto" not in mysql["rel_native_lto"]["cflags"]
    assert mysql["rel_myrocks"] == {"cflags": mysql["rel"]["cflags"], "myrocks": True}
    # RocksDB's native flavors get PORTABLE=0 from their flags (rocksdb_build.py)
    assert "-march=native" in shipped["rocksdb"]["rel"]["cflags"]
    assert "-march" not in shipped["rocksdb"]["rel_portable"]["cflags"]
    assert cmake_recipe.KIND_NAMES["fbmysql"] == "FB MySQL"


@pytest.mark.parametrize("family", ["mysql", "rocksdb", "postgres"])
def test_a_lab_flavor_without_flags_takes_the_release_flavors(family: str) -> None:
    """A lab flavor that names only its compiler builds as the shipped `rel` does: its
    flags (-DNDEBUG for the cmake families, whose flavor flags replace cmake's own), not
    -O2 with every assert live."""
    rel = shipped_recipe(family, "rel")
    mine = normalized(family, {"cc": "clang"})
    assert mine["cflags"] == rel["cflags"]
    assert mine["ldflags"] == rel["ldflags"]
    assert mine.get("cmake") == rel.get("cmake") and mine.get("configure") == rel.get("configure")
    assert mine["cc"] == "clang"
    if family != "postgres":
        assert "-DNDEBUG" in mine["cflags"].split()
        assert mine.get("build_type") == "Release"
        # a Debug build type takes the shipped debug flavor's flags, not rel's
        debug = normalized(family, {"build_type": "Debug"})
        assert debug["cflags"] == shipped_recipe(family, "debug")["cflags"]
    # what the lab gives is kept
    assert normalized(family, {"cflags": "-O3"})["cflags"] == "-O3"


def test_a_lab_flavor_without_flags_configures_cmake_with_ndebug(tmp_path: Path) -> None:
    args = command(mariadb_tree(tmp_path / "ma"), **normalized("mysql", {"cxx": "clang++"}))
    assert "-DCMAKE_CXX_FLAGS_RELEASE=-O2 -g1 -DNDEBUG" in args
