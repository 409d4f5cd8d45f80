"""Builds from a source tree: `postgres@src:PATH[#REF][+FLAVOR]`, `mariadb@src:...`,
`mysql@src:...`.

PATH is a PostgreSQL source tree (configure) or a MySQL-family one (cmake: MariaDB,
MySQL, Percona Server, FB MySQL): a git checkout or an unpacked tarball (Debian's
`apt-get source postgresql-15` or `apt-get source mariadb` gives one). `mariadb@src:`
insists that the server it builds is MariaDB; `mysql@src:` takes any of the family.
REF, a commit, tag or branch of a git checkout, builds that commit: its files are taken
with `git archive` into a directory of dbregress's own, so the user's checkout, index
and worktree list are never touched. Without REF the tree is built as it is on disk,
uncommitted changes included. FLAVOR names a compile recipe of flavors.toml (default
`rel`), per engine family.

The build runs out of tree (configure or cmake in a build directory of its own, `make`
on every core, through ccache when it is installed, its cache kept beside the builds),
installs with DESTDIR into a temporary directory and is renamed into the build cache
under a key of engine, tree, flavor, recipe and compiler version (cache.py): a second
request is a cache hit that runs no compiler, and a failed build leaves nothing under
the key. Its output goes to a log file; a failure names the log and the first error
line. The Build's identity records the tree, the commit, the flavor's recipe, the
compiler and the time the build took.
"""

from __future__ import annotations

import hashlib
import json
import operator
import os
import re
import shutil
import subprocess
import time
import tomllib
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, Literal, NotRequired, TypedDict, cast

from dbregress.errors import BuildNotFound, ProvisionError
from dbregress.provision import Build, BuildSpec, mysql
from dbregress.provision.cache import cache_root, install, make_dirs, read_spec
from dbregress.provision.local import postgres_version

PREFIX = "src:"
DEFAULT_FLAVOR = "rel"
# Engines whose trees this module builds (RocksDB: not yet), and the family whose
# flavors (flavors.toml) and recipe each uses.
FAMILY = {"postgres": "postgres", "mariadb": "mysql", "mysql": "mysql"}
BUILDERS = tuple(FAMILY)
FLAVOR_NAME = re.compile(r"^[A-Za-z0-9_]+$")
# Files that make a directory a family's source tree, and what the family is called.
TREE_FILES = {
    "postgres": ("configure", "src/backend/main/main.c"),
    "mysql": ("CMakeLists.txt", "sql/mysqld.cc"),
}
TREE_NAMES = {"postgres": "PostgreSQL", "mysql": "MySQL-family (MariaDB, MySQL, Percona)"}
TREE_TOP = {"postgres": "`configure`", "mysql": "the top `CMakeLists.txt`"}
# Directories left out of a tree's content hash: version control and build leftovers.
SKIP_DIRS = {".git", ".hg", ".svn", "autom4te.cache"}


@dataclass(frozen=True)
class SourceSpec:
    """What follows `src:`: the tree, a ref to build (None: the tree as on disk) and the
    flavor."""

    path: Path
    ref: str | None
    flavor: str

    @staticmethod
    def parse(spec: BuildSpec) -> SourceSpec:
        text = spec.version.removeprefix(PREFIX)
        flavor = DEFAULT_FLAVOR
        head, plus, tail = text.rpartition("+")
        if plus and "/" not in tail and FLAVOR_NAME.match(tail):
            text, flavor = head, tail
        path_text, hash_, ref = text.partition("#")
        if not path_text:
            raise BuildNotFound(
                f"{spec}: no source tree; write {spec.engine}@src:/path/to/tree[#commit][+flavor]"
            )
        path = Path(os.path.expanduser(path_text)).resolve()
        return SourceSpec(path, ref if hash_ and ref else None, flavor)

    def __str__(self) -> str:
        ref = f"#{self.ref}" if self.ref else ""
        return f"{PREFIX}{self.path}{ref}+{self.flavor}"


def canonical(spec: BuildSpec) -> BuildSpec:
    """The spec with its path absolute and its flavor written out."""
    return BuildSpec(spec.engine, str(SourceSpec.parse(spec)), spec.recipe)


class Patch(TypedDict):
    """A recipe's patch (patch_entry)."""

    file: str
    versions: str
    sha256: str


class RawRecipe(TypedDict, total=False):
    """A flavor's recipe as flavors.toml or a lab's [flavors.<family>.<name>] table
    gives it: any key may be left out, and only its family's keys are read."""

    cc: str
    cxx: str
    build_type: str
    cflags: str
    ldflags: str
    configure: list[str]
    cmake: list[str]
    patches: list[Patch]


class Recipe(TypedDict):
    """A recipe with its defaults written out (normalized), as the build and its cache
    key read it: flags always, the family's options (configure for PostgreSQL, cmake and
    build_type for the MySQL family), cc, cxx and patches only when given."""

    cflags: str
    ldflags: str
    configure: NotRequired[list[str]]
    cmake: NotRequired[list[str]]
    build_type: NotRequired[str]
    cc: NotRequired[str]
    cxx: NotRequired[str]
    patches: NotRequired[list[Patch]]


RecipeKey = Literal["cc", "cxx", "build_type", "cflags", "ldflags", "configure", "cmake", "patches"]

# What a flavor's recipe may say, per family (flavors.toml and the lab file's
# [flavors.<family>.<name>] tables): compilers, flags, configure or cmake options and
# patches by version range.
RECIPE_KEYS: dict[str, tuple[RecipeKey, ...]] = {
    "postgres": ("cc", "cflags", "ldflags", "configure", "patches"),
    "mysql": ("cc", "cxx", "build_type", "cflags", "ldflags", "cmake", "patches"),
}
_RANGE = re.compile(r"^\s*(>=|<=|==|=|>|<)\s*(\d+(?:\.\d+)*)\s*$")
_COMPARE = {
    ">=": operator.ge,
    ">": operator.gt,
    "<=": operator.le,
    "<": operator.lt,
    "==": operator.eq,
    "=": operator.eq,
}


def check_range(text: str) -> str | None:
    """None when `text` is a version range like ">=8.0.0, <8.0.20" (empty: every
    version), else what is wrong with it."""
    for part in filter(None, (s.strip() for s in text.split(","))):
        if not _RANGE.match(part):
            return (
                f'{part!r} is not a bound; write bounds like ">=8.0.0, <8.0.20" '
                "(>=, >, <=, <, == and a version)"
            )
    return None


def in_range(version: tuple[int, ...], text: str) -> bool:
    """Whether `version` satisfies every bound of the range `text`."""
    for part in filter(None, (s.strip() for s in text.split(","))):
        m = _RANGE.match(part)
        if m is None:
            raise ValueError(check_range(text))
        bound = tuple(int(x) for x in m.group(2).split("."))
        width = max(len(version), len(bound))
        v = version + (0,) * (width - len(version))
        b = bound + (0,) * (width - len(bound))
        if not _COMPARE[m.group(1)](v, b):
            return False
    return True


def patch_entry(file: Path, versions: str) -> Patch:
    """A recipe's patch: its path, the versions of the tree it applies to and its
    content's digest (part of the build's cache key: an edited patch is another build)."""
    return {
        "file": str(file),
        "versions": versions,
        "sha256": hashlib.sha256(file.read_bytes()).hexdigest(),
    }


def tree_version(engine: str, tree: Path) -> tuple[int, ...] | None:
    """The version of the source in `tree`: PostgreSQL's configure (PACKAGE_VERSION),
    the MySQL family's VERSION (MariaDB, MySQL 5.x) or MYSQL_VERSION (MySQL 8) file.
    None when the tree does not say."""
    if FAMILY.get(engine) == "postgres":
        configure = tree / "configure"
        text = configure.read_text(errors="replace") if configure.is_file() else ""
        m = re.search(r"^PACKAGE_VERSION='(\d+(?:\.\d+)*)", text, re.MULTILINE)
        return tuple(int(x) for x in m.group(1).split(".")) if m else None
    for name in ("MYSQL_VERSION", "VERSION"):
        f = tree / name
        if not f.is_file():
            continue
        parts = dict(
            re.findall(
                r"^MYSQL_VERSION_(MAJOR|MINOR|PATCH)\s*=\s*(\d+)",
                f.read_text(errors="replace"),
                re.MULTILINE,
            )
        )
        if len(parts) == 3:
            return int(parts["MAJOR"]), int(parts["MINOR"]), int(parts["PATCH"])
    return None


def flavors(engine: str) -> dict[str, RawRecipe]:
    """The flavors shipped for `engine`'s family (flavors.toml, whose tables are raw
    recipes)."""
    text = resources.files("dbregress.provision").joinpath("flavors.toml").read_text()
    shipped = cast(dict[str, RawRecipe], tomllib.loads(text).get(FAMILY.get(engine, engine), {}))
    return dict(shipped)


def recipe(engine: str, flavor: str) -> Recipe:
    known = flavors(engine)
    if flavor not in known:
        raise BuildNotFound(
            f"unknown flavor {flavor!r} for {engine}; known: {', '.join(sorted(known))} "
            "(docs/engines.md, Builds from source)"
        )
    return normalized(FAMILY.get(engine, engine), known[flavor])


def normalized(family: str, r: RawRecipe) -> Recipe:
    """A recipe (a shipped flavor's or a lab's) with its defaults written out, as the
    build and its cache key read it: -O2, no linker flags, no more options, the MySQL
    family's build type Release; cc, cxx and patches only when given (so a shipped
    flavor's key stays what it was)."""
    cflags, ldflags = str(r.get("cflags", "-O2")), str(r.get("ldflags", ""))
    how: Recipe
    if family == "mysql":
        how = {"cflags": cflags, "ldflags": ldflags, "cmake": [str(o) for o in r.get("cmake", [])]}
        how["build_type"] = str(r.get("build_type", "Release"))
    else:
        how = {
            "cflags": cflags,
            "ldflags": ldflags,
            "configure": [str(o) for o in r.get("configure", [])],
        }
    for key in ("cc", "cxx", "patches"):
        if key in r:
            how[key] = r[key]
    return how


def _run(args: list[str], cwd: Path | None = None, **kw: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, cwd=cwd, capture_output=True, text=True, check=False, **kw)


def compiler(named: str = "") -> tuple[str, str]:
    """(the C compiler, its version line): the flavor's `cc`, else $CC, else gcc;
    BuildNotFound when there is none."""
    cc = named or os.environ.get("CC") or "gcc"
    path = shutil.which(cc)
    if path is None:
        raise BuildNotFound(
            f"building from source needs a C compiler; {cc!r} is not on PATH "
            f"(apt-get install {'gcc, or set CC' if not named else cc + ', or change the flavor'})"
        )
    done = _run([path, "--version"])
    return path, (done.stdout.splitlines() or [cc])[0].strip()


def cmake_tools(named: str = "") -> None:
    """What a MySQL-family build needs beyond a C compiler: cmake, a C++ compiler (the
    flavor's `cxx`, else $CXX, else g++) and bison; BuildNotFound naming the missing
    ones."""
    cxx = named or os.environ.get("CXX") or "g++"
    missing = [tool for tool in ("cmake", cxx, "bison") if shutil.which(tool) is None]
    if missing:
        raise BuildNotFound(
            f"building the MySQL family from source needs {', '.join(missing)} on PATH "
            "(apt-get install cmake g++ bison; `make mariadb-source` installs them with "
            "the libraries MariaDB's cmake looks for)"
        )


def _mysql_version(spec: BuildSpec, basedir: Path) -> str:
    line, version = mysql.server_version(basedir, str(spec))
    if spec.engine == "mariadb" and not version.is_mariadb:
        raise BuildNotFound(
            f"{spec}: the tree built {version}, not MariaDB ({line!r}); write mysql@src:..."
        )
    return line


def require_tree(engine: str, path: Path) -> None:
    if engine not in BUILDERS:
        raise BuildNotFound(
            f"{engine}@src: building {engine} from source is not supported yet; "
            f"source builds: {', '.join(BUILDERS)} (or give a build you made: "
            f"{engine}@/path/to/basedir)"
        )
    if not path.is_dir():
        raise BuildNotFound(f"{engine}@src:{path}: no such directory")
    family = FAMILY[engine]
    missing = [f for f in TREE_FILES[family] if not (path / f).is_file()]
    if missing:
        raise BuildNotFound(
            f"{engine}@src:{path}: not a {TREE_NAMES[family]} source tree "
            f"(no {', '.join(missing)}); give the top of the tree (where {TREE_TOP[family]} is)"
        )


def resolve_commit(path: Path, ref: str) -> tuple[str, str]:
    """(full commit id, subject) of `ref` in the git checkout at `path`."""
    if _run(["git", "-C", str(path), "rev-parse", "--git-dir"]).returncode != 0:
        raise BuildNotFound(
            f"src:{path}#{ref}: {path} is not a git checkout, so it has no commit {ref!r}; "
            "drop #REF to build the tree as it is"
        )
    done = _run(["git", "-C", str(path), "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}"])
    if done.returncode != 0:
        raise BuildNotFound(
            f"src:{path}#{ref}: unknown commit {ref!r} in {path} "
            "(a commit id, tag or branch that `git rev-parse` knows)"
        )
    commit = done.stdout.strip()
    return commit, subject_and_date(path, commit)[0]


def tree_digest(path: Path) -> str:
    """A digest of a tree's files (names, modes and contents; version control and
    autoconf caches left out): the identity of a tree built as it is on disk."""
    h = hashlib.sha256()
    for dirpath, dirnames, filenames in os.walk(path):
        dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS)
        for name in sorted(filenames):
            f = Path(dirpath) / name
            if f.is_symlink() or not f.is_file():
                continue
            h.update(f"{f.relative_to(path)}\0{f.stat().st_mode & 0o111}\0".encode())
            with open(f, "rb") as fh:
                for block in iter(lambda: fh.read(1 << 20), b""):
                    h.update(block)
            h.update(b"\0")
    return h.hexdigest()


def fetch(spec: BuildSpec) -> Build:
    """Build `spec` (or find it in the cache)."""
    src = SourceSpec.parse(spec)
    require_tree(spec.engine, src.path)
    # a lab's flavor travels as the JSON of its normalized recipe (lab_flavors)
    how = cast(Recipe, json.loads(spec.recipe)) if spec.recipe else recipe(spec.engine, src.flavor)
    cc, cc_version = compiler(how.get("cc", ""))
    if FAMILY[spec.engine] == "mysql":
        cmake_tools(how.get("cxx", ""))
    if src.ref is not None:
        commit, subject = resolve_commit(src.path, src.ref)
        tree = commit
    else:
        commit, subject = "", ""
        tree = "tree-" + tree_digest(src.path)
    recipe_id = hashlib.sha256(json.dumps([how, cc_version], sort_keys=True).encode()).hexdigest()[
        :12
    ]
    key = f"src-{tree[:16]}-{src.flavor}-{recipe_id}"
    final = cache_root() / spec.engine / key
    hit = read_spec(final) is not None
    record = install(final, lambda tmp: _build(spec, src, how, cc, tmp, final, commit))
    if FAMILY[spec.engine] == "mysql":
        version = _mysql_version(spec, final)
    else:
        version = postgres_version(final)
    identity = {
        "source": "src",
        "tree": str(src.path),
        "ref": src.ref or "",
        "commit": commit,
        "subject": subject,
        "tree_id": tree,
        "flavor": src.flavor,
        "recipe": json.dumps(how, sort_keys=True),
        "compiler": cc_version,
        "build_s": record.get("build_s", ""),
        "ccache": record.get("ccache", ""),
        "patches": record.get("patches", ""),
        "cache_hit": "yes" if hit else "no",
        "path": str(final),
        "version_string": version,
    }
    return Build(spec, final, version, identity)


def _build(
    spec: BuildSpec,
    src: SourceSpec,
    how: Recipe,
    cc: str,
    tmp: Path,
    final: Path,
    commit: str,
) -> dict[str, str]:
    """configure, make and install the tree into `tmp` (to be renamed to `final`)."""
    work = cache_root() / spec.engine / "src-work" / final.name
    shutil.rmtree(work, ignore_errors=True)
    make_dirs(work)
    logs = cache_root() / spec.engine / "logs"
    make_dirs(logs)
    log = logs / f"{final.name}.log"
    log.write_text("")  # this attempt's output only: its error line is the one reported
    started = time.monotonic()
    ccache = shutil.which("ccache")
    try:
        tree, chosen = _tree(spec, src, how, work, commit, log)
        _compile(spec, how, cc, ccache, tree, work, tmp, final, log)
        staged = tmp / str(final).lstrip("/")
        for entry in staged.iterdir():
            entry.rename(tmp / entry.name)
        shutil.rmtree(tmp / str(final).lstrip("/").split("/")[0])
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return {
        "spec": str(spec),
        "source": "src",
        "build_s": f"{time.monotonic() - started:.1f}",
        "ccache": "yes" if ccache else "no",
        "patches": ", ".join(Path(p["file"]).name for p in chosen),
        "log": str(log),
    }


def _tree(
    spec: BuildSpec, src: SourceSpec, how: Recipe, work: Path, commit: str, log: Path
) -> tuple[Path, list[Patch]]:
    """The tree to build and the patches applied to it: the commit's files exported
    into `work`, or the user's tree itself, or a copy of it when patches apply."""
    tree = src.path
    if commit:
        tree = work / "src"
        tree.mkdir()
        _export(src.path, commit, tree, log)
    chosen = _patches(spec, how, tree)
    if chosen and not commit:  # patch a copy: the user's tree stays as it is
        tree = work / "src"
        shutil.copytree(src.path, tree, symlinks=True, ignore=shutil.ignore_patterns(*SKIP_DIRS))
    for patch in chosen:
        name = Path(patch["file"]).name
        args = ["patch", "-p1", "--batch", "--forward", "-i", patch["file"]]
        _step(f"patch {name}", args, tree, dict(os.environ), log, spec)
    return tree, chosen


# What a make passes down to the commands it runs (GNU make's manual, "Communicating
# Options to a Sub-make").
MAKE_VARIABLES = frozenset(
    {"MAKELEVEL", "MAKEFLAGS", "MFLAGS", "MAKEOVERRIDES", "MAKE_TERMOUT", "MAKE_TERMERR"}
)


def _compile(
    spec: BuildSpec,
    how: Recipe,
    cc: str,
    ccache: str | None,
    tree: Path,
    work: Path,
    tmp: Path,
    final: Path,
    log: Path,
) -> None:
    """configure (or cmake), make on every core, and install with DESTDIR=tmp."""
    build = work / "build"
    build.mkdir()
    # Not a make's own variables: run from inside another make (`make test`, a user's
    # Makefile), PostgreSQL's make would see MAKELEVEL > 0 and skip generating its
    # headers (utils/errcodes.h, ...), which it does only at the top level.
    env = {k: v for k, v in os.environ.items() if k not in MAKE_VARIABLES}
    if ccache:
        env["CCACHE_DIR"] = str(cache_root() / "ccache")
        env["CCACHE_BASEDIR"] = str(work.parent)
    if FAMILY[spec.engine] == "mysql":
        what, configure = "cmake", _cmake(tree, final, how, cc, ccache)
    else:
        env["CC"] = f"{ccache} {cc}" if ccache else cc
        env["CFLAGS"] = how["cflags"]
        if how["ldflags"]:
            env["LDFLAGS"] = how["ldflags"]
        what, configure = "configure", _configure(tree, final, how)
    with open(log, "a") as out:
        out.write(f"# {spec}: {' '.join(configure)}\n# CC={env.get('CC', cc)}\n")
    _step(what, configure, build, env, log, spec)
    _step("make", ["make", f"-j{os.cpu_count() or 1}"], build, env, log, spec)
    _step("make install", ["make", "install", f"DESTDIR={tmp}"], build, env, log, spec)


def _configure(tree: Path, final: Path, how: Recipe) -> list[str]:
    """PostgreSQL's configure: the flavor's options; no ICU and no NLS (fewer build
    dependencies, neither on a benchmark's path)."""
    return [
        str(tree / "configure"),
        f"--prefix={final}",
        "--without-icu",
        "--disable-nls",
        *how["configure"],
    ]


# The MySQL family's cmake options every flavor gets: a server and its client tools,
# nothing a benchmark does not start (no dynamic plugins, unit tests, embedded server,
# Galera, backup tool, router or X plugin), the system's libraries instead of downloads
# (this machine reaches no project site). MariaDB's and MySQL's cmake each ignore the
# other's options, so one list builds MariaDB, MySQL and Percona trees.
CMAKE_COMMON = (
    "-DWITHOUT_DYNAMIC_PLUGINS=ON",
    "-DWITH_UNIT_TESTS=OFF",
    "-DWITH_EMBEDDED_SERVER=OFF",
    "-DWITH_WSREP=OFF",
    "-DWITH_MARIABACKUP=OFF",
    "-DWITH_SSL=system",
    "-DWITH_ZLIB=system",
    "-DWITH_PCRE=system",
    "-DWITH_LIBFMT=system",
    "-DWITH_NUMA=OFF",
    "-DPLUGIN_ROCKSDB=NO",
    "-DPLUGIN_MROONGA=NO",
    "-DPLUGIN_SPIDER=NO",
    "-DPLUGIN_CONNECT=NO",
    "-DPLUGIN_S3=NO",
    "-DPLUGIN_COLUMNSTORE=NO",
    "-DPLUGIN_OQGRAPH=NO",
    "-DWITH_ROUTER=OFF",
    "-DWITH_MYSQLX=OFF",
    "-DDOWNLOAD_BOOST=0",
)


def _cmake(tree: Path, final: Path, how: Recipe, cc: str, ccache: str | None) -> list[str]:
    """cmake for a MySQL-family tree: the flavor's build type, with its flags as that
    build type's flags for C and C++ (replacing cmake's -O3 or -O2 -g), ccache as the
    compiler launcher. A MySQL tarball that bundles Boost (`boost/` at the top) builds
    with it."""
    flags = how["cflags"]
    kind = how["build_type"]
    upper = kind.upper()
    cxx = shutil.which(how.get("cxx") or os.environ.get("CXX") or "g++") or "g++"
    args = [
        "cmake",
        str(tree),
        f"-DCMAKE_BUILD_TYPE={kind}",
        f"-DCMAKE_INSTALL_PREFIX={final}",
        f"-DCMAKE_C_COMPILER={cc}",
        f"-DCMAKE_CXX_COMPILER={cxx}",
        f"-DCMAKE_C_FLAGS_{upper}={flags}",
        f"-DCMAKE_CXX_FLAGS_{upper}={flags}",
        *CMAKE_COMMON,
    ]
    if how["ldflags"]:
        args += [f"-DCMAKE_{k}_LINKER_FLAGS={how['ldflags']}" for k in ("EXE", "SHARED")]
    if ccache:
        args += [f"-DCMAKE_{lang}_COMPILER_LAUNCHER={ccache}" for lang in ("C", "CXX")]
    if (tree / "boost").is_dir():
        args.append(f"-DWITH_BOOST={tree / 'boost'}")
    return [*args, *how["cmake"]]


def _patches(spec: BuildSpec, how: Recipe, tree: Path) -> list[Patch]:
    """The recipe's patches whose version range holds the tree's version; a patch whose
    file changed since the lab named it is an error (the build's key holds its digest)."""
    patches = list(how.get("patches", []))
    if not patches:
        return []
    version = tree_version(spec.engine, tree)
    ranged = [p for p in patches if p.get("versions", "").strip()]
    if ranged and version is None:
        raise ProvisionError(
            f"{spec}: the flavor's patches apply by version, but the tree does not say its "
            "version (no PACKAGE_VERSION in configure, no VERSION or MYSQL_VERSION file)"
        )
    chosen = []
    for p in patches:
        f = Path(p["file"])
        if not f.is_file() or hashlib.sha256(f.read_bytes()).hexdigest() != p["sha256"]:
            raise ProvisionError(
                f"{spec}: patch {f} is missing or changed since the lab was read; run again"
            )
        if version is None or in_range(version, p.get("versions", "")):
            chosen.append(p)
    return chosen


def _export(repo: Path, commit: str, into: Path, log: Path) -> None:
    """The files of `commit` into `into` (git archive: nothing of the checkout moves)."""
    archive = subprocess.Popen(
        ["git", "-C", str(repo), "archive", "--format=tar", commit],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    untar = _run(["tar", "-x", "-C", str(into)], stdin=archive.stdout)
    _, err = archive.communicate()
    if archive.returncode != 0 or untar.returncode != 0:
        raise ProvisionError(
            f"src:{repo}#{commit[:12]}: git archive failed: "
            f"{(err.decode(errors='replace') or untar.stderr).strip()[-300:]}"
        )


def _step(
    what: str, args: list[str], cwd: Path, env: dict[str, str], log: Path, spec: BuildSpec
) -> None:
    with open(log, "a") as out:
        out.write(f"\n# {what}\n")
        out.flush()
        done = subprocess.run(args, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT)
    if done.returncode != 0:
        raise ProvisionError(
            f"{spec}: {what} failed (exit {done.returncode}): {_last_error(log)}; "
            f"the whole output is in {log}"
        )


def _last_error(log: Path) -> str:
    """The line of the log that says what went wrong: the first `error:` (configure's,
    or the compiler's first, the cause of those after it) or cmake's first `CMake Error`
    with its message, else the last line that mentions an error (make's `*** ... Error
    2`), else the last line."""
    lines = [ln.strip() for ln in log.read_text(errors="replace").splitlines() if ln.strip()]
    for i, line in enumerate(lines):
        if line.startswith("CMake Error") and i + 1 < len(lines):
            # cmake's message is on the lines after its `CMake Error at FILE:LINE`
            return f"{line} {lines[i + 1]}"[-300:]
        if "error:" in line.lower():
            return line[-300:]
    for line in reversed(lines):
        if "error" in line.lower():
            return line[-300:]
    return lines[-1][-300:] if lines else "no output"


@dataclass(frozen=True)
class Commit:
    id: str
    subject: str
    date: str  # author date, ISO 8601


def commits_between(path: Path, good: str, bad: str, first_parent: bool = True) -> list[Commit]:
    """The commits from `good` to `bad` of the git checkout at `path`, both included,
    oldest first: `git rev-list --reverse good..bad` (first-parent by default: the
    merges of a main line, not every commit of the branches they bring)."""
    g, _ = resolve_commit(path, good)
    b, _ = resolve_commit(path, bad)
    if g == b:
        raise BuildNotFound(f"src:{path}: {good} and {bad} are the same commit")
    if _run(["git", "-C", str(path), "merge-base", "--is-ancestor", g, b]).returncode != 0:
        raise BuildNotFound(
            f"src:{path}: {good} is not an ancestor of {bad}; give the good (older) commit first"
        )
    args = ["git", "-C", str(path), "rev-list", "--reverse", "--format=%H%x09%aI%x09%s"]
    done = _run([*args, *(["--first-parent"] if first_parent else []), f"{g}..{b}"])
    if done.returncode != 0:
        raise BuildNotFound(f"src:{path}: git rev-list failed: {done.stderr.strip()[-300:]}")
    out = [Commit(g, *subject_and_date(path, g))]
    for line in done.stdout.splitlines():
        if line.startswith("commit "):
            continue
        sha, date, subject = [*line.split("\t", 2), "", ""][:3]
        out.append(Commit(sha, subject, date))
    return out


def subject_and_date(path: Path, commit: str) -> tuple[str, str]:
    done = _run(["git", "-C", str(path), "log", "-1", "--format=%s%x09%aI", commit])
    subject, _, date = done.stdout.strip().partition("\t")
    return subject, date
