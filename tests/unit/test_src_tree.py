"""A commit's tree exported with its submodules (nested too, at the commits recorded,
read from the local repositories, the user's checkout untouched), tree digests that
count symlinks, and commit ranges across release branches: with real small git
repositories."""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

from dbregress.model.errors import BuildNotFound, ProvisionError
from dbregress.provision.source import tree as src_tree
from dbregress.provision.source.tree import Submodule
from tests.gitrepo import git


def commit(repo: Path, files: dict[str, str], message: str) -> str:
    for name, text in files.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(text)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", message)
    return git(repo, "rev-parse", "HEAD")


def new_repo(path: Path) -> Path:
    path.mkdir(parents=True)
    git(path, "init", "-q", "-b", "main")
    return path


@dataclass
class Projects:
    """top records middle (named `mid`) at storage/middle, middle records inner at
    deps/inner; t1 records m1 (which records i1), t2 records m2 (which records i2)."""

    top: Path
    middle: Path
    inner: Path
    t1: str
    t2: str
    m1: str
    m2: str
    i1: str
    i2: str


def make_projects(tmp_path: Path) -> Projects:
    inner = new_repo(tmp_path / "inner")
    i1 = commit(inner, {"inner.txt": "inner 1\n"}, "inner 1")
    middle = new_repo(tmp_path / "middle")
    git(middle, "submodule", "add", "-q", str(inner), "deps/inner")
    m1 = commit(middle, {"mid.txt": "mid 1\n"}, "middle 1")
    top = new_repo(tmp_path / "top")
    git(top, "submodule", "add", "-q", "--name", "mid", str(middle), "storage/middle")
    git(top, "submodule", "update", "-q", "--init", "--recursive")
    t1 = commit(top, {"top.txt": "top 1\n"}, "top 1")
    i2 = commit(inner, {"inner.txt": "inner 2\n"}, "inner 2")
    git(middle / "deps/inner", "pull", "-q", "origin", "main")
    m2 = commit(middle, {"mid.txt": "mid 2\n"}, "middle 2")
    git(top / "storage/middle", "pull", "-q", "origin", "main")
    git(top / "storage/middle", "submodule", "update", "-q", "--init", "--recursive")
    t2 = commit(top, {"top.txt": "top 2\n"}, "top 2")
    return Projects(top, middle, inner, t1, t2, m1, m2, i1, i2)


def test_export_brings_nested_submodules_at_the_recorded_commits(tmp_path: Path) -> None:
    p = make_projects(tmp_path)
    out = tmp_path / "out"
    subs = src_tree.export(p.top, p.t1, out)
    assert (out / "top.txt").read_text() == "top 1\n"
    assert (out / "storage/middle/mid.txt").read_text() == "mid 1\n"
    # the recorded (older) commits, not the checkout's current ones (m2, i2)
    assert (out / "storage/middle/deps/inner/inner.txt").read_text() == "inner 1\n"
    assert subs == [
        Submodule("storage/middle", p.m1, "mid", str(p.middle)),
        Submodule("storage/middle/deps/inner", p.i1, "deps/inner", str(p.inner)),
    ]
    assert src_tree.submodules_at(p.top, p.t1) == subs
    assert not (out / ".git").exists() and not (out / "storage/middle/.git").exists()
    newer = src_tree.export(p.top, p.t2, tmp_path / "out2")
    assert [s.commit for s in newer] == [p.m2, p.i2]
    assert (tmp_path / "out2/storage/middle/deps/inner/inner.txt").read_text() == "inner 2\n"
    # a directory inside the checkout: its part of the commit, paths relative to it
    part = src_tree.export(p.top / "storage", p.t1, tmp_path / "out3")
    assert [s.path for s in part] == ["middle", "middle/deps/inner"]
    assert (tmp_path / "out3/middle/deps/inner/inner.txt").read_text() == "inner 1\n"
    assert not (tmp_path / "out3/top.txt").exists()


def checkout_state(repo: Path) -> tuple[str, ...]:
    return (
        git(repo, "status", "--porcelain", "--ignore-submodules=none"),
        git(repo, "rev-parse", "HEAD"),
        git(repo / "storage/middle", "rev-parse", "HEAD"),
        git(repo / "storage/middle/deps/inner", "rev-parse", "HEAD"),
        git(repo, "worktree", "list", "--porcelain"),
    )


def indexes(repo: Path) -> list[tuple[int, str]]:
    """Each index file's mtime and contents (git status may rewrite one itself)."""
    found = sorted(repo.joinpath(".git").rglob("index"))
    return [(f.stat().st_mtime_ns, hashlib.sha256(f.read_bytes()).hexdigest()) for f in found]


def test_export_leaves_the_checkout_as_it_was(tmp_path: Path) -> None:
    p = make_projects(tmp_path)
    before = checkout_state(p.top)
    assert before[0] == ""
    index = indexes(p.top)
    assert len(index) == 3  # top's, middle's and inner's
    src_tree.export(p.top, p.t1, tmp_path / "out")
    assert indexes(p.top) == index
    assert checkout_state(p.top) == before
    assert (p.top / "storage/middle/mid.txt").read_text() == "mid 2\n"


def test_export_from_a_linked_worktree_reads_the_main_repository(tmp_path: Path) -> None:
    p = make_projects(tmp_path)
    wt = tmp_path / "wt"
    git(p.top, "worktree", "add", "-q", "--detach", str(wt), p.t2)
    assert (wt / ".git").is_file()
    subs = src_tree.export(wt, p.t1, tmp_path / "out")
    assert [s.commit for s in subs] == [p.m1, p.i1]
    assert (tmp_path / "out/storage/middle/deps/inner/inner.txt").read_text() == "inner 1\n"


def test_a_submodule_never_initialised_says_how_to_fix_it(tmp_path: Path) -> None:
    p = make_projects(tmp_path)
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(p.top), str(clone))
    fix = f"git -C {clone} submodule update --init --recursive storage/middle"
    with pytest.raises(BuildNotFound, match=re.escape(fix)) as e:
        src_tree.export(clone, p.t1, tmp_path / "out")
    assert f"submodule storage/middle (at commit {p.m1})" in str(e.value)
    assert "never initialised" in str(e.value)
    # the top level only: the nested one's fix is the same command, naming its top
    git(clone, "submodule", "update", "-q", "--init", "storage/middle")
    with pytest.raises(BuildNotFound, match=re.escape(fix)) as e:
        src_tree.submodules_at(clone, p.t1)
    assert "submodule storage/middle/deps/inner" in str(e.value)
    git(clone, "submodule", "update", "-q", "--init", "--recursive")
    assert [s.commit for s in src_tree.export(clone, p.t1, tmp_path / "o")] == [p.m1, p.i1]


def test_a_submodule_lacking_its_commit_says_fetch(tmp_path: Path) -> None:
    p = make_projects(tmp_path)
    unknown = commit(p.middle, {"mid.txt": "mid 3\n"}, "middle 3")  # never fetched by top
    git(p.top, "update-index", "--cacheinfo", f"160000,{unknown},storage/middle")
    git(p.top, "commit", "-qm", "top 3")
    with pytest.raises(BuildNotFound) as e:
        src_tree.export(p.top, "HEAD", tmp_path / "out")
    said = str(e.value)
    assert f"submodule storage/middle (at commit {unknown})" in said
    assert f"git -C {p.top / 'storage/middle'} fetch" in said
    assert "lacks that commit" in said
    with pytest.raises(ProvisionError, match="ls-tree"):
        src_tree.export(p.top, "0" * 40, tmp_path / "out")


def old_digest(path: Path) -> str:
    """The digest before symlinks counted (what a symlink-free tree still gets)."""
    h = hashlib.sha256()
    for dirpath, dirnames, filenames in os.walk(path):
        dirnames[:] = sorted(d for d in dirnames if d not in src_tree.SKIP_DIRS)
        for name in sorted(filenames):
            f = Path(dirpath) / name
            if f.is_symlink() or not f.is_file():
                continue
            h.update(f"{f.relative_to(path)}\0{f.stat().st_mode & 0o111}\0".encode())
            h.update(f.read_bytes())
            h.update(b"\0")
    return h.hexdigest()


def test_tree_digest_counts_symlinks_and_keeps_plain_trees_digests(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    for name in ("a.c", "b.c", "sub/z.h", "sub/deeper/y.h", ".git/HEAD", "zz/autom4te.cache/x"):
        (tree / name).parent.mkdir(parents=True, exist_ok=True)
        (tree / name).write_text(name)
    (tree / "configure").write_text("#!/bin/sh\n")
    (tree / "configure").chmod(0o755)
    plain = src_tree.tree_digest(tree)
    assert plain == old_digest(tree)
    (tree / ".git/HEAD").write_text("changed")
    assert src_tree.tree_digest(tree) == plain  # version control left out
    (tree / "configure").chmod(0o644)
    assert src_tree.tree_digest(tree) != plain  # the exec bit counts
    (tree / "configure").chmod(0o755)
    (tree / "link.h").symlink_to("a.c")
    to_a = src_tree.tree_digest(tree)
    assert to_a != plain
    (tree / "link.h").unlink()
    (tree / "link.h").symlink_to("b.c")
    assert src_tree.tree_digest(tree) not in (to_a, plain)
    (tree / "link.h").unlink()
    (tree / "dirlink").symlink_to("sub")  # a link to a directory: counted, not followed
    to_sub = src_tree.tree_digest(tree)
    (tree / "dirlink").unlink()
    (tree / "dirlink").symlink_to("sub/deeper")
    assert src_tree.tree_digest(tree) not in (to_sub, plain)
    (tree / "dirlink").unlink()
    (tree / "dangling").symlink_to("nowhere")
    assert src_tree.tree_digest(tree) != plain


@pytest.fixture
def branches(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """main: a, b, c, d (tag v2); rel-1 from b: r1 (tag v1); an unrelated orphan."""
    repo = new_repo(tmp_path / "r")
    ids = {n: commit(repo, {"f": n}, f"commit {n}") for n in ("a", "b")}
    git(repo, "checkout", "-qb", "rel-1")
    ids["r1"] = commit(repo, {"f": "r1"}, "commit r1")
    git(repo, "tag", "v1")
    git(repo, "checkout", "-q", "main")
    ids |= {n: commit(repo, {"f": n}, f"commit {n}") for n in ("c", "d")}
    git(repo, "tag", "v2")
    git(repo, "checkout", "-q", "--orphan", "other")
    ids["o"] = commit(repo, {"g": "o"}, "commit o")
    git(repo, "checkout", "-q", "main")
    return repo, ids


def test_commits_between_on_one_line(branches: tuple[Path, dict[str, str]]) -> None:
    repo, ids = branches
    commits, note = src_tree.commits_between(repo, "main~3", "v2")
    assert [c.id for c in commits] == [ids[n] for n in "abcd"]
    assert note is None
    assert commits[0].subject == "commit a" and commits[0].date


def test_commits_between_release_branches_start_at_the_merge_base(
    branches: tuple[Path, dict[str, str]],
) -> None:
    repo, ids = branches
    commits, note = src_tree.commits_between(repo, "v1", "v2")
    assert [c.id for c in commits] == [ids[n] for n in "bcd"]
    assert note is not None and note.startswith(
        f"v1 is not an ancestor of v2; starting from {ids['b'][:12]} (commit b)"
    )


def test_a_line_that_merged_the_other_branch_starts_where_the_branches_part(
    tmp_path: Path,
) -> None:
    """Release branches merged upward (as MySQL merges 8.0 into trunk): the merge base
    of 8.0.2 and 8.4.0 is fix2, on the 8.0 branch, and trunk's t1 does not contain it;
    the range starts at the newest commit of trunk's first-parent line that 8.0.2
    contains, so every commit measured contains the start."""
    repo = new_repo(tmp_path / "r")
    ids = {"root": commit(repo, {"f": "root"}, "root")}
    git(repo, "checkout", "-qb", "8.0")
    ids |= {n: commit(repo, {"g": n}, n) for n in ("fix1", "fix2")}
    git(repo, "checkout", "-q", "main")
    ids["t1"] = commit(repo, {"f": "t1"}, "t1")
    git(repo, "merge", "-q", "--no-ff", "-m", "merge 8.0", ids["fix2"])
    ids["merge"] = git(repo, "rev-parse", "HEAD")
    ids["t2"] = commit(repo, {"f": "t2"}, "t2")
    git(repo, "tag", "mysql-8.4.0")
    git(repo, "checkout", "-q", "8.0")
    ids["fix3"] = commit(repo, {"g": "fix3"}, "fix3")
    git(repo, "tag", "mysql-8.0.2")
    git(repo, "checkout", "-q", "main")
    commits, note = src_tree.commits_between(repo, "mysql-8.0.2", "mysql-8.4.0")
    assert [c.id for c in commits] == [ids[n] for n in ("root", "t1", "merge", "t2")]
    assert note is not None and f"starting from {ids['root'][:12]} (root)" in note


@pytest.mark.parametrize(
    ("good", "bad", "says"),
    [
        ("v2", "main~2", "main~2 is an ancestor of v2; give the good (older) commit first"),
        ("v2", "other", "v2 and other share no history"),
        ("v2", "main", "v2 and main are the same commit"),
        ("v2", "nope", "unknown commit 'nope'"),
    ],
)
def test_commits_between_says_what_is_wrong(
    branches: tuple[Path, dict[str, str]], good: str, bad: str, says: str
) -> None:
    repo, _ = branches
    with pytest.raises(BuildNotFound, match=re.escape(says)):
        src_tree.commits_between(repo, good, bad)


def test_resolve_commit_and_subject(branches: tuple[Path, dict[str, str]], tmp_path: Path) -> None:
    repo, ids = branches
    assert src_tree.resolve_commit(repo, "v1") == (ids["r1"], "commit r1")
    assert src_tree.subject_and_date(repo, ids["a"])[0] == "commit a"
    (tmp_path / "plain").mkdir()
    with pytest.raises(BuildNotFound, match="is not a git checkout"):
        src_tree.resolve_commit(tmp_path / "plain", "v1")


def test_good_merged_into_the_main_line_later_is_never_paired_with_earlier_commits(
    tmp_path: Path,
) -> None:
    """main: A, B, M1 (merges rel, whose R1 is GOOD), C; B does not contain R1, so it
    is not in the range: every commit listed contains GOOD."""
    repo = new_repo(tmp_path / "r")
    ids = {"A": commit(repo, {"f": "A"}, "A")}
    git(repo, "checkout", "-qb", "rel")
    ids["R1"] = commit(repo, {"g": "R1"}, "R1")
    git(repo, "checkout", "-q", "main")
    ids["B"] = commit(repo, {"f": "B"}, "B")
    git(repo, "merge", "-q", "--no-ff", "-m", "M1", ids["R1"])
    ids["M1"] = git(repo, "rev-parse", "HEAD")
    ids["C"] = commit(repo, {"f": "C"}, "C")
    commits, note = src_tree.commits_between(repo, ids["R1"], "main")
    assert [c.id for c in commits] == [ids[n] for n in ("R1", "M1", "C")]
    assert note is None
