"""Source builds (`ENGINE@src:PATH[#REF][+FLAVOR]`): the spec, the flavors, the cache
key, and one clear line for each kind of bad input. The tree here is a stand-in whose
configure and make only write a `bin/postgres` that prints a version (the pipeline's
mechanics: out of tree, DESTDIR install, cache hit, nothing cached after a failure);
tests/e2e/test_source_build.py builds Debian's PostgreSQL for real."""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
from pathlib import Path

import pytest

from dbregress import bisect
from dbregress.lab.file import load_lab
from dbregress.lab.flavors import places_install
from dbregress.model.errors import BuildNotFound, LabError, ProvisionError
from dbregress.provision import BuildSpec, fetch, source
from dbregress.provision.source import cmake

CONFIGURE = """#!/bin/sh
# a stand-in for PostgreSQL's configure: records its options, writes a Makefile
{fail}
prefix=
for a in "$@"; do case "$a" in --prefix=*) prefix="${{a#--prefix=}}";; esac; done
here=$(dirname "$0")
cat > Makefile <<MK
all:
\tcp $here/VERSION built-version
install:
\tmkdir -p \\$(DESTDIR)$prefix/bin
\tprintf '#!/bin/sh\\\\necho "postgres (PostgreSQL) %s"\\\\n' "\\$\\$(cat built-version)" \\
\t  > \\$(DESTDIR)$prefix/bin/postgres
\tchmod +x \\$(DESTDIR)$prefix/bin/postgres
\techo "CFLAGS=$CFLAGS" > \\$(DESTDIR)$prefix/flags
MK
"""


def make_tree(path: Path, version: str = "15.99", fail: str = "") -> Path:
    (path / "src/backend/main").mkdir(parents=True)
    (path / "src/backend/main/main.c").write_text("int main(void) { return 0; }\n")
    (path / "VERSION").write_text(version + "\n")
    configure = path / "configure"
    configure.write_text(CONFIGURE.format(fail=fail))
    configure.chmod(configure.stat().st_mode | stat.S_IEXEC)
    return path


def git(repo: Path, *args: str) -> str:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@e",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@e",
    }
    done = subprocess.run(
        ["git", "-C", str(repo), *args], env=env, capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


@pytest.fixture(autouse=True)
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("DBREGRESS_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("PATH", "/usr/bin:/bin")  # no ccache: the stand-in has no compiler
    return tmp_path / "cache"


def test_the_spec_names_tree_ref_and_flavor(tmp_path: Path) -> None:
    spec = BuildSpec.parse(f"postgres@src:{tmp_path}/pg#v15.2+rel_o2nofp")
    assert spec.is_source and not spec.is_path
    src = source.SourceSpec.parse(spec)
    assert (src.path, src.ref, src.flavor) == (tmp_path / "pg", "v15.2", "rel_o2nofp")
    # the flavor defaults to rel and is written out; a ref may hold a slash
    assert str(BuildSpec.parse(f"postgres@src:{tmp_path}/pg")) == f"postgres@src:{tmp_path}/pg+rel"
    plain = source.SourceSpec.parse(BuildSpec.parse(f"postgres@src:{tmp_path}/pg#origin/main"))
    assert (plain.ref, plain.flavor) == ("origin/main", "rel")
    assert set(source.flavors("postgres")) >= {"rel", "rel_o2nofp", "rel_native_lto", "debug"}


def test_a_tree_builds_once_and_then_is_a_cache_hit(tmp_path: Path, cache: Path) -> None:
    tree = make_tree(tmp_path / "pg")
    build = fetch(BuildSpec.parse(f"postgres@src:{tree}+rel_o2nofp"))
    assert build.version_string == "postgres (PostgreSQL) 15.99"
    assert build.identity["cache_hit"] == "no" and build.identity["flavor"] == "rel_o2nofp"
    assert (build.basedir / "flags").read_text().strip() == "CFLAGS=-O2 -g1 -fno-omit-frame-pointer"
    assert build.basedir.parent == cache / "postgres"
    again = fetch(BuildSpec.parse(f"postgres@src:{tree}+rel_o2nofp"))
    assert again.basedir == build.basedir and again.identity["cache_hit"] == "yes"
    # another flavor, or a changed tree, is another build
    other = fetch(BuildSpec.parse(f"postgres@src:{tree}+rel"))
    assert other.basedir != build.basedir
    (tree / "VERSION").write_text("15.100\n")
    changed = fetch(BuildSpec.parse(f"postgres@src:{tree}+rel"))
    assert changed.basedir != other.basedir and changed.version_string.endswith("15.100")
    assert not (cache / "postgres" / "src-work").exists() or not any(
        (cache / "postgres" / "src-work").iterdir()
    )


def test_a_commit_builds_from_git_archive_without_touching_the_checkout(tmp_path: Path) -> None:
    tree = make_tree(tmp_path / "pg", "15.1")
    git(tree, "init", "-q")
    git(tree, "add", "-A")
    git(tree, "commit", "-qm", "first")
    first = git(tree, "rev-parse", "HEAD")
    (tree / "VERSION").write_text("15.2\n")
    git(tree, "commit", "-qam", "second")
    (tree / "VERSION").write_text("15.3-dirty\n")  # uncommitted: not in either commit
    status = git(tree, "status", "--porcelain")
    build = fetch(BuildSpec.parse(f"postgres@src:{tree}#{first[:8]}"))
    assert build.version_string.endswith("15.1")
    assert build.identity["commit"] == first and build.identity["subject"] == "first"
    head = fetch(BuildSpec.parse(f"postgres@src:{tree}#HEAD"))
    assert head.version_string.endswith("15.2")
    as_is = fetch(BuildSpec.parse(f"postgres@src:{tree}"))
    assert as_is.version_string.endswith("15.3-dirty")
    assert git(tree, "status", "--porcelain") == status
    assert git(tree, "worktree", "list").count("\n") == 0


def test_bad_input_gets_one_line_naming_what_to_fix(
    tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def error(spec: str) -> str:
        with pytest.raises((BuildNotFound, ProvisionError)) as e:
            fetch(BuildSpec.parse(spec))
        assert "\n" not in str(e.value)
        return str(e.value)

    (tmp_path / "empty").mkdir()
    assert "not a PostgreSQL source tree" in error(f"postgres@src:{tmp_path}/empty")
    assert "no such directory" in error(f"postgres@src:{tmp_path}/nowhere")
    tree = make_tree(tmp_path / "pg")
    assert "unknown flavor 'fast'" in error(f"postgres@src:{tree}+fast")
    assert "not a git checkout" in error(f"postgres@src:{tree}#abc123")
    git(tree, "init", "-q")
    git(tree, "add", "-A")
    git(tree, "commit", "-qm", "one")
    assert "unknown commit 'nosuch'" in error(f"postgres@src:{tree}#nosuch")
    assert "not a RocksDB source tree" in error(f"rocksdb@src:{tree}")
    assert "not supported" in error(f"null@src:{tree}")
    assert "not a MySQL-family (MariaDB, MySQL, Percona, FB MySQL) source tree" in error(
        f"mariadb@src:{tree}"
    )
    monkeypatch.setenv("CC", "no-such-cc")
    assert "needs a C compiler" in error(f"postgres@src:{tree}")
    monkeypatch.delenv("CC")
    # a missing build dependency: configure's own error line, and the log's path
    broken = make_tree(
        tmp_path / "broken",
        fail='echo "configure: error: readline library not found" >&2; exit 1',
    )
    why = error(f"postgres@src:{broken}")
    assert "configure failed" in why and "readline library not found" in why
    assert ".log" in why
    # a compile error: the compiler's first error line, not make's last word
    log = tmp_path / "build.log"
    log.write_text(
        "cc -c misc.c\nmisc.c:989:1: error: unknown type name 'this'\n"
        "misc.c:989:11: error: expected ';'\nmake: *** [GNUmakefile:11: all] Error 2\n"
    )
    assert source.last_error(log) == "misc.c:989:1: error: unknown type name 'this'"
    log.write_text(
        "-- Looking for SSL\nCMake Error at cmake/ssl.cmake:360 (MESSAGE):\n"
        "  Cannot find appropriate system libraries for WITH_SSL=system.\n"
        "-- Configuring incomplete, errors occurred!\n"
    )
    why = source.last_error(log)
    assert why.startswith("CMake Error at cmake/ssl.cmake:360") and "WITH_SSL=system" in why
    # nothing half-built is cached
    assert not [p for p in (cache / "postgres").iterdir() if p.name.startswith("src-tree")]


def test_a_bisection_over_a_tree_walks_its_commits_good_to_bad(tmp_path: Path) -> None:
    from dbregress.bisect import commit_of, label_of, source_builds

    tree = make_tree(tmp_path / "pg", "15.0")
    git(tree, "init", "-q", "-b", "main")
    git(tree, "add", "-A")
    git(tree, "commit", "-qm", "c0")
    ids = [git(tree, "rev-parse", "HEAD")]
    for i in range(1, 5):
        (tree / "VERSION").write_text(f"15.{i}\n")
        git(tree, "commit", "-qam", f"c{i}")
        ids.append(git(tree, "rev-parse", "HEAD"))
    builds = source_builds("postgres", str(tree), ids[0][:10], "main", "rel_o2nofp")
    assert builds == tuple(f"postgres@src:{tree}#{c}+rel_o2nofp" for c in ids)
    assert label_of(3, builds[3]) == f"b03-{ids[3][:12]}-rel_o2nofp"
    shown = commit_of(builds[2])
    assert shown is not None and shown.startswith(f"{ids[2][:12]} c2 (")
    with pytest.raises(BuildNotFound, match=r"give the good \(older\) commit first"):
        source_builds("postgres", str(tree), "main", ids[0], "rel")
    with pytest.raises(BuildNotFound, match="unknown flavor"):
        source_builds("postgres", str(tree), ids[0], "main", "fast")
    with pytest.raises(BuildNotFound, match="unknown commit 'v99'"):
        source_builds("postgres", str(tree), "v99", "main", "rel")


def test_the_path_shows_a_commit_by_its_id_and_flavor(tmp_path: Path) -> None:
    from dbregress.cli.bisect import shown

    sha = "9afa91e1d06048c9195f12dd1720971bc5c5edf1"
    assert shown(f"postgres@src:{tmp_path}#{sha}+rel") == "9afa91e1d060+rel"
    assert shown("postgres@17.2.0") == "postgres@17.2.0"


# A stand-in for cmake: `cmake -S TREE -B DIR OPTIONS` records its options (and, like
# Percona Server's MyRocks cmake, writes util/build_version.cc into a tree that has
# MyRocks' RocksDB sources), `cmake --build` does nothing, `cmake -E env VAR=VALUE CMD`
# runs CMD with VAR set, and `cmake --install .` puts a server that prints the tree's
# version line under $DESTDIR and the prefix.
CMAKE = """#!/bin/sh
if [ "$1" = "--version" ]; then echo "cmake version 3.99 (stand-in)"; exit 0; fi
if [ "$1" = "-E" ] && [ "$2" = "env" ]; then
  shift 2
  while [ $# -gt 0 ]; do case "$1" in *=*) export "$1"; shift;; *) break;; esac; done
  exec "$@"
fi
if [ "$1" = "--build" ]; then touch built; exit 0; fi
if [ "$1" = "--install" ]; then
  prefix=$(cat prefix); tree=$(cat tree)
  mkdir -p "$DESTDIR$prefix/bin"
  printf '#!/bin/sh\\necho "%s"\\n' "$(cat "$tree/VERSION")" > "$DESTDIR$prefix/bin/mysqld"
  chmod +x "$DESTDIR$prefix/bin/mysqld"
  cp cmake-args "$DESTDIR$prefix/cmake-args"
  exit 0
fi
if [ "$1" != "-S" ] || [ "$3" != "-B" ]; then echo "CMake Error: not -S TREE -B DIR: $*"; exit 1; fi
tree="$2"; shift 4
for a in "$@"; do
  case "$a" in -DCMAKE_INSTALL_PREFIX=*) echo "${a#-DCMAKE_INSTALL_PREFIX=}" > prefix;; esac
done
echo "$tree" > tree
printf '%s\\n' "$@" > cmake-args
util="$tree/storage/rocksdb/rocksdb/util"
if [ -d "$util" ]; then echo "// generated" > "$util/build_version.cc"; fi
"""
# What the MySQL family's builds must find (source/needs.py), as empty headers: CPATH
# points the compiler at them, as it would at a user's own installs.
STUB_HEADERS = (
    "openssl/ssl.h", "zlib.h", "curses.h", "pcre2.h", "fmt/format.h",
    "snappy.h", "lz4.h", "zstd.h", "bzlib.h",
)  # fmt: skip


def stub_headers(where: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name in STUB_HEADERS:
        (where / name).parent.mkdir(parents=True, exist_ok=True)
        (where / name).write_text("/* stand-in */\n")
    monkeypatch.setenv("CPATH", str(where))
    return where


def make_cmake_tree(path: Path, bin_dir: Path, line: str) -> Path:
    (path / "sql").mkdir(parents=True)
    (path / "sql/mysqld.cc").write_text("int main() { return 0; }\n")
    (path / "CMakeLists.txt").write_text("project(stand_in)\n")
    (path / "VERSION").write_text(line + "\n")
    if "MariaDB" in line:  # what makes a tree MariaDB's (source/cmake.py, tree_kind)
        (path / "storage/maria").mkdir(parents=True)
    bin_dir.mkdir(exist_ok=True)
    cmake = bin_dir / "cmake"
    cmake.write_text(CMAKE)
    cmake.chmod(cmake.stat().st_mode | stat.S_IEXEC)
    return path


def test_a_mysql_family_tree_builds_with_cmake_in_its_flavor(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """mariadb@src: and mysql@src: build with one cmake recipe: the flavor's build type
    and flags for C and C++, the family's common options, the prefix in the cache; the
    server's own version line names the build, and mariadb@ refuses a MySQL server."""
    bin_dir = tmp_path / "bin"
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    stub_headers(tmp_path / "include", monkeypatch)
    line = "mysqld  Ver 10.11.99-MariaDB for debian-linux-gnu on x86_64 (Source distribution)"
    tree = make_cmake_tree(tmp_path / "mariadb", bin_dir, line)
    build = fetch(BuildSpec.parse(f"mariadb@src:{tree}+rel_o2nofp"))
    assert "10.11.99-MariaDB" in build.version_string and build.identity["flavor"] == "rel_o2nofp"
    args = (build.basedir / "cmake-args").read_text().splitlines()
    assert "-DCMAKE_BUILD_TYPE=Release" in args
    flags = "-O2 -g1 -DNDEBUG -fno-omit-frame-pointer"
    assert f"-DCMAKE_C_FLAGS_RELEASE={flags}" in args
    assert f"-DCMAKE_CXX_FLAGS_RELEASE={flags}" in args
    assert f"-DCMAKE_INSTALL_PREFIX={build.basedir}" in args
    assert set(cmake.FIXED_OPTIONS["mariadb"]) <= set(args)
    debug = fetch(BuildSpec.parse(f"mariadb@src:{tree}+debug"))
    assert "-DCMAKE_BUILD_TYPE=Debug" in (debug.basedir / "cmake-args").read_text().splitlines()
    mysql = make_cmake_tree(
        tmp_path / "mysql", bin_dir, "mysqld  Ver 8.0.99 for Linux on x86_64 (Source distribution)"
    )
    built = fetch(BuildSpec.parse(f"mysql@src:{mysql}"))
    assert "8.0.99" in built.version_string
    mysql_args = (built.basedir / "cmake-args").read_text().splitlines()
    assert set(cmake.FIXED_OPTIONS["mysql"]) <= set(mysql_args)
    assert "-DWITHOUT_DYNAMIC_PLUGINS=ON" not in mysql_args  # MariaDB's option only
    with pytest.raises(BuildNotFound, match="not MariaDB"):
        fetch(BuildSpec.parse(f"mariadb@src:{mysql}+rel_o2nofp"))
    with pytest.raises(BuildNotFound, match="unknown flavor 'fast' for mysql"):
        fetch(BuildSpec.parse(f"mysql@src:{mysql}+fast"))
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.setenv("CC", "/usr/bin/gcc")
    with pytest.raises(BuildNotFound, match="needs a C\\+\\+ compiler; 'g\\+\\+'"):
        fetch(BuildSpec.parse(f"mysql@src:{mysql}+rel_native_lto"))
    monkeypatch.setenv("CXX", "/usr/bin/g++")
    with pytest.raises(BuildNotFound, match="needs cmake"):
        fetch(BuildSpec.parse(f"mysql@src:{mysql}+rel_native_lto"))


def lab_with(tmp_path: Path, build: str, flavors: str) -> Path:
    lab = tmp_path / "lab.toml"
    lab.write_text(
        f'name = "flavors"\nbenchmark = "insert"\n{flavors}\n'
        f'[[column]]\nlabel = "a"\nbuild = "{build}"\n'
    )
    return lab


def test_a_lab_defines_its_own_flavor_with_patches_by_version_range(tmp_path: Path) -> None:
    """[flavors.postgres.NAME] in the lab: its flags and the patches whose version range
    holds the tree's version (PACKAGE_VERSION in configure) build a copy of the tree,
    never the user's; the recipe is part of the build's identity and key."""
    tree = make_tree(tmp_path / "pg", version="15.99")
    with open(tree / "configure", "a") as f:
        f.write("PACKAGE_VERSION='15.99'\n")
    (tmp_path / "new.patch").write_text(
        "--- a/VERSION\n+++ b/VERSION\n@@ -1 +1 @@\n-15.99\n+15.98\n"
    )
    (tmp_path / "old.patch").write_text("--- a/NOPE\n+++ b/NOPE\n@@ -1 +1 @@\n-x\n+y\n")
    flavors = (
        '[flavors.postgres.mine]\ncflags = "-O1"\npatches = [\n'
        '  { file = "new.patch", versions = ">=15.0, <16" },\n'
        '  { file = "old.patch", versions = "<12" },\n]\n'
    )
    lab = load_lab(lab_with(tmp_path, f"postgres@src:{tree}+mine", flavors))
    spec = lab.comparisons[0].columns[0].build
    assert json.loads(spec.recipe)["cflags"] == "-O1"
    build = fetch(spec)
    assert "15.98" in build.version_string  # the patch changed the copy's VERSION
    assert (tree / "VERSION").read_text() == "15.99\n"  # and not the user's tree
    assert (build.basedir / "flags").read_text().strip() == "CFLAGS=-O1"
    assert build.identity["patches"] == "new.patch" and build.identity["flavor"] == "mine"
    assert source.in_range((8, 0, 19), ">=8.0, <8.0.20")
    assert not source.in_range((8, 0, 20), ">=8.0, <8.0.20")


@pytest.mark.parametrize(
    ("option", "moves"),
    [  # autoconf's configure takes every cut of an option down to its own shortest
        *[(o, True) for o in ("--pr=/x", "--p", "-prefix=/x", "--ex=/x", "--exec_prefix=/x")],
        *[(o, True) for o in ("--bin=/x", "--datad=/d", "--libd=/x", "--o=/x", "--m=/x")],
        *[(o, True) for o in ("--program-prefix=pg", "bindir=/x", "DESTDIR=/x")],
        *[(o, True) for o in ("-DCMAKE_INSTALL_PREFIX:PATH=/x", "-DINSTALL_LIBDIR=lib")],
        *[(o, True) for o in ("--install-prefix=/x", "program_prefix=pg", "CONFIG_SITE=/x")],
        # ambiguous or not a place: configure's own business
        *[(o, False) for o in ("--lib=/x", "--data=/x", "--e", "--pre-release", "CFLAGS=-O2")],
        *[(o, False) for o in ("--with-lz4", "--exec-prefix-x", "-DWITH_SSL=x")],
        *[(o, True) for o in ("--srcdir=/x", "-srcdir=/x", "--sr=/x")],  # another tree
    ],
)
def test_options_that_move_the_install_are_told_apart(option: str, moves: bool) -> None:
    assert places_install(option) is moves


@pytest.mark.parametrize(
    ("flavors", "build_flavor", "says"),
    [
        ("", "fast", "unknown flavor 'fast' for postgres; known: debug, rel"),
        ('[flavors.postgres.rel]\ncflags = "-O3"\n', "rel", "is a shipped flavor"),
        ('[flavors.oracle.x]\ncflags = "-O3"\n', "rel", "known: postgres, mysql"),
        ('[flavors.postgres.x]\npatches = [{ file = "none.patch" }]\n', "x", "no patch file"),
        (
            '[flavors.postgres.x]\npatches = [{ file = "lab.toml", versions = "~8" }]\n',
            "x",
            "is not a bound",
        ),
        ('[flavors.postgres.x]\ncflag = "-O3"\n', "x", "unknown key 'cflag'"),
        (
            '[flavors.postgres.x]\nconfigure = ["--with-lz4", "--prefix=/usr"]\n',
            "x",
            "'--prefix=/usr': dbregress chooses where a build installs",
        ),
        (  # configure takes abbreviations, and a directory alone moves files too
            '[flavors.postgres.x]\nconfigure = ["--pre=/usr"]\n',
            "x",
            "'--pre=/usr': dbregress chooses",
        ),
        ('[flavors.postgres.x]\nconfigure = ["--datadir=/d"]\n', "x", "'--datadir=/d'"),
        (
            '[flavors.mysql.x]\ncmake = ["-DCMAKE_INSTALL_PREFIX:PATH=/x"]\n',
            "rel",
            "'-DCMAKE_INSTALL_PREFIX:PATH=/x': dbregress chooses",
        ),
    ],
)
def test_a_lab_flavor_mistake_names_the_key(
    tmp_path: Path, flavors: str, build_flavor: str, says: str
) -> None:
    tree = make_tree(tmp_path / "pg")
    with pytest.raises(LabError, match=re.escape(says)) as e:
        load_lab(lab_with(tmp_path, f"postgres@src:{tree}+{build_flavor}", flavors))
    assert "lab.toml:" in str(e.value)


def test_releases_then_commits_finds_the_release_tags_in_the_tree(tmp_path: Path) -> None:
    """After a registry bisection ends on two adjacent releases, the commits between
    their release tags in the user's tree are the second phase's builds."""
    assert bisect.release_tags("postgres", "17.2.0") == ["REL_17_2"]
    assert bisect.release_tags("postgres", "9.6.10") == ["REL9_6_10"]
    assert bisect.release_tags("mariadb", "10.11.5") == ["mariadb-10.11.5"]
    assert bisect.release_tags("rocksdb", "9.10.0")[0] == "v9.10.0"
    tree = make_tree(tmp_path / "pg")
    git(tree, "init", "-q")
    for n, tag in enumerate(["REL_15_1", "", "", "REL_15_2"]):
        (tree / "misc.c").write_text(f"/* {n} */\n")
        git(tree, "add", "-A")
        git(tree, "commit", "-qm", f"commit {n}")
        if tag:
            git(tree, "tag", tag)
    request = bisect.BisectRequest(
        builds=("postgres@15.1.0", "postgres@15.2.0"),
        benchmark="insert",
        step="qp100",
        then_src=str(tree),
        then_flavor="rel_o2nofp",
    )
    ended = bisect.Outcome(
        builds=list(request.builds), first_bad="postgres@15.2.0", last_good="postgres@15.1.0"
    )
    builds = bisect.commits_after(request, ended)
    assert builds is not None and len(builds) == 4
    assert all(b.startswith(f"postgres@src:{tree}#") and b.endswith("+rel_o2nofp") for b in builds)
    assert builds[0].split("#")[1].split("+")[0] == git(tree, "rev-parse", "REL_15_1")
    undecided = bisect.Outcome(builds=list(request.builds), stopped="undecided")
    assert bisect.commits_after(request, undecided) is None
    missing = bisect.Outcome(builds=[], first_bad="postgres@16.1.0", last_good="postgres@15.1.0")
    with pytest.raises(bisect.BisectError, match=r"no release tag for it in .* \(tried REL_16_1\)"):
        bisect.commits_after(request, missing)


def test_a_commit_of_a_mysql_tree_is_refused_as_mariadb_before_cmake_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """mariadb@src:TREE#REF of a MySQL tree: the commit's files are read and refused
    before any cmake or compiler runs (the stand-in cmake would leave cmake-args)."""
    bin_dir = tmp_path / "bin"
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    line = "mysqld  Ver 8.0.99 for Linux on x86_64 (Source distribution)"
    tree = make_cmake_tree(tmp_path / "mysql", bin_dir, line)
    git(tree, "init", "-q")
    git(tree, "add", "-A")
    git(tree, "commit", "-qm", "mysql")
    with pytest.raises(BuildNotFound, match="not MariaDB's; write mysql@src:"):
        fetch(BuildSpec.parse(f"mariadb@src:{tree}#HEAD"))
    logs = list((tmp_path / "cache" / "mariadb" / "logs").glob("*.log"))
    assert logs and all("# cmake\n" not in log.read_text().split("# key")[-1] for log in logs)


def test_missing_libraries_are_named_before_configuring(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A library the build needs and the compiler does not find (cmake's "Could NOT
    find Snappy" a minute into configuring) is one line naming the header, its package
    and the command that installs it, and cmake never runs."""
    from dbregress.provision.source import needs

    bin_dir = tmp_path / "bin"
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    stub_headers(tmp_path / "include", monkeypatch)
    absent = ("dbregress-test/snappy.h", "libsnappy-dev")  # no compiler finds it
    monkeypatch.setattr(needs, "MARIADB", (*needs.MARIADB, absent))
    line = "mysqld  Ver 10.11.99-MariaDB for debian-linux-gnu on x86_64 (Source distribution)"
    tree = make_cmake_tree(tmp_path / "mariadb", bin_dir, line)
    with pytest.raises(BuildNotFound) as e:
        fetch(BuildSpec.parse(f"mariadb@src:{tree}"))
    message = str(e.value)
    assert "\n" not in message
    assert "needs dbregress-test/snappy.h, which" in message
    assert "apt-get install libsnappy-dev" in message and "`make mariadb-source`" in message
    assert not list((tmp_path / "cache").rglob("cmake-args"))  # cmake never ran
    assert not (tmp_path / "cache/mariadb/src-work").exists() or not any(
        (tmp_path / "cache/mariadb/src-work").iterdir()
    )
    # found (CPATH), the same build goes ahead
    (tmp_path / "include/dbregress-test").mkdir()
    (tmp_path / "include/dbregress-test/snappy.h").write_text("")
    assert "10.11.99-MariaDB" in fetch(BuildSpec.parse(f"mariadb@src:{tree}")).version_string


def test_a_build_that_writes_into_its_tree_builds_a_copy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Percona Server's MyRocks cmake writes util/build_version.cc into the source tree
    (the stand-in cmake does the same): the build runs on a copy of the tree's source
    files, so the user's tree, and its digest, stay as they were; git-ignored build
    output is not copied."""
    bin_dir = tmp_path / "bin"
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    stub_headers(tmp_path / "include", monkeypatch)
    line = "mysqld  Ver 8.0.99-99 for Linux on x86_64 (Source distribution)"
    tree = make_cmake_tree(tmp_path / "percona", bin_dir, line)
    (tree / "build-ps").mkdir()  # what makes it Percona's (cmake.kind_evidence)
    (tree / "build-ps/build-binary.sh").write_text("#!/bin/sh\n")
    util = tree / "storage/rocksdb/rocksdb/util"
    util.mkdir(parents=True)
    (util / "build_version.cc.in").write_text("// template\n")
    (tree / "storage/rocksdb/rocksdb/include/rocksdb").mkdir(parents=True)
    (tree / "storage/rocksdb/rocksdb/include/rocksdb/db.h").write_text("// RocksDB\n")
    (tree / ".gitignore").write_text("build/\n")
    git(tree, "init", "-q")
    git(tree, "add", "-A")
    git(tree, "commit", "-qm", "percona")
    (tree / "build").mkdir()
    (tree / "build/CMakeCache.txt").write_text("# the user's own build\n")
    before = sorted(str(p.relative_to(tree)) for p in tree.rglob("*") if ".git/" not in str(p))
    spec = BuildSpec.parse(f"mysql@src:{tree}+rel_myrocks")
    key = source.why(spec)["key"]
    built = fetch(spec)
    assert "8.0.99" in built.version_string
    assert "-DWITH_ROCKSDB=FORCE" in (built.basedir / "cmake-args").read_text().splitlines()
    after = sorted(str(p.relative_to(tree)) for p in tree.rglob("*") if ".git/" not in str(p))
    assert after == before and not (util / "build_version.cc").exists()
    assert source.why(spec)["key"] == key  # the same digest: a cache hit
    assert git(tree, "status", "--porcelain") == ""
