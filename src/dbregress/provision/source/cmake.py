"""The cmake command line of a MySQL-family source tree, per kind of tree.

MariaDB and MySQL parted ways long ago, and so did their cmake options: MariaDB's
WITHOUT_DYNAMIC_PLUGINS and PLUGIN_<NAME> switches do nothing on a MySQL tree, and
MySQL's WITH_ROUTER, WITH_MYSQLX or MYSQL_MAINTAINER_MODE=OFF nothing on MariaDB's. So
the tree is first told apart (tree_kind: MariaDB, MySQL, Percona Server or FB MySQL, by
files only one of them has) and gets its own project's options (FIXED_OPTIONS), each
named after the page or file of the project that documents it.

A flavor's recipe (flavors.toml, or a lab's) adds its build type and flags, and two
switches the tree answers its own way: `lto` (MySQL's WITH_LTO option where the tree's
cmake has it, else -flto=auto in the flags) and `myrocks` (the RocksDB storage engine:
MariaDB's rocksdb plugin, Percona Server's WITH_ROCKSDB, FB MySQL's MyRocks; MySQL has
none). MySQL 5.7 and 8.0 trees also need Boost, of exactly the version their
cmake/boost.cmake names; boost_needed() says which, and the command line points
WITH_BOOST at a copy: the tree's own, else $WITH_BOOST, else one unpacked under the
dbregress cache's boost/ directory.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from dbregress.model.errors import BuildNotFound
from dbregress.provision.cache import cache_root

Kind = Literal["mariadb", "mysql", "percona", "fbmysql"]
KIND_NAMES: dict[Kind, str] = {
    "mariadb": "MariaDB",
    "mysql": "MySQL",
    "percona": "Percona Server",
    "fbmysql": "FB MySQL",
}

# MariaDB's options. Its pages "MariaDB Source Configuration Options" (all of them:
# `cmake . -LH`, each with its help text) and "Specifying Which Plugins to Build".
_MARIADB = (
    # cmake would run `git submodule update --init` in a checkout built as it is on
    # disk, moving the user's submodules after the key was taken (cmake/submodules.cmake:
    # OPTION UPDATE_SUBMODULES; older trees read git config cmake.update-submodules,
    # which build.py sets to no in the build's environment)
    "-DUPDATE_SUBMODULES=OFF",
    # no unit tests (CMakeLists.txt: OPTION WITH_UNIT_TESTS)
    "-DWITH_UNIT_TESTS=OFF",
    # no libmysqld embedded server (CMakeLists.txt: OPTION WITH_EMBEDDED_SERVER)
    "-DWITH_EMBEDDED_SERVER=OFF",
    # no Galera replication API (cmake/wsrep.cmake: OPTION WITH_WSREP)
    "-DWITH_WSREP=OFF",
    # no backup tool (extra/mariabackup/CMakeLists.txt: OPTION WITH_MARIABACKUP)
    "-DWITH_MARIABACKUP=OFF",
    # the system's OpenSSL, zlib, PCRE2 and fmt instead of bundled copies or
    # downloads (cmake/ssl.cmake, zlib.cmake, pcre.cmake, libfmt.cmake)
    "-DWITH_SSL=system",
    "-DWITH_ZLIB=system",
    "-DWITH_PCRE=system",
    "-DWITH_LIBFMT=system",
    # no NUMA policy: the same binary on every host (CMakeLists.txt: WITH_NUMA)
    "-DWITH_NUMA=OFF",
    # warnings stay warnings, also in Debug builds, whose default (AUTO) makes them
    # errors (CMakeLists.txt: MYSQL_MAINTAINER_MODE "NO WARN ERR AUTO"; OFF is WARN)
    "-DMYSQL_MAINTAINER_MODE=OFF",
    # engines no benchmark here runs, each a long build ("Specifying Which Plugins to
    # Build": PLUGIN_<name>=NO)
    "-DPLUGIN_MROONGA=NO",
    "-DPLUGIN_SPIDER=NO",
    "-DPLUGIN_CONNECT=NO",
    "-DPLUGIN_S3=NO",
    "-DPLUGIN_COLUMNSTORE=NO",
    "-DPLUGIN_OQGRAPH=NO",
)

# MySQL's options, which Percona Server and FB MySQL (forks of its tree) share. MySQL's
# page "MySQL Source-Configuration Options" unless said otherwise.
_MYSQL = (
    # compiler warnings are not errors (MYSQL_MAINTAINER_MODE; ON by default in Debug
    # builds with GCC, and newer compilers warn where older ones did not)
    "-DMYSQL_MAINTAINER_MODE=OFF",
    # no unit tests (WITH_UNIT_TESTS, ON by default)
    "-DWITH_UNIT_TESTS=OFF",
    # no MySQL Router, a separate product in the same tree (WITH_ROUTER, ON by default)
    "-DWITH_ROUTER=OFF",
    # no X Plugin, the X Protocol server (WITH_MYSQLX, ON by default)
    "-DWITH_MYSQLX=OFF",
    # no Group Replication plugin: cmake/plugin.cmake skips a plugin when
    # WITHOUT_<plugin> is set (a MODULE_ONLY plugin of 5.7 and 8.0 whose XCom needs
    # rpcgen and libtirpc; MySQL 8.0.11 release notes)
    "-DWITHOUT_GROUP_REPLICATION=ON",
    # no NDB Cluster engine (WITH_NDB, 8.0.31 on; WITH_NDBCLUSTER before; OFF by
    # default in server trees, said so that a cluster tree does not build it either)
    "-DWITH_NDB=OFF",
    "-DWITH_NDBCLUSTER=OFF",
    # no libmysqld embedded server (WITH_EMBEDDED_SERVER: 5.6 and 5.7, gone in 8.0)
    "-DWITH_EMBEDDED_SERVER=OFF",
    # the system's OpenSSL and zlib (WITH_SSL, WITH_ZLIB)
    "-DWITH_SSL=system",
    "-DWITH_ZLIB=system",
    # no NUMA policy: the same binary on every host (WITH_NUMA)
    "-DWITH_NUMA=OFF",
    # never download Boost: this machine reaches no project site (DOWNLOAD_BOOST)
    "-DDOWNLOAD_BOOST=OFF",
)

# The options every flavor of a kind of tree gets (part of the build's cache key).
FIXED_OPTIONS: dict[Kind, tuple[str, ...]] = {
    "mariadb": _MARIADB,
    "mysql": _MYSQL,
    # no TokuDB (storage/tokudb/CMakeLists.txt of 5.6 to 8.0.27: built unless
    # WITH_TOKUDB is off, as its cmake message says)
    "percona": (*_MYSQL, "-DWITH_TOKUDB=OFF"),
    "fbmysql": _MYSQL,
}

# MariaDB's plugins built as modules by default (cmake/plugin.cmake: no DEFAULT,
# MANDATORY or STATIC_ONLY; the plugin/ and storage/ directories of 10.11). Without
# myrocks WITHOUT_DYNAMIC_PLUGINS drops them all; with it that switch must be off (the
# rocksdb plugin is MODULE_ONLY), so each is dropped by name instead. A plugin of a
# newer tree missing from this list is built, which costs build time only.
MARIADB_MODULE_PLUGINS = (
    "ARCHIVE", "AUDIT_NULL", "AUTH_0X0100", "AUTH_ED25519", "AUTH_GSSAPI", "AUTH_PAM",
    "AUTH_PAM_V1", "AUTH_TEST_PLUGIN", "AWS_KEY_MANAGEMENT", "BLACKHOLE",
    "CRACKLIB_PASSWORD_CHECK", "DAEMON_EXAMPLE", "DEBUG_KEY_MANAGEMENT", "DIALOG_EXAMPLES",
    "DISKS", "EXAMPLE", "EXAMPLE_KEY_MANAGEMENT", "FEDERATED", "FEDERATEDX",
    "FILE_KEY_MANAGEMENT", "FTEXAMPLE", "FUNC_TEST", "HANDLERSOCKET",
    "HASHICORP_KEY_MANAGEMENT", "LOCALES", "METADATA_LOCK_INFO", "PASSWORD_REUSE_CHECK",
    "PROVIDER_BZIP2", "PROVIDER_LZ4", "PROVIDER_LZMA", "PROVIDER_LZO", "PROVIDER_SNAPPY",
    "QA_AUTH_CLIENT", "QA_AUTH_INTERFACE", "QA_AUTH_SERVER", "QUERY_CACHE_INFO",
    "QUERY_RESPONSE_TIME", "SERVER_AUDIT", "SIMPLE_PASSWORD_CHECK", "SPHINX", "SQL_ERRLOG",
    "TEST_SQL_DISCOVERY", "TEST_SQL_SERVICE", "TEST_VERSIONING", "TYPE_MYSQL_JSON",
    "TYPE_MYSQL_TIMESTAMP", "TYPE_TEST", "WSREP_INFO",
)  # fmt: skip

# Without myrocks: no RocksDB engine, and (MariaDB) no plugin modules at all.
NO_MYROCKS: dict[Kind, tuple[str, ...]] = {
    # "Specifying Which Plugins to Build"; plugin.cmake: WITHOUT_DYNAMIC_PLUGINS
    "mariadb": ("-DWITHOUT_DYNAMIC_PLUGINS=ON", "-DPLUGIN_ROCKSDB=NO"),
    "mysql": (),
    # storage/rocksdb/CMakeLists.txt: MyRocks is built unless WITH_ROCKSDB is off
    "percona": ("-DWITH_ROCKSDB=OFF",),
    # storage/rocksdb/CMakeLists.txt (fb-mysql-8.0): returns at once on this
    "fbmysql": ("-DWITHOUT_ROCKSDB_STORAGE_ENGINE=ON",),
}
# With myrocks: the engine, built so that a missing prerequisite stops cmake.
WITH_MYROCKS: dict[Kind, tuple[str, ...]] = {
    # PLUGIN_ROCKSDB=YES: "same as AUTO, but if plugin prerequisites are missing, it
    # will abort cmake with an error" (DYNAMIC would skip it silently); as a module,
    # the plugin being MODULE_ONLY, hence dynamic plugins on and the others off
    "mariadb": (
        "-DWITHOUT_DYNAMIC_PLUGINS=OFF",
        "-DPLUGIN_ROCKSDB=YES",
        *(f"-DPLUGIN_{name}=NO" for name in MARIADB_MODULE_PLUGINS),
    ),
    # WITH_ROCKSDB=FORCE: with ON, a missing prerequisite is a cmake WARNING and the
    # engine is left out (storage/rocksdb/CMakeLists.txt); ROCKSDB_DISABLE_MARCH_NATIVE
    # keeps the engine's own -march=native out, so the flavor's flags decide
    "percona": ("-DWITH_ROCKSDB=FORCE", "-DROCKSDB_DISABLE_MARCH_NATIVE=ON"),
    "fbmysql": ("-DWITHOUT_ROCKSDB_STORAGE_ENGINE=OFF",),
}
# Where each kind keeps RocksDB's own sources (a git submodule in every one of them).
ROCKSDB_SOURCES: dict[Kind, str] = {
    "mariadb": "storage/rocksdb/rocksdb",
    "percona": "storage/rocksdb/rocksdb",
    "fbmysql": "rocksdb",
}

_VERSION_FILES = ("MYSQL_VERSION", "VERSION")
_PERCONA_EXTRA = re.compile(r"^MYSQL_VERSION_EXTRA\s*=\s*-\d+\s*$", re.MULTILINE)
_GITMODULE_ROCKSDB = re.compile(r"^\s*path\s*=\s*rocksdb\s*$", re.MULTILINE)
_TOP_ROCKSDB = re.compile(r"\$\{CMAKE_SOURCE_DIR\}/rocksdb\b")
_WITH_LTO = re.compile(r"^\s*OPTION\s*\(\s*WITH_LTO\b", re.IGNORECASE | re.MULTILINE)
_BOOST_NAME = re.compile(
    r'^\s*SET\s*\(\s*BOOST_PACKAGE_NAME\s+"?(boost_(\d+)_(\d+)_(\d+))"?\s*\)',
    re.IGNORECASE | re.MULTILINE,
)
_BOOST_ALWAYS_BUNDLED = re.compile(
    r"^\s*SET\s*\(\s*BOOST_SOURCE_DIR\s+\"?\$\{CMAKE_SOURCE_DIR\}/extra/boost",
    re.IGNORECASE | re.MULTILINE,
)


def _read(path: Path) -> str:
    return path.read_text(errors="replace") if path.is_file() else ""


def _percona_marker(tree: Path) -> str | None:
    """Which of Percona Server's own files the tree has, if any."""
    if (tree / "build-ps").is_dir():
        return "build-ps/ (Percona's build scripts)"
    if (tree / "storage/tokudb").is_dir():
        return "storage/tokudb (TokuDB, Percona's engine in 5.6 to 8.0.27)"
    for parent in ("plugin", "components"):
        own = sorted((tree / parent).glob("percona*"))
        if own:
            return f"{parent}/{own[0].name} (a Percona plugin)"
    for name in _VERSION_FILES:
        if _PERCONA_EXTRA.search(_read(tree / name)):
            return f"{name}'s MYSQL_VERSION_EXTRA=-N (Percona's release number)"
    return None


def _fbmysql_marker(tree: Path) -> str | None:
    """Which of FB MySQL's own files the tree has: RocksDB as a submodule at the top
    (Percona and MariaDB keep theirs under storage/rocksdb/), named by .gitmodules or
    by MyRocks' cmake."""
    if _GITMODULE_ROCKSDB.search(_read(tree / ".gitmodules")):
        return ".gitmodules' rocksdb submodule at the top of the tree"
    if _TOP_ROCKSDB.search(_read(tree / "storage/rocksdb/CMakeLists.txt")):
        return "storage/rocksdb/CMakeLists.txt using ${CMAKE_SOURCE_DIR}/rocksdb"
    return None


def kind_evidence(tree: Path) -> tuple[Kind, str]:
    """The kind of MySQL-family tree at `tree` and the file that says so. Markers, in
    this order: MariaDB has storage/maria (Aria, in every MariaDB since 5.1) or a
    VERSION with SERVER_MATURITY; Percona Server has build-ps/, storage/tokudb,
    a plugin/ or components/ directory named percona*, or MYSQL_VERSION_EXTRA=-N; FB
    MySQL has RocksDB as a submodule at the top (.gitmodules, or MyRocks' cmake using
    ${CMAKE_SOURCE_DIR}/rocksdb). A tree with none of these is MySQL."""
    if (tree / "storage/maria").is_dir():
        return "mariadb", "storage/maria (Aria, MariaDB's own engine)"
    if re.search(r"^SERVER_MATURITY\s*=", _read(tree / "VERSION"), re.MULTILINE):
        return "mariadb", "VERSION's SERVER_MATURITY (MariaDB's)"
    percona = _percona_marker(tree)
    if percona:
        return "percona", percona
    fb = _fbmysql_marker(tree)
    if fb:
        return "fbmysql", fb
    return "mysql", "none of MariaDB's, Percona Server's or FB MySQL's marker files"


def tree_kind(tree: Path) -> Kind:
    """MariaDB, MySQL, Percona Server or FB MySQL (kind_evidence says how)."""
    return kind_evidence(tree)[0]


def _boost_package(tree: Path) -> tuple[str | None, bool]:
    """(the Boost package cmake/boost.cmake names, like boost_1_77_0, or None;
    whether that cmake always uses the copy in extra/boost, ignoring WITH_BOOST)."""
    text = _read(tree / "cmake/boost.cmake")
    m = _BOOST_NAME.search(text)
    return (m.group(1) if m else None), bool(_BOOST_ALWAYS_BUNDLED.search(text))


def _bundled_boost(tree: Path, name: str) -> Path | None:
    """The tree's own copy of Boost `name`: boost/<name> of a mysql-boost tarball, or
    extra/boost/<name>."""
    for place in (tree / "boost" / name, tree / "extra" / "boost" / name):
        if place.is_dir():
            return place
    return None


def boost_needed(tree: Path) -> str | None:
    """The Boost package (e.g. "boost_1_77_0") a tree needs from outside itself: its
    cmake/boost.cmake names one and takes it from WITH_BOOST, and the tree has no copy
    of it. None when the tree bundles it (extra/boost, or boost/ of a mysql-boost
    tarball) or uses no Boost (MariaDB, MySQL 5.6)."""
    name, always_bundled = _boost_package(tree)
    if name is None or always_bundled or _bundled_boost(tree, name) is not None:
        return None
    return name


def _boost_option(tree: Path, extra: list[str], env: Mapping[str, str]) -> list[str]:
    """-DWITH_BOOST=<copy> for a tree whose cmake takes Boost from WITH_BOOST: its own
    copy, else $WITH_BOOST, else <cache>/boost/<name>; nothing when the flavor's cmake
    options give WITH_BOOST themselves or the tree needs none."""
    if any(o.startswith("-DWITH_BOOST=") for o in extra):
        return []
    name, always_bundled = _boost_package(tree)
    if name is None or always_bundled:
        return []
    own = _bundled_boost(tree, name)
    if own is not None:
        return [f"-DWITH_BOOST={own}"]
    given = env.get("WITH_BOOST", "")
    if given:
        if not Path(given).exists():
            raise BuildNotFound(
                f"WITH_BOOST={given}: no such file or directory (give the unpacked "
                f"{name} directory, or the directory holding it)"
            )
        return [f"-DWITH_BOOST={given}"]
    cached = cache_root() / "boost" / name
    if cached.is_dir():
        return [f"-DWITH_BOOST={cached}"]
    dotted = ".".join(name.split("_")[1:])
    raise BuildNotFound(
        f"{tree}: this tree needs Boost {dotted} ({name}, cmake/boost.cmake) and carries "
        f"no copy of it; unpack {name} (the mysql-boost source tarball of the same "
        f"release has it under boost/) and give it with WITH_BOOST=/path/to/{name} in "
        f'the environment, a lab flavor\'s cmake = ["-DWITH_BOOST=/path/to/{name}"], '
        f"or by putting it at {cached}"
    )


def _lto(tree: Path, how: Mapping[str, Any]) -> tuple[str, str, list[str]]:
    """(C and C++ flags, linker flags, options) with the recipe's `lto` applied: the
    tree's WITH_LTO option where its top CMakeLists.txt declares one (MySQL 8 and its
    forks: it adds -flto to the flags and the linkers, and picks gcc-ar), else
    -flto=auto in the compile and link flags (MariaDB, MySQL 5.x)."""
    cflags, ldflags = str(how.get("cflags", "")), str(how.get("ldflags", ""))
    if not how.get("lto"):
        return cflags, ldflags, []
    if _WITH_LTO.search(_read(tree / "CMakeLists.txt")):
        return cflags, ldflags, ["-DWITH_LTO=ON"]
    if not any(f.startswith("-flto") for f in cflags.split()):
        cflags = f"{cflags} -flto=auto".strip()
    if not any(f.startswith("-flto") for f in ldflags.split()):
        ldflags = f"{ldflags} -flto=auto".strip()
    return cflags, ldflags, []


def _myrocks(kind: Kind, tree: Path, how: Mapping[str, Any]) -> list[str]:
    """The kind's options for the recipe's `myrocks`; BuildNotFound for MySQL, which has
    no RocksDB engine, and for a tree without RocksDB's sources (a submodule that a
    plain checkout or `git archive` leaves out)."""
    if not how.get("myrocks"):
        return list(NO_MYROCKS[kind])
    if kind == "mysql":
        raise BuildNotFound(
            f"{tree}: MySQL has no MyRocks; use FB MySQL, Percona Server or MariaDB "
            "(or a flavor without myrocks)"
        )
    sources = tree / ROCKSDB_SOURCES[kind]
    if not (sources / "include/rocksdb/db.h").is_file():
        raise BuildNotFound(
            f"{tree}: no RocksDB sources in {ROCKSDB_SOURCES[kind]}/ for MyRocks; it is a "
            "git submodule: run `git submodule update --init --recursive` in the checkout "
            "(a #REF build exports it at the commit's recorded commit once it is there), "
            "or use a release source tarball"
        )
    return list(WITH_MYROCKS[kind])


def cmake_command(
    tree: Path,
    prefix: Path,
    how: Mapping[str, Any],
    cc: str,
    cxx: str,
    ccache: str | None,
    env: Mapping[str, str],
) -> list[str]:
    """cmake for a MySQL-family tree, run in the build directory: the tree as its source
    and the current directory as its build directory (-S, -B: a CMakeCache.txt that an
    in-source build left in the tree is neither read nor rewritten), the flavor's build
    type with its flags as that build type's C and C++ flags (replacing cmake's -O3 or
    -O2 -g), its linker flags for executables, shared libraries and plugins, ccache as
    the compiler launcher, the kind's FIXED_OPTIONS, its lto and myrocks switches,
    WITH_BOOST where the tree needs it (`env` gives $WITH_BOOST), and the flavor's own
    cmake options last, so that they can override any of these.
    """
    kind = tree_kind(tree)
    build_type = str(how.get("build_type", "Release"))
    upper = build_type.upper()
    cflags, ldflags, lto = _lto(tree, how)
    extra = [str(o) for o in how.get("cmake", [])]
    args = [
        "cmake",
        "-S",
        str(tree),
        "-B",
        ".",
        f"-DCMAKE_BUILD_TYPE={build_type}",
        f"-DCMAKE_INSTALL_PREFIX={prefix}",
        f"-DCMAKE_C_COMPILER={cc}",
        f"-DCMAKE_CXX_COMPILER={cxx}",
        f"-DCMAKE_C_FLAGS_{upper}={cflags}",
        f"-DCMAKE_CXX_FLAGS_{upper}={cflags}",
        *FIXED_OPTIONS[kind],
        *_myrocks(kind, tree, how),
        *lto,
    ]
    if ldflags:
        args += [f"-DCMAKE_{k}_LINKER_FLAGS={ldflags}" for k in ("EXE", "SHARED", "MODULE")]
    if ccache:
        args += [f"-DCMAKE_{lang}_COMPILER_LAUNCHER={ccache}" for lang in ("C", "CXX")]
    if kind != "mariadb":
        args += _boost_option(tree, extra, env)
    return [*args, *extra]
