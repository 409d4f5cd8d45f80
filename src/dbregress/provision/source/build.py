"""Building a source tree: `postgres@src:...`, `mariadb@src:...`, `mysql@src:...` and
`rocksdb@src:...` (the package's docstring says what each names).

The build runs out of tree (configure or `cmake -S TREE -B BUILD` in a build directory
of its own, `make` or `cmake --build` on every core, through ccache when it is
installed, its cache kept beside the builds), installs with DESTDIR into a temporary
directory and is renamed into the build cache under the key of key.py: a second request
is a cache hit that runs no compiler, and a failed build leaves nothing under the key.
Its output goes to a log file; a failure names the log and the first error line.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, cast

from dbregress.model.errors import BuildNotFound, ProvisionError
from dbregress.provision import Build, BuildSpec, mysql, rocksdb
from dbregress.provision.cache import cache_root, install, make_dirs, read_spec
from dbregress.provision.local import postgres_version
from dbregress.provision.source import cmake, key, needs, rocksdb_build, tree, worktree
from dbregress.provision.source.recipes import Patch, Recipe, recipe, select_patches, tree_version
from dbregress.provision.source.spec import FAMILY, SourceSpec, require_tree
from dbregress.shapes.source_build import BuildInputs, BuildWhy, TreeInputs

# PostgreSQL's configure options every flavor gets: no ICU and no NLS (fewer build
# dependencies, neither on a benchmark's path).
CONFIGURE_FIXED = ("--without-icu", "--disable-nls")
# Every PostgreSQL build is configured for this one prefix and installed (DESTDIR) into
# its own cache directory, its programs finding libpq beside them ($ORIGIN: PostgreSQL's
# programs find share/ and lib/ relative to their own path, so the install moves). Why:
# configure writes its arguments, the prefix among them, into pg_config.h, which nearly
# every file includes, so a prefix per build (the cache directory, named by its key)
# changed that header in every build, and ccache's direct mode, which hashes the headers
# a file includes, never hit: every file of every build ran the preprocessor (99% of
# ccache's hits were preprocessed ones). "postgres" in the prefix keeps the layout the
# cache directories had (share/ and lib/ without a postgresql/ subdirectory).
PG_PREFIX = Path("/opt/dbregress-postgres")
# make's $$ is a $, and the rpath's quotes keep it from the shell: -rpath,'$ORIGIN/../lib'
PG_RPATH = "rpathdir=$$ORIGIN/../lib"
# What a build step's environment keeps besides key.BUILD_ENV: where programs, the home
# directory and temporary files are, and the locale of messages (none of them changes
# what is built; the tools PATH finds are in the key by their versions).
PASSED_ENV = ("PATH", "HOME", "TMPDIR", "LANG", "LC_ALL", "LC_MESSAGES", "TERM", "USER")
# What a make passes down to the commands it runs (GNU make's manual, "Communicating
# Options to a Sub-make"). Run from inside another make (`make test`, a user's
# Makefile), PostgreSQL's make would see MAKELEVEL > 0 and skip generating its headers
# (utils/errcodes.h, ...), which it does only at the top level.
MAKE_VARIABLES = frozenset(
    {"MAKELEVEL", "MAKEFLAGS", "MFLAGS", "MAKEOVERRIDES", "MAKE_TERMOUT", "MAKE_TERMERR"}
)


@dataclass(frozen=True)
class Plan:
    """What a build request resolves to before anything is built: the tree, the
    recipe, the compilers, and the key made of them."""

    spec: BuildSpec
    src: SourceSpec
    family: str
    how: Recipe
    cc: str
    cxx: str
    commit: str
    subject: str
    inputs: BuildInputs
    key: str
    digested: str = ""  # a tree on disk: what its digest read and left out

    @property
    def final(self) -> Path:
        return cache_root() / self.spec.engine / self.key


def fixed_options(family: str) -> list[str]:
    """The options every flavor of the family gets (part of the key)."""
    if family == "postgres":
        return [*CONFIGURE_FIXED, f"--prefix={PG_PREFIX}", f"make {PG_RPATH}"]
    if family == "rocksdb":
        return list(rocksdb_build.FIXED_OPTIONS)
    tables: dict[str, Mapping[cmake.Kind, tuple[str, ...]]] = {
        "fixed": cmake.FIXED_OPTIONS,
        "no_myrocks": cmake.NO_MYROCKS,
        "myrocks": cmake.WITH_MYROCKS,  # MariaDB's holds its module plugins turned off
    }
    return [
        f"{what} {kind}: {' '.join(opts)}"
        for what, table in tables.items()
        for kind, opts in sorted(table.items())
    ]


def plan(spec: BuildSpec) -> Plan:
    """Resolve `spec` (checks the tree, the flavor, the compilers and the commit)."""
    src = SourceSpec.parse(spec)
    require_tree(spec.engine, src.path)
    family = FAMILY[spec.engine]
    if src.ref is None:
        early_checks(spec, src.path, family)
    # a lab's flavor travels as the JSON of its normalized recipe (lab_flavors)
    how = cast(Recipe, json.loads(spec.recipe)) if spec.recipe else recipe(spec.engine, src.flavor)
    compilers = {"cc": key.find_compiler(how.get("cc", ""), "CC", "gcc")}
    if family != "postgres":
        compilers["cxx"] = key.find_compiler(how.get("cxx", ""), "CXX", "g++")
        cmake_tools(family)
    commit, subject, digested = "", "", ""
    where: TreeInputs
    if src.ref is not None:
        commit, subject = tree.resolve_commit(src.path, src.ref)
        subs = tree.submodules_at(src.path, commit)
        where = {"commit": commit, "submodules": {s.path: s.commit for s in subs}}
        subdir = tree.checkout_prefix(src.path)
        if subdir:  # a subdirectory of the checkout: its files only
            where["subdir"] = subdir
    else:
        found = worktree.digest(src.path)
        where, digested = {"digest": found.digest}, found.said()
    inputs = key.inputs(
        spec.engine, family, where, src.flavor, how, compilers, fixed_options(family)
    )
    return Plan(
        spec,
        src,
        family,
        how,
        compilers["cc"],
        compilers.get("cxx", ""),
        commit,
        subject,
        inputs,
        key.cache_key(inputs),
        digested,
    )


def early_checks(spec: BuildSpec, path: Path, family: str) -> None:
    """What a tree built as it is on disk must be, said before anything is compiled:
    its git submodules checked out (a build would otherwise stop deep in cmake, or a
    project's cmake would fetch them into the user's checkout), a RocksDB tree new
    enough for its cmake, and a MariaDB tree for mariadb@src:."""
    missing = tree.uninitialised(path)
    if missing:
        raise BuildNotFound(
            f"{spec}: submodule(s) {', '.join(missing)} not checked out in {path}; run "
            f"`git -C {shlex.quote(str(path))} submodule update --init --recursive` "
            "(or build a commit: #REF exports them from their repositories)"
        )
    if family == "rocksdb":
        rocksdb_build.check_tree(path)
    kind_check(spec, path, family)


def kind_check(spec: BuildSpec, path: Path, family: str) -> None:
    """mariadb@src: builds MariaDB trees only: another is refused before compiling."""
    if spec.engine == "mariadb" and family == "mysql":
        kind, why = cmake.kind_evidence(path)
        if kind != "mariadb":
            raise BuildNotFound(
                f"{spec}: {path} is a {cmake.KIND_NAMES[kind]} tree ({why}), not MariaDB's; "
                "write mysql@src:..."
            )


def cmake_tools(family: str) -> None:
    """What a cmake family's build needs beyond the compilers; BuildNotFound naming
    the missing ones."""
    needed = ("cmake", "bison") if family == "mysql" else ("cmake",)
    missing = [tool for tool in needed if shutil.which(tool) is None]
    if missing:
        target = "mariadb-source" if family == "mysql" else "rocksdb-source"
        raise BuildNotFound(
            f"building {family} trees from source needs {', '.join(missing)} on PATH "
            f"(apt-get install {' '.join(missing)}; `make {target}` installs them with the "
            "libraries the build looks for)"
        )


def why(spec: BuildSpec) -> BuildWhy:
    """What `fetch --why` prints: the key, whether it is built, its inputs, and what
    the digest of a tree on disk read and left out."""
    p = plan(spec)
    cached = read_spec(p.final) is not None
    out: BuildWhy = {"key": p.key, "path": str(p.final), "cached": cached, "inputs": p.inputs}
    if p.digested:
        out["digested"] = p.digested
    return out


def check_packages(p: Plan, src: Path) -> None:
    """BuildNotFound naming the packages whose headers the build's compiler does not
    find (needs.py), before anything is configured; `src` is the tree to build."""
    if p.family == "rocksdb":
        needs.check(str(p.spec), "rocksdb", p.cxx, needs.ROCKSDB)
    elif p.family == "postgres":
        needs.check(str(p.spec), "postgres", p.cc, needs.POSTGRES)
    elif cmake.tree_kind(src) == "mariadb":
        needs.check(str(p.spec), "mariadb", p.cxx, needs.MARIADB)
    else:
        needs.check(str(p.spec), "mysql", p.cxx, needs.MYSQL)


def fetch(spec: BuildSpec) -> Build:
    """Build `spec` (or find it in the cache)."""
    p = plan(spec)
    final = p.final
    hit = read_spec(final) is not None
    record = install(final, lambda tmp: _build(p, tmp))
    identity = {
        "source": "src",
        "tree": str(p.src.path),
        "ref": p.src.ref or "",
        "commit": p.commit,
        "subject": p.subject,
        "submodules": json.dumps(p.inputs["tree"].get("submodules", {}), sort_keys=True),
        "tree_id": p.commit or "tree-" + str(p.inputs["tree"].get("digest", "")),
        "digested": p.digested,
        "flavor": p.src.flavor,
        "recipe": json.dumps(p.how, sort_keys=True),
        "compiler": p.inputs["compilers"]["cc"]["version"],
        "cache_key": p.key,
        "build_s": record.get("build_s", ""),
        "ccache": record.get("ccache", ""),
        "patches": record.get("patches", ""),
        "cache_hit": "yes" if hit else "no",
        "path": str(final),
    }
    if "cxx" in p.inputs["compilers"]:
        identity["cxx_compiler"] = p.inputs["compilers"]["cxx"]["version"]
    if p.family == "rocksdb":
        library = rocksdb_build.installed_library(final)
        # the library's own word first; else the version the tree's header stated, and
        # the identity says which
        stated = rocksdb.probe(library)
        identity["version_from"] = (
            "the library (a scratch database's OPTIONS)" if stated else "the tree's version.h"
        )
        version = stated or rocksdb.library_version(
            library, spec, fallback=record.get("version") or None
        )
        return rocksdb.make_build(spec, library, version, identity)
    version = _mysql_version(spec, final) if p.family == "mysql" else postgres_version(final)
    identity["version_string"] = version
    return Build(spec, final, version, identity)


def _mysql_version(spec: BuildSpec, basedir: Path) -> str:
    line, version = mysql.server_version(basedir, str(spec))
    if spec.engine == "mariadb" and not version.is_mariadb:
        raise BuildNotFound(
            f"{spec}: the tree built {version}, not MariaDB ({line!r}); write mysql@src:..."
        )
    return line


def _build(p: Plan, tmp: Path) -> dict[str, str]:
    """Configure, compile and install the tree into `tmp` (to be renamed to the key's
    directory), its key's inputs written beside it."""
    final = p.final
    work = cache_root() / p.spec.engine / "src-work" / final.name
    shutil.rmtree(work, ignore_errors=True)
    make_dirs(work)
    logs = cache_root() / p.spec.engine / "logs"
    make_dirs(logs)
    log = logs / f"{final.name}.log"
    log.write_text("")  # this attempt's output only: its error line is the one reported
    started = time.monotonic()
    ccache = shutil.which("ccache")
    try:
        src, chosen = _tree(p, work, log)
        if p.commit:  # what early_checks says of a tree on disk, of the commit's files
            kind_check(p.spec, src, p.family)
        version = tree_version(p.spec.engine, src)
        check_packages(p, src)
        _compile(p, ccache, src, work, tmp, log)
        prefix = PG_PREFIX if p.family == "postgres" else final
        staged = tmp / str(prefix).lstrip("/")
        if staged.is_dir():  # make install with DESTDIR: the prefix's path under tmp
            for entry in staged.iterdir():
                entry.rename(tmp / entry.name)
            shutil.rmtree(tmp / str(prefix).lstrip("/").split("/")[0])
    finally:
        shutil.rmtree(work, ignore_errors=True)
    (tmp / key.INPUTS_FILE).write_text(json.dumps(p.inputs, indent=2, sort_keys=True) + "\n")
    return {
        "spec": str(p.spec),
        "source": "src",
        "build_s": f"{time.monotonic() - started:.1f}",
        "ccache": "yes" if ccache else "no",
        "patches": ", ".join(Path(x["file"]).name for x in chosen),
        "version": ".".join(map(str, version)) if version else "",
        "log": str(log),
    }


def writes_into_tree(p: Plan) -> str:
    """Why the build would write into its source tree ("" when it writes only into its
    build directory): Percona Server's MyRocks cmake writes
    storage/rocksdb/rocksdb/util/build_version.cc into the tree."""
    if p.family == "mysql" and p.how.get("myrocks") and cmake.tree_kind(p.src.path) == "percona":
        return "Percona Server's MyRocks writes util/build_version.cc into its tree"
    return ""


def _tree(p: Plan, work: Path, log: Path) -> tuple[Path, list[Patch]]:
    """The tree to build and the patches applied to it: the commit's files (and its
    submodules') exported into `work`, or the user's tree itself, or a copy of its
    source files (worktree.copy: what its digest read) when patches apply or the build
    writes into its tree (writes_into_tree): the user's tree, and its digest, stay as
    they are."""
    src = p.src.path
    if p.commit:
        src = work / "src"
        src.mkdir()
        tree.export(p.src.path, p.commit, src)
    chosen = select_patches(p.spec, p.how, src)
    if not p.commit and (chosen or writes_into_tree(p)):
        src = work / "src"
        worktree.copy(p.src.path, src)
    for patch in chosen:
        name = Path(patch["file"]).name
        args = ["patch", "-p1", "--batch", "--forward", "-i", patch["file"]]
        _step(f"patch {name}", args, src, dict(os.environ), log, p.spec)
    return src, chosen


def build_environment(work: Path, ccache: str | None) -> dict[str, str]:
    """The environment of every build step: the variables the key holds (key.BUILD_ENV)
    and those that only say where things are (PASSED_ENV), nothing else (so no make's
    own variables, no COPT or PROFILE a PostgreSQL make would add to CFLAGS, no
    CMAKE_TOOLCHAIN_FILE), and ccache's cache beside the builds. Its base directory is
    the work directory's parent and the current directory is not hashed, so two builds
    of the same files in different work directories share compiled objects (the debug
    info's directory names are the first build's; nothing reads them after the work
    directory goes)."""
    env = {k: os.environ[k] for k in (*PASSED_ENV, *key.BUILD_ENV) if k in os.environ}
    # MariaDB's older trees ask git whether cmake may update submodules: no
    env |= {
        "GIT_CONFIG_COUNT": "1",
        "GIT_CONFIG_KEY_0": "cmake.update-submodules",
        "GIT_CONFIG_VALUE_0": "no",
    }
    if ccache:
        env["CCACHE_DIR"] = str(cache_root() / "ccache")
        env["CCACHE_BASEDIR"] = str(work.parent)
        env["CCACHE_NOHASHDIR"] = "1"
    return env


def _compile(p: Plan, ccache: str | None, src: Path, work: Path, tmp: Path, log: Path) -> None:
    """The family's steps: configure, make on every core and make install (PostgreSQL),
    or cmake, cmake --build and cmake --install (the cmake families), into tmp."""
    build = work / "build"
    build.mkdir()
    env = build_environment(work, ccache)
    jobs = os.cpu_count() or 1
    steps: list[tuple[str, list[str], Path]]
    if p.family == "rocksdb":
        steps = rocksdb_build.build_steps(src, build, tmp, p.how, p.cc, p.cxx, ccache, jobs)
    elif p.family == "mysql":
        # cmake builds and installs with the generator it configured (CMAKE_GENERATOR,
        # if set, may be Ninja): never a hard-coded make
        steps = [
            ("cmake", cmake.cmake_command(src, p.final, p.how, p.cc, p.cxx, ccache, env), build),
            ("build", ["cmake", "--build", ".", "-j", str(jobs)], build),
            ("install", ["cmake", "-E", "env", f"DESTDIR={tmp}", "cmake", "--install", "."], build),
        ]
    else:
        env["CC"] = f"{ccache} {p.cc}" if ccache else p.cc
        env["CFLAGS"] = p.how["cflags"]
        if p.how["ldflags"]:
            env["LDFLAGS"] = p.how["ldflags"]
        configure = [str(src / "configure"), f"--prefix={PG_PREFIX}", *CONFIGURE_FIXED]
        steps = [
            ("configure", [*configure, *p.how.get("configure", [])], build),
            ("make", ["make", f"-j{jobs}", PG_RPATH], build),
            ("make install", ["make", "install", f"DESTDIR={tmp}", PG_RPATH], build),
        ]
    with open(log, "a") as out:
        out.write(f"# {p.spec}\n# key {p.key}\n")
        out.write("".join(f"# {what}: {' '.join(args)}\n" for what, args, _ in steps))
    for what, args, cwd in steps:
        _step(what, args, cwd, env, log, p.spec)


def _step(
    what: str, args: list[str], cwd: Path, env: dict[str, str], log: Path, spec: BuildSpec
) -> None:
    with open(log, "a") as out:
        out.write(f"\n# {what}\n")
        out.flush()
        returncode = _run_group(args, cwd, env, out)
    if returncode != 0:
        raise ProvisionError(
            f"{spec}: {what} failed (exit {returncode}): {last_error(log)}; "
            f"the whole output is in {log}"
        )


def _run_group(args: list[str], cwd: Path, env: dict[str, str], out: IO[str]) -> int:
    """Runs one build command in a process group of its own, and takes the whole group
    down when we are interrupted (Ctrl-C, SIGTERM, any error while waiting): make's
    compilers would otherwise go on for minutes after dbregress is gone (a SIGTERM to
    `dbregress fetch` once left cmake and two clang++ running)."""
    proc = subprocess.Popen(
        args, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
    )
    try:
        return proc.wait()
    except BaseException:
        _kill_group(proc)
        raise


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    for sig, wait_s in ((signal.SIGTERM, 10.0), (signal.SIGKILL, 10.0)):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)
        try:
            proc.wait(timeout=wait_s)
            break
        except subprocess.TimeoutExpired:
            continue
    # the group's other members (make's children) may outlive its leader by a moment
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)


def last_error(log: Path) -> str:
    """The line of the log that says what went wrong: the first `error:` (configure's,
    or the compiler's first, the cause of those after it) or cmake's first `CMake Error`
    with its message, else the last line that mentions an error (make's `*** ... Error
    2`), else the last line."""
    lines = [ln.strip() for ln in log.read_text(errors="replace").splitlines() if ln.strip()]
    lines = [ln for ln in lines if not ln.startswith("# ")]  # our own header lines
    for i, line in enumerate(lines):
        if line.startswith("CMake Error") and i + 1 < len(lines):
            # cmake's message is on the lines after its `CMake Error at FILE:LINE`
            return f"{line} {lines[i + 1]}"[-300:]
        if "error:" in line.lower():
            return line[-300:]
    for line in lines:  # make's own reason: `*** No rule to make target ...`
        if "*** " in line and not re.search(r"Error \d+|Waiting for unfinished", line):
            return line[-300:]
    for line in reversed(lines):
        if "error" in line.lower():
            return line[-300:]
    return lines[-1][-300:] if lines else "no output"
