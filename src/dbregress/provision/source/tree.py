"""Git and tree reading for source builds: a commit's files, its git submodules'
included, exported without touching the user's checkout; a digest of a tree built as it
is on disk; and the commits between two refs, across release branches too.

Every git command here only reads (rev-parse, ls-tree, cat-file, config --blob,
archive, log, rev-list, merge-base), with optional locks off, so the user's checkout,
index and worktree list stay as they were: a bisection may export hundreds of commits
from a tree the user is working in."""

from __future__ import annotations

import hashlib
import os
import shlex
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from itertools import pairwise
from pathlib import Path
from typing import Any

from dbregress.model.errors import BuildNotFound, ProvisionError

# Directories left out of a tree's content hash: version control and build leftovers.
SKIP_DIRS = frozenset({".git", ".hg", ".svn", "autom4te.cache"})
GITLINK = "160000"  # the mode `git ls-tree` gives a submodule's commit
_BLOCK = 1 << 20
# A user's environment may point git elsewhere (a hook, an IDE's terminal): each
# command here names its repository itself.
_GIT_LOCATION = ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_COMMON_DIR", "GIT_PREFIX")


def _run(args: list[str], cwd: Path | None = None, **kw: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        args, cwd=cwd, capture_output=True, text=True, check=False, env=_env(), **kw
    )


def _env() -> dict[str, str]:
    # GIT_OPTIONAL_LOCKS=0: no index refresh written back while we only read.
    env = {k: v for k, v in os.environ.items() if k not in _GIT_LOCATION}
    return {**env, "GIT_OPTIONAL_LOCKS": "0"}


@dataclass(frozen=True)
class Commit:
    id: str
    subject: str
    date: str  # author date, ISO 8601


@dataclass(frozen=True)
class Submodule:
    """A submodule of an exported commit: where it sits in the exported tree, the
    commit its superproject records, and its name and url from that commit's own
    .gitmodules (the name is the path when .gitmodules does not list it)."""

    path: str
    commit: str
    name: str
    url: str


@dataclass(frozen=True)
class _Repo:
    """A repository read by its git directory: `git_dir` is what --git-dir takes (a
    linked worktree's own one), `common_dir` holds the objects and refs, `worktree` is
    its checkout when it has one (where nested submodules may be checked out)."""

    git_dir: Path
    common_dir: Path
    worktree: Path | None

    def git(self, *args: str) -> subprocess.CompletedProcess[str]:
        # Run from inside the git directory: git then sees no worktree prefix, so
        # ls-tree and archive always start at the commit's top tree.
        return _run(["git", f"--git-dir={self.git_dir}", *args], cwd=self.git_dir)

    def has(self, commit: str) -> bool:
        return self.git("cat-file", "-e", f"{commit}^{{commit}}").returncode == 0


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


def subject_and_date(path: Path, commit: str) -> tuple[str, str]:
    done = _run(["git", "-C", str(path), "log", "-1", "--format=%s%x09%aI", commit])
    subject, _, date = done.stdout.strip().partition("\t")
    return subject, date


def _top(path: Path) -> tuple[_Repo, str]:
    """The repository of the checkout at `path` (a linked worktree's `.git` is a file:
    git says where its directories are) and `path`'s place inside the checkout."""
    done = _run(
        [
            "git",
            "-C",
            str(path),
            "rev-parse",
            "--git-dir",
            "--git-common-dir",
            "--show-toplevel",
            "--show-prefix",
        ]
    )
    lines = done.stdout.splitlines()
    if done.returncode != 0 or len(lines) < 3:
        raise BuildNotFound(f"src:{path}: {path} is not a git checkout")
    git_dir, common = ((path / line).resolve() for line in lines[:2])
    toplevel = Path(lines[2]).resolve()
    prefix = lines[3].strip() if len(lines) > 3 else ""
    return _Repo(git_dir, common, toplevel), prefix


def checkout_prefix(path: Path) -> str:
    """Where `path` sits inside its git checkout ("" at the top, else "dir/"): a build
    of a subdirectory at a commit is that subdirectory's files, so its key says which."""
    return _top(path)[1]


def _module_repo(git_dir: Path, worktree: Path | None) -> _Repo | None:
    """The repository whose git directory is `git_dir`, if there is one."""
    if not (git_dir / "HEAD").is_file():
        return None
    common = git_dir
    pointer = git_dir / "commondir"  # a linked worktree's git directory names its common one
    if pointer.is_file():
        common = (git_dir / pointer.read_text().strip()).resolve()
    return _Repo(git_dir, common, worktree)


def _checked_out(worktree: Path) -> Path | None:
    """The git directory of a checkout's `.git`: the directory itself, or the one a
    `gitdir: ...` file names (how `git submodule` and `git worktree` leave them)."""
    dotgit = worktree / ".git"
    if dotgit.is_dir():
        return dotgit
    if dotgit.is_file():
        text = dotgit.read_text(errors="replace").strip()
        if text.startswith("gitdir:"):
            return (worktree / text.removeprefix("gitdir:").strip()).resolve()
    return None


def _candidates(parent: _Repo, name: str, path: str) -> list[_Repo]:
    """Where a submodule's repository may be: under the superproject's git directory
    (modules/NAME, where `git submodule update` keeps it; a linked worktree's own one
    first) or behind the `.git` of its checkout."""
    checkout = parent.worktree / path if parent.worktree else None
    checked = _checked_out(checkout) if checkout else None
    sub_tree = checkout if checked else None
    dirs = [parent.git_dir / "modules" / name, parent.common_dir / "modules" / name]
    if checked:
        dirs.append(checked)
    found: list[_Repo] = []
    for d in dict.fromkeys(dirs):
        repo = _module_repo(d, sub_tree)
        if repo is not None:
            found.append(repo)
    return found


def _gitlinks(repo: _Repo, commit: str) -> list[tuple[str, str]]:
    """(path, commit) of every submodule the commit's tree records, top tree relative."""
    done = repo.git("ls-tree", "-r", "-z", "--full-tree", commit)
    if done.returncode != 0:
        raise ProvisionError(
            f"git ls-tree {commit[:12]} in {repo.git_dir} failed: {done.stderr.strip()[-300:]}"
        )
    links = []
    for entry in done.stdout.split("\0"):
        meta, _, path = entry.partition("\t")
        mode, _, rest = meta.partition(" ")
        if mode == GITLINK:
            links.append((path, rest.rpartition(" ")[2]))
    return links


def _modules(repo: _Repo, commit: str) -> dict[str, tuple[str, str]]:
    """path -> (name, url) from the commit's own .gitmodules (not the checkout's: the
    names and urls may have changed since)."""
    done = repo.git("config", "-z", "--blob", f"{commit}:.gitmodules", "--list")
    if done.returncode != 0:
        return {}  # no .gitmodules at that commit
    keys: dict[str, dict[str, str]] = {}
    for item in done.stdout.split("\0"):
        key, _, value = item.partition("\n")
        if not key.startswith("submodule."):
            continue
        name, _, field = key.removeprefix("submodule.").rpartition(".")
        keys.setdefault(name, {})[field] = value
    return {v["path"]: (name, v.get("url", "")) for name, v in keys.items() if "path" in v}


def _fix(repo: Path, commit: str, full: str, top: str, sha: str, found: bool) -> BuildNotFound:
    update = (
        f"git -C {shlex.quote(str(repo))} submodule update --init --recursive {shlex.quote(top)}"
    )
    where = f"src:{repo}#{commit[:12]}: submodule {full} (at commit {sha})"
    if not found:
        return BuildNotFound(
            f"{where} is not in {repo}: it was never initialised; run `{update}` and try again"
        )
    return BuildNotFound(
        f"{where}: its repository lacks that commit (fetched before it was made); "
        f"run `git -C {shlex.quote(str(repo / full))} fetch` (or `{update}`) and try again"
    )


def _walk(
    repo: Path, parent: _Repo, commit: str, prefix: str, top: str | None, within: str = ""
) -> list[tuple[Submodule, _Repo]]:
    """Every submodule under `parent` at `commit`, nested ones after their own, each
    with the repository that holds its recorded commit. `prefix` is where `parent` sits
    in the exported tree; `top` is the top-level submodule a fix command names; only
    those under `within` count (`repo` a directory inside its checkout)."""
    out: list[tuple[Submodule, _Repo]] = []
    names = _modules(parent, commit)
    for path, sha in _gitlinks(parent, commit):
        if not path.startswith(within):
            continue
        name, url = names.get(path, (path, ""))
        full = prefix + path.removeprefix(within)
        candidates = _candidates(parent, name, path)
        holder = next((c for c in candidates if c.has(sha)), None)
        if holder is None:
            raise _fix(repo, commit, full, top or full, sha, bool(candidates))
        out.append((Submodule(full, sha, name, url), holder))
        out += _walk(repo, holder, sha, full + "/", top or full)
    return out


def _submodules(repo: Path, commit: str) -> tuple[_Repo, str, list[tuple[Submodule, _Repo]]]:
    top, prefix = _top(repo)
    return top, prefix, _walk(repo, top, commit, "", None, prefix)


def submodules_at(repo: Path, commit: str) -> list[Submodule]:
    """The submodules of `commit` in the checkout at `repo`, nested ones included with
    their full path, at the commits recorded; BuildNotFound (with the command that fixes
    it) when one's repository is missing or lacks its commit."""
    return [s for s, _ in _submodules(repo, commit)[2]]


def export(repo: Path, commit: str, into: Path) -> list[Submodule]:
    """The files of `commit` into `into`, then every submodule's (recursively) at the
    commit the superproject records, read from the submodule's local repository.
    Returns the submodules exported."""
    top, prefix, found = _submodules(repo, commit)
    into.mkdir(parents=True, exist_ok=True)
    treeish = f"{commit}:{prefix.rstrip('/')}" if prefix else commit
    _archive(repo, commit, top, treeish, into)
    base = into.resolve()
    for sub, holder in found:
        dest = (into / sub.path).resolve()
        if not dest.is_relative_to(base):  # git refuses such paths; never write outside
            raise ProvisionError(f"src:{repo}#{commit[:12]}: submodule path {sub.path!r}")
        dest.mkdir(parents=True, exist_ok=True)
        _archive(repo, commit, holder, sub.commit, dest, sub.path)
    return [s for s, _ in found]


def _archive(
    repo: Path, commit: str, source: _Repo, treeish: str, into: Path, what: str = ""
) -> None:
    """git archive piped to tar: nothing of the checkout moves."""
    archive = subprocess.Popen(
        ["git", f"--git-dir={source.git_dir}", "archive", "--format=tar", treeish],
        cwd=source.git_dir,
        env=_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    untar = _run(["tar", "-x", "-C", str(into)], stdin=archive.stdout)
    _, err = archive.communicate()
    if archive.returncode != 0 or untar.returncode != 0:
        of = f" of submodule {what}" if what else ""
        raise ProvisionError(
            f"src:{repo}#{commit[:12]}: git archive{of} failed: "
            f"{(err.decode(errors='replace') or untar.stderr).strip()[-300:]}"
        )


def tree_digest(path: Path) -> str:
    """A digest of a tree's files (names, exec bits and contents) and symlinks (names
    and targets, never followed), version control and autoconf caches left out: the
    identity of a tree built as it is on disk. A tree without symlinks digests as it
    did before symlinks counted."""
    h = hashlib.sha256()
    try:
        _digest_dir(h.update, str(path), "")
    except OSError as e:
        raise ProvisionError(f"{path}: cannot read {e.filename}: {e.strerror}") from None
    return h.hexdigest()


def _digest_dir(update: Callable[[bytes], object], top: str, rel: str) -> None:
    # Files and symlinks of a directory in name order, then its subdirectories in name
    # order, depth first: the order os.walk with sorted names gave.
    with os.scandir(os.path.join(top, rel) if rel else top) as it:
        entries = sorted(it, key=lambda e: e.name)
    subdirs = []
    for e in entries:
        name = os.fsencode(rel + e.name)
        if e.is_symlink():
            update(name + b"\0symlink\0" + os.fsencode(os.readlink(e.path)) + b"\0")
        elif e.is_dir():
            if e.name not in SKIP_DIRS:
                subdirs.append(e.name)
        elif e.is_file():
            update(name + b"\0" + str(e.stat().st_mode & 0o111).encode() + b"\0")
            with open(e.path, "rb") as fh:
                for block in iter(partial(fh.read, _BLOCK), b""):
                    update(block)
            update(b"\0")
    for d in subdirs:
        _digest_dir(update, top, f"{rel}{d}/")


def commits_between(
    path: Path, good: str, bad: str, first_parent: bool = True
) -> tuple[list[Commit], str | None]:
    """The commits from `good` to `bad` of the git checkout at `path`, both included,
    oldest first: `git rev-list --reverse good..bad` (first-parent by default: the
    merges of a main line, not every commit of the branches they bring). When `good`
    is on another branch (two release series), the range starts at their merge base
    and the second value says so; otherwise it is None. Every commit (first_parent
    False) only when they form a chain, each one's only parent the one before it: a
    range with merges is a DAG, and neighbours in a date-ordered list of it need not be
    parent and child (BuildNotFound says so in one line)."""
    g, _ = resolve_commit(path, good)
    b, _ = resolve_commit(path, bad)
    if g == b:
        raise BuildNotFound(f"src:{path}: {good} and {bad} are the same commit")
    start, note = _start(path, good, bad, g, b)
    # --ancestry-path: only commits that contain the start (GOOD merged into the main
    # line later must not be paired with the main line's commits from before the merge)
    args = ["git", "-C", str(path), "rev-list", "--reverse", "--ancestry-path"]
    args.append("--format=%H%x09%P%x09%aI%x09%s")
    done = _run([*args, *(["--first-parent"] if first_parent else []), f"{start}..{b}"])
    if done.returncode != 0:
        raise BuildNotFound(f"src:{path}: git rev-list failed: {done.stderr.strip()[-300:]}")
    out = [Commit(start, *subject_and_date(path, start))]
    parents: dict[str, list[str]] = {}
    for line in done.stdout.splitlines():
        if line.startswith("commit "):
            continue
        sha, up, date, subject = [*line.split("\t", 3), "", "", ""][:4]
        parents[sha] = up.split()
        out.append(Commit(sha, subject, date))
    if not first_parent:
        _check_chain(path, good, bad, out, parents)
    return out, note


def _check_chain(
    path: Path, good: str, bad: str, commits: list[Commit], parents: dict[str, list[str]]
) -> None:
    """--all-commits: the commits form a chain, or BuildNotFound in one line."""
    merges = sum(len(parents[c.id]) > 1 for c in commits[1:])
    broken = sum(parents[c.id] != [p.id] for p, c in pairwise(commits))
    if broken:
        raise BuildNotFound(
            f"src:{path}: --all-commits: {good}..{bad} is not a chain ({merges} merge(s), "
            f"{broken} commit(s) whose parent is not the one before it): bisecting a DAG "
            "is not supported; bisect the first-parent line (drop --all-commits), and a "
            "merge it names says which branch to bisect next"
        )


def parents_of(path: Path, commit: str) -> list[str]:
    """The parents of `commit` in the git checkout at `path` (first parent first)."""
    done = _run(["git", "-C", str(path), "rev-list", "--parents", "-n", "1", commit])
    return done.stdout.split()[1:] if done.returncode == 0 else []


def branch_point(path: Path, a: str, b: str) -> str | None:
    """The merge base of two commits (`git merge-base`), None when they share none."""
    done = _run(["git", "-C", str(path), "merge-base", a, b])
    return done.stdout.strip() or None if done.returncode == 0 else None


def _start(path: Path, good: str, bad: str, g: str, b: str) -> tuple[str, str | None]:
    """Where the range begins: `good` when it is an ancestor of `bad`, else their merge
    base (with a sentence saying so)."""

    def ancestor(a: str, of: str) -> bool:
        return _run(["git", "-C", str(path), "merge-base", "--is-ancestor", a, of]).returncode == 0

    if ancestor(g, b):
        return g, None
    if ancestor(b, g):
        raise BuildNotFound(
            f"src:{path}: {bad} is an ancestor of {good}; give the good (older) commit first"
        )
    base = _newest_shared(path, g, b)
    if base is None:
        raise BuildNotFound(
            f"src:{path}: {good} and {bad} share no history (no commit of {bad}'s line is "
            f"in {good}'s): give two commits of the same project"
        )
    subject = subject_and_date(path, base)[0]
    return base, (
        f"{good} is not an ancestor of {bad}; starting from {base[:12]} ({subject}), the "
        f"newest commit of {bad}'s first-parent line that {good} contains (where the "
        "branches part)"
    )


def _newest_shared(path: Path, g: str, b: str) -> str | None:
    """The newest commit on `b`'s first-parent line that `g` contains. Not `git
    merge-base`: when the line has merged `g`'s branch, their merge base lies on that
    branch, and the commits after it on the line would not contain it."""
    line = _run(["git", "-C", str(path), "rev-list", "--first-parent", b])
    reach = _run(["git", "-C", str(path), "rev-list", g])
    if line.returncode != 0 or reach.returncode != 0:
        return None
    ancestors = set(reach.stdout.split())
    return next((c for c in line.stdout.split() if c in ancestors), None)


def uninitialised(path: Path) -> list[str]:
    """The submodules of the git checkout `path` is in (under `path`) that are not
    checked out (`git submodule status` marks them -); [] for a tree that is not a
    git checkout or has none."""
    if shutil.which("git") is None:  # no git: the tree cannot be a checkout we read
        return []
    inside = _run(["git", "-C", str(path), "rev-parse", "--is-inside-work-tree"])
    if inside.returncode != 0 and "not a git repository" in inside.stderr:
        return []  # a tarball's tree: no submodules to check
    done = _run(["git", "-C", str(path), "submodule", "status", "--recursive", "."])
    if inside.returncode != 0 or done.returncode != 0:
        raise BuildNotFound(
            f"src:{path}: git cannot read this checkout's submodules: "
            f"{(inside.stderr or done.stderr).strip()[-300:]}"
        )
    return [
        line[1:].split()[1]
        for line in done.stdout.splitlines()
        if line.startswith("-") and len(line[1:].split()) > 1
    ]


def list_tags(path: Path, pattern: str) -> list[str]:
    """The tags of the checkout at `path` that match `pattern` (`git tag --list`), read
    from its own repository whatever GIT_DIR the caller exports; [] when git fails."""
    done = _run(["git", "-C", str(path), "tag", "--list", pattern])
    return done.stdout.split() if done.returncode == 0 else []
