"""A tree built as it is on disk (`ENGINE@src:PATH` without #REF): which of its files are
its source, their digest (the build's identity) and a copy of them.

In a git work tree the source is what git would commit: the tracked files as they are
on disk (modified ones included, deleted ones marked), the untracked files that no
.gitignore, .git/info/exclude or core.excludesFile ignores, and, recursively, the same
of every checked-out submodule. What git ignores (a `build/` directory, in-tree objects,
an in-source CMakeCache.txt) is build output: reading it would cost gigabytes and change
the digest at every rebuild, so it is left out and named (`left_out`). A tree that is
not a git work tree is digested whole (tree.tree_digest), version control and autoconf
caches aside.

Every git command here only reads, with optional locks off, as in tree.py.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from dbregress.model.errors import ProvisionError
from dbregress.provision.source import tree

GITLINK = "160000"
_BLOCK = 1 << 20
# How many of the left-out paths a build names (their number is always said).
SHOWN = 8


@dataclass(frozen=True)
class Digested:
    """A tree's digest, what was read (`how`) and what git ignored (`left_out`: paths
    relative to the tree, a wholly ignored directory as one `dir/`)."""

    digest: str
    how: str
    left_out: tuple[str, ...] = ()

    def said(self) -> str:
        """One line: what the digest read and what it left out."""
        if not self.left_out:
            return self.how
        shown = ", ".join(self.left_out[:SHOWN])
        more = f" and {len(self.left_out) - SHOWN} more" if len(self.left_out) > SHOWN else ""
        return f"{self.how}; left out as git-ignored: {shown}{more}"


def _git(path: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    env = {k: v for k, v in os.environ.items() if k not in tree._GIT_LOCATION}
    return subprocess.run(
        ["git", "-C", str(path), *args],
        capture_output=True,
        check=False,
        env={**env, "GIT_OPTIONAL_LOCKS": "0"},
    )


def is_work_tree(path: Path) -> bool:
    """Whether `path` is in a git work tree (git installed, the tree a checkout)."""
    if shutil.which("git") is None:
        return False
    done = _git(path, "rev-parse", "--is-inside-work-tree")
    return done.returncode == 0 and done.stdout.strip() == b"true"


def _split(out: bytes) -> list[bytes]:
    return [p for p in out.split(b"\0") if p]


def _listed(path: Path, *args: str) -> list[bytes]:
    done = _git(path, "ls-files", "-z", *args)
    if done.returncode != 0:
        raise ProvisionError(
            f"{path}: git ls-files failed: {done.stderr.decode(errors='replace').strip()[-300:]}"
        )
    return _split(done.stdout)


def _entries(path: Path, prefix: bytes = b"") -> Iterator[tuple[bytes, str]]:
    """(path relative to the top tree, kind) of every source file of the git work tree
    at `path`, in name order: kind is "file" (tracked or untracked, on disk), "deleted"
    (tracked, gone from disk) or "submodule" (a gitlink not checked out); a
    checked-out submodule's own files come in its place."""
    found: dict[bytes, str] = {}
    for line in _listed(path, "--stage"):
        meta, _, name = line.partition(b"\t")
        found[name] = "submodule" if meta.split(b" ")[0].decode() == GITLINK else "file"
    for name in _listed(path, "--others", "--exclude-standard"):
        found.setdefault(name, "file")
    for name in sorted(found):
        where = path / os.fsdecode(name)
        kind = found[name]
        if kind == "submodule":
            if (where / ".git").exists() and is_work_tree(where):
                yield from _entries(where, prefix + name + b"/")
                continue
        elif not os.path.lexists(where):
            kind = "deleted"
        yield prefix + name, kind


def _ignored(path: Path) -> tuple[str, ...]:
    """What git ignores under `path`, a wholly ignored directory as one `dir/`."""
    names = _listed(path, "--others", "--ignored", "--exclude-standard", "--directory")
    return tuple(sorted(os.fsdecode(n) for n in names))


def _add_file(update: Callable[[bytes], object], name: bytes, where: str) -> None:
    """A file's or symlink's part of the digest, as tree.tree_digest writes it."""
    if os.path.islink(where):
        update(name + b"\0symlink\0" + os.fsencode(os.readlink(where)) + b"\0")
        return
    if os.path.isdir(where):  # a tracked path that is now a directory
        update(name + b"\0directory\0")
        return
    update(name + b"\0" + str(os.stat(where).st_mode & 0o111).encode() + b"\0")
    with open(where, "rb") as fh:
        for block in iter(partial(fh.read, _BLOCK), b""):
            update(block)
    update(b"\0")


def digest(path: Path) -> Digested:
    """The digest of the tree at `path` as it is on disk: of a git work tree its source
    files only (the module's docstring), else every file (tree.tree_digest)."""
    if not is_work_tree(path):
        return Digested(tree.tree_digest(path), "every file and symlink")
    h = hashlib.sha256()
    try:
        for name, kind in _entries(path):
            if kind == "file":
                _add_file(h.update, name, os.path.join(path, os.fsdecode(name)))
            else:
                h.update(name + b"\0" + kind.encode() + b"\0")
    except OSError as e:
        raise ProvisionError(f"{path}: cannot read {e.filename}: {e.strerror}") from None
    how = "git work tree: tracked files as on disk and untracked files not ignored"
    return Digested(h.hexdigest(), how, _ignored(path))


def copy(path: Path, into: Path) -> None:
    """A copy of the tree's source (what `digest` reads) into `into`: the build then
    writes into the copy, never into the user's tree."""
    if not is_work_tree(path):
        shutil.copytree(path, into, symlinks=True, ignore=shutil.ignore_patterns(*tree.SKIP_DIRS))
        return
    into.mkdir(parents=True, exist_ok=True)
    for name, kind in _entries(path):
        if kind != "file":
            continue
        source, dest = path / os.fsdecode(name), into / os.fsdecode(name)
        dest.parent.mkdir(parents=True, exist_ok=True)
        if source.is_symlink():
            dest.symlink_to(os.readlink(source))
        elif source.is_file():
            shutil.copy2(source, dest)
