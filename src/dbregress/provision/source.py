"""Builds from a source tree: `postgres@src:PATH[#REF][+FLAVOR]`.

PATH is a PostgreSQL source tree: a git checkout or an unpacked tarball (Debian's
`apt-get source postgresql-15` gives one). REF, a commit, tag or branch of a git
checkout, builds that commit: its files are taken with `git archive` into a directory
of dbregress's own, so the user's checkout, index and worktree list are never touched.
Without REF the tree is built as it is on disk, uncommitted changes included. FLAVOR
names a compile recipe of flavors.toml (default `rel`).

The build runs out of tree (configure in a build directory of its own, `make` on every
core, through ccache when it is installed, its cache kept beside the builds), installs
with DESTDIR into a temporary directory and is renamed into the build cache under a key
of engine, tree, flavor, recipe and compiler version (cache.py): a second request is a
cache hit that runs no compiler, and a failed build leaves nothing under the key. Its
output goes to a log file; a failure names the log and the first error line. The Build's
identity records the tree, the commit, the flavor's recipe, the compiler and the time
the build took.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import time
import tomllib
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from dbregress.errors import BuildNotFound, ProvisionError
from dbregress.provision import Build, BuildSpec
from dbregress.provision.cache import cache_root, install, make_dirs, read_spec
from dbregress.provision.local import postgres_version

PREFIX = "src:"
DEFAULT_FLAVOR = "rel"
# Engines whose trees this module builds (the MySQL family and RocksDB: not yet).
BUILDERS = ("postgres",)
_FLAVOR = re.compile(r"^[A-Za-z0-9_]+$")
# Files of a PostgreSQL source tree.
POSTGRES_TREE = ("configure", "src/backend/main/main.c")
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
        if plus and "/" not in tail and _FLAVOR.match(tail):
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
    return BuildSpec(spec.engine, str(SourceSpec.parse(spec)))


def flavors(engine: str) -> dict[str, dict[str, Any]]:
    """The flavors shipped for `engine` (flavors.toml)."""
    text = resources.files("dbregress.provision").joinpath("flavors.toml").read_text()
    return dict(tomllib.loads(text).get(engine, {}))


def recipe(engine: str, flavor: str) -> dict[str, Any]:
    known = flavors(engine)
    if flavor not in known:
        raise BuildNotFound(
            f"unknown flavor {flavor!r} for {engine}; known: {', '.join(sorted(known))} "
            "(docs/engines.md, Builds from source)"
        )
    r = known[flavor]
    return {
        "cflags": str(r.get("cflags", "-O2")),
        "ldflags": str(r.get("ldflags", "")),
        "configure": [str(o) for o in r.get("configure", [])],
    }


def _run(args: list[str], cwd: Path | None = None, **kw: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, cwd=cwd, capture_output=True, text=True, check=False, **kw)


def compiler() -> tuple[str, str]:
    """(the C compiler, its version line); BuildNotFound when there is none."""
    cc = os.environ.get("CC") or "gcc"
    path = shutil.which(cc)
    if path is None:
        raise BuildNotFound(
            f"building from source needs a C compiler; {cc!r} is not on PATH "
            "(apt-get install gcc, or set CC)"
        )
    done = _run([path, "--version"])
    return path, (done.stdout.splitlines() or [cc])[0].strip()


def require_tree(engine: str, path: Path) -> None:
    if engine not in BUILDERS:
        raise BuildNotFound(
            f"{engine}@src: building {engine} from source is not supported yet; "
            f"source builds: {', '.join(BUILDERS)} (or give a build you made: "
            f"{engine}@/path/to/basedir)"
        )
    if not path.is_dir():
        raise BuildNotFound(f"{engine}@src:{path}: no such directory")
    missing = [f for f in POSTGRES_TREE if not (path / f).is_file()]
    if missing:
        raise BuildNotFound(
            f"{engine}@src:{path}: not a PostgreSQL source tree (no {', '.join(missing)}); "
            "give the top of the tree (where `configure` is)"
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
    how = recipe(spec.engine, src.flavor)
    cc, cc_version = compiler()
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
        "cache_hit": "yes" if hit else "no",
        "path": str(final),
        "version_string": version,
    }
    return Build(spec, final, version, identity)


def _build(
    spec: BuildSpec,
    src: SourceSpec,
    how: dict[str, Any],
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
    try:
        tree = src.path
        if commit:
            tree = work / "src"
            tree.mkdir()
            _export(src.path, commit, tree, log)
        build = work / "build"
        build.mkdir()
        env = dict(os.environ)
        ccache = shutil.which("ccache")
        env["CC"] = f"{ccache} {cc}" if ccache else cc
        if ccache:
            env["CCACHE_DIR"] = str(cache_root() / "ccache")
            env["CCACHE_BASEDIR"] = str(work.parent)
        env["CFLAGS"] = how["cflags"]
        if how["ldflags"]:
            env["LDFLAGS"] = how["ldflags"]
        jobs = str(os.cpu_count() or 1)
        configure = [
            str(tree / "configure"),
            f"--prefix={final}",
            "--without-icu",
            "--disable-nls",
            *how["configure"],
        ]
        with open(log, "a") as out:
            out.write(f"# {spec}: {' '.join(configure)}\n# CC={env['CC']} CFLAGS={how['cflags']}\n")
        _step("configure", configure, build, env, log, spec)
        _step("make", ["make", f"-j{jobs}"], build, env, log, spec)
        _step("make install", ["make", "install", f"DESTDIR={tmp}"], build, env, log, spec)
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
        "log": str(log),
    }


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
    or the compiler's first, the cause of those after it), else the last line that
    mentions an error (make's `*** ... Error 2`), else the last line."""
    lines = [ln.strip() for ln in log.read_text(errors="replace").splitlines() if ln.strip()]
    for line in lines:
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
